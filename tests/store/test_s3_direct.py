"""S3 completions sent as ``s3_direct`` builds them (after the SDK's first completion of a bucket shows the way):
the same promises as through the SDK (never overwriting, one outcome each, s3fs's errors), keys of any
characters, and the SDK path kept wherever the SDK's request carries what this module does not send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fsspec.asyn import sync

from manifest_committer.store import s3_direct
from manifest_committer.store.operations import use_client_calls_only
from manifest_committer.store.pending_upload import PendingUpload, open_pending_upload
from manifest_committer.store.s3 import S3Store, open_s3_store

pytestmark = pytest.mark.s3

KEYS = ["a.csv", "dir=1/a b+c%d~e.csv", "ünï/çø.csv", "x?y#z&w.csv", "deep/er/and'quoted\".csv"]


def _pending(store: S3Store, path: str, data: bytes) -> PendingUpload:
    with open_pending_upload(store.data_fs, path) as writer:
        writer.write(data)
    return writer.pending


class _SdkCompletions:
    """Counts the completions the SDK sends for one bucket (direct ones pass none of its events)."""

    def __init__(self, store: S3Store, bucket: str) -> None:
        sync(store.fs.loop, store.fs.set_session)
        self.client = sync(store.fs.loop, store.fs.get_s3, bucket)
        self.sent = 0

    def __call__(self, **_: Any) -> None:
        self.sent += 1

    def __enter__(self) -> _SdkCompletions:
        self.client.meta.events.register("before-send.s3.CompleteMultipartUpload", self)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.meta.events.unregister("before-send.s3.CompleteMultipartUpload", self)


@pytest.fixture
def store(s3_bucket: str) -> Iterator[S3Store]:
    opened = open_s3_store(f"s3://{s3_bucket}/out").store
    yield opened
    opened.close()


def test_after_the_first_completion_of_a_bucket_the_rest_go_direct_keeping_every_promise(
    s3_bucket: str, store: S3Store
) -> None:
    taken = f"{s3_bucket}/out/taken.csv"
    store.fs.pipe_file(taken, b"someone else's")
    uploads = [_pending(store, f"{s3_bucket}/out/{key}", key.encode() * 3) for key in KEYS]
    uploads.append(_pending(store, taken, b"mine"))
    aborted = _pending(store, f"{s3_bucket}/out/aborted.csv", b"gone")
    store.abort_upload(aborted.path, str(aborted.upload_id))
    uploads.append(aborted)
    with _SdkCompletions(store, s3_bucket) as sdk:
        outcomes = store.complete_uploads(uploads)
    assert sdk.sent == 1, "only the first completion of the bucket went through the SDK"
    assert store._routes[s3_bucket] is not None
    assert outcomes[: len(KEYS)] == [upload.expected_etag() for upload in uploads[: len(KEYS)]]
    for key in KEYS:
        assert store.read_bytes(f"{s3_bucket}/out/{key}") == key.encode() * 3
    assert isinstance(outcomes[-2], FileExistsError), "an object at the key: 412, as s3fs raises it"
    assert store.read_bytes(taken) == b"someone else's", "never overwritten"
    assert isinstance(outcomes[-1], OSError), "an aborted upload: an error (moto answers 500), left to settle"
    assert store.info(aborted.path) is None
    assert store.complete_upload(uploads[1]) == outcomes[1], "completed already: the SDK path recognises it as ours"


def test_with_direct_requests_off_every_completion_goes_through_the_sdk(s3_bucket: str) -> None:
    """``store.direct.requests=false``: no route is learned and every completion is the SDK's own."""
    store = open_s3_store(f"s3://{s3_bucket}/out").store
    try:
        use_client_calls_only(store)
        uploads = [_pending(store, f"{s3_bucket}/out/{key}", key.encode() * 3) for key in KEYS]
        with _SdkCompletions(store, s3_bucket) as sdk:
            outcomes = store.complete_uploads(uploads)
        assert sdk.sent == len(KEYS)
        assert s3_bucket not in store._routes
        assert outcomes == [upload.expected_etag() for upload in uploads]
        for key in KEYS:
            assert store.read_bytes(f"{s3_bucket}/out/{key}") == key.encode() * 3
    finally:
        store.close()


def test_a_request_the_sdk_sends_with_a_header_this_module_would_not_keeps_the_sdk_path(s3_bucket: str) -> None:
    store = open_s3_store(f"s3://{s3_bucket}/out", {"s3_additional_kwargs": {"RequestPayer": "requester"}}).store
    try:
        uploads = [_pending(store, f"{s3_bucket}/out/{name}.csv", name.encode()) for name in "abc"]
        with _SdkCompletions(store, s3_bucket) as sdk:
            outcomes = store.complete_uploads(uploads)
        assert store._routes[s3_bucket] is None
        assert sdk.sent == 3
        assert outcomes == [upload.expected_etag() for upload in uploads]
    finally:
        store.close()


AUTHORIZATION = "AWS4-HMAC-SHA256 Credential=AKID/20261127/eu-west-1/s3/aws4_request, SignedHeaders=host, Signature=0"


@pytest.mark.parametrize(
    ("url", "headers", "key", "route"),
    [
        (
            "https://b.s3.eu-west-1.amazonaws.com/dir/a%20b.csv?uploadId=U",
            {"Authorization": AUTHORIZATION, "If-None-Match": "*", "X-Amz-Date": "x"},
            "dir/a b.csv",
            s3_direct.Route("https://b.s3.eu-west-1.amazonaws.com/", "eu-west-1", "s3"),
        ),
        (
            "http://127.0.0.1:9/b/k?uploadId=U",
            {"Authorization": AUTHORIZATION, "x-amz-security-token": "t"},
            "k",
            s3_direct.Route("http://127.0.0.1:9/b/", "eu-west-1", "s3"),
        ),
        ("http://h/b/k?uploadId=U", {"Authorization": AUTHORIZATION, "x-amz-request-payer": "requester"}, "k", None),
        ("http://h/b/k?uploadId=U", {"Authorization": AUTHORIZATION, "Content-MD5": "x"}, "k", None),
        ("http://h/b/k?uploadId=U", {"Authorization": "AWS AKID:signature"}, "k", None),
        ("http://h/b/k?uploadId=U", {}, "k", None),
        ("http://h/b/other?uploadId=U", {"Authorization": AUTHORIZATION}, "k", None),
        ("http://h/b/k?uploadId=U&x-id=1", {"Authorization": AUTHORIZATION}, "k", None),
    ],
)
def test_a_route_is_taken_only_from_a_sigv4_request_of_the_key_with_headers_sent_here_too(
    url: str, headers: dict[str, str], key: str, route: s3_direct.Route | None
) -> None:
    assert s3_direct.route_of(url, headers, key) == route


def test_answers_become_the_errors_s3fs_raises(s3_store: S3Store) -> None:
    result = b'<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag>"abc-2"</ETag>'
    assert s3_direct.parse_answer(200, result + b"</CompleteMultipartUploadResult>") == "abc-2"
    busy = s3_direct.parse_answer(503, b"<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>")
    assert isinstance(busy, dict)
    assert s3_store.is_transient(s3_direct.client_error(busy, 503))
    late = s3_direct.parse_answer(200, b"<Error><Code>InternalError</Code><Message>x</Message></Error>")
    assert isinstance(late, dict)
    assert s3_store.is_transient(s3_direct.client_error(late, 200)), "an error inside a 200 answer: a 500"
    taken = s3_direct.parse_answer(
        412, b"<Error><Code>PreconditionFailed</Code><Condition>If-None-Match</Condition></Error>"
    )
    assert isinstance(taken, dict) and isinstance(s3_direct.client_error(taken, 412), FileExistsError)
    with pytest.raises(s3_direct.CompletionAnswerError):
        s3_direct.parse_answer(200, b"<html>proxy page</html>")
    page = s3_direct.parse_answer(502, b"<html>bad gateway")
    assert isinstance(page, dict) and s3_store.is_transient(s3_direct.client_error(page, 502))
