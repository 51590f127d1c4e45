"""The S3 binding on moto: conditional completes and puts, evidence after lost answers, aborts, upload listing,
retries left to the committer, and S3's own error shapes."""

from __future__ import annotations

import errno
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.errors import UploadOutcomeUnknownError
from manifest_committer.retry import RetryPolicy
from manifest_committer.store import open_store, s3_error, s3_internal_error, s3_slow_down
from manifest_committer.store.pending_upload import PendingUpload, open_pending_upload
from manifest_committer.store.s3 import S3Store, is_transient_s3, open_s3_store
from tests.fixtures.emulators import free_port, moto_storage_options

MIB = 2**20

pytestmark = pytest.mark.s3


def _pending(store: S3Store, path: str, data: bytes) -> PendingUpload:
    with open_pending_upload(store.data_fs, path, block_size=5 * MIB) as writer:
        for start in range(0, len(data), MIB):
            writer.write(data[start : start + MIB])
    return writer.pending


def _keys_with_uploads(store: S3Store, prefix: str) -> list[str]:
    return sorted(upload.key for upload in store.list_uploads(prefix))


def _retry(store: S3Store, attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_wait=0.0, max_wait=0.0, is_retryable=store.is_transient)


# --- binding ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["s3://bucket/out", "s3a://bucket/out"])
def test_the_manifest_protocol_still_refuses_s3_and_names_the_upload_protocol(url: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match="S3 has no rename") as raised:
        mc.ManifestCommitter(url, "job-1")
    assert url in str(raised.value)
    assert "`upload` protocol" in str(raised.value)


def test_the_upload_protocols_store_binds_s3_urls(s3_destination: str) -> None:
    opened = open_s3_store(s3_destination)
    store, path = opened.store, opened.path
    assert isinstance(store, S3Store)
    assert store.to_url(path) == s3_destination
    assert store.from_url(s3_destination) == path
    assert store.from_url(s3_destination.replace("s3://", "s3a://")) == path
    assert store.data_fs is not store.fs, "tasks write through fsspec's shared instance, with its client's retries"
    with pytest.raises(mc.UnsupportedStoreError, match="S3 has no rename"):
        store.rename_file(path + "/a", path + "/b")
    with pytest.raises(ValueError, match="not an s3:// URL"):
        open_s3_store("gs://bucket/out")


def test_a_store_call_fails_at_once_without_client_retries() -> None:
    """s3fs would retry a refused connection five times and botocore more: the committer's policy decides."""
    opened = open_s3_store("s3://bucket/out", moto_storage_options(free_port()))
    store, path = opened.store, opened.path
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        store.info(f"{path}/file")
    assert store.is_transient(raised.value), "a refused connection is worth retrying, by the committer"
    assert time.monotonic() - started < 3.0, "with its retries, s3fs and botocore take about 4 s here"
    assert store.fs.retries == 1
    assert store.fs.config_kwargs["retries"] == {"total_max_attempts": 1, "mode": "standard"}


# --- transient or not ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        s3_slow_down,
        s3_internal_error,
        s3_error("SlowDown", 503, translated=False),
        s3_error("ServiceUnavailable", 503),
        s3_error("503", 503, "", "HeadObject"),
        s3_error("RequestTimeout", 400),
        s3_error("InternalError", 500, operation="CompleteMultipartUpload", translated=False),
        s3_error("BadGateway", 502),
        lambda: ConnectionResetError("reset by peer"),
    ],
)
def test_s3s_transient_errors_are_retried(s3_bucket: str, s3_store: S3Store, make: Callable[[], BaseException]) -> None:
    store = s3_store
    error = make()
    assert store.is_transient(error)
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise make()
        return "done"

    assert _retry(store).call(flaky, "put s3://b/k") == "done"
    assert len(calls) == 3


@pytest.mark.parametrize(
    "make",
    [
        s3_error("PreconditionFailed", 412, "At least one of the pre-conditions you specified did not hold"),
        s3_error("PreconditionFailed", 412, translated=False),
        s3_error("ConditionalRequestConflict", 409, operation="CompleteMultipartUpload"),
        s3_error("ConditionalRequestConflict", 409, translated=False),
        s3_error("NoSuchUpload", 404, operation="CompleteMultipartUpload"),
        s3_error("AccessDenied", 403),
        s3_error("InvalidPart", 400),
    ],
)
def test_answers_are_not_retried(s3_bucket: str, s3_store: S3Store, make: Callable[[], BaseException]) -> None:
    store = s3_store
    assert not store.is_transient(make())
    calls = []

    def refused() -> None:
        calls.append(1)
        raise make()

    with pytest.raises(Exception):  # noqa: B017 - whatever shape the answer has, it is raised once
        _retry(store).call(refused)
    assert len(calls) == 1


def test_a_412_on_if_none_match_is_file_exists_as_s3fs_raises_it() -> None:
    assert isinstance(s3_error("PreconditionFailed", 412)(), FileExistsError)
    slow_down = s3_slow_down()
    assert isinstance(slow_down, OSError)
    assert slow_down.errno == errno.EBUSY
    assert not is_transient_s3(ValueError("not a store error"))


def test_access_denied_is_an_auth_error(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    assert store.is_auth_error(s3_error("AccessDenied", 403)())
    assert store.is_auth_error(s3_error("InvalidAccessKeyId", 403, translated=False)())
    assert not store.is_auth_error(s3_slow_down())


# --- complete --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 5 * MIB + 1, 12 * MIB])
def test_nothing_is_visible_before_complete_and_exactly_the_bytes_after(
    s3_bucket: str, s3_store: S3Store, size: int
) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/file-{size}"
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    pending = _pending(store, path, data)
    assert store.info(path) is None
    assert store.fs.ls(f"{s3_bucket}/", detail=False) == [], "no key at all under the bucket yet"
    etag = store.complete_upload(pending)
    assert store.read_bytes(path) == data
    assert etag == pending.expected_etag()
    assert _keys_with_uploads(store, f"{s3_bucket}/") == []


def test_completing_another_upload_to_a_taken_key_fails_and_keeps_the_first(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/part-0"
    first = _pending(store, path, b"first attempt")
    second = _pending(store, path, b"second attempt, longer")
    store.complete_upload(first)
    with pytest.raises(FileExistsError, match=rf"another object is at the key.*{path}"):
        store.complete_upload(second)
    assert store.read_bytes(path) == b"first attempt"
    assert _keys_with_uploads(store, f"{s3_bucket}/") == ["out/part-0"], "the loser's upload is left to abort"


def test_same_bytes_from_another_writer_is_still_a_conflict(s3_bucket: str, s3_store: S3Store) -> None:
    """Equal ETags prove equal bytes, not authorship: the writer's token decides."""
    store = s3_store
    path = f"{s3_bucket}/out/same"
    mine, theirs = _pending(store, path, b"same bytes"), _pending(store, path, b"same bytes")
    assert mine.expected_etag() == theirs.expected_etag()
    store.complete_upload(theirs)
    with pytest.raises(FileExistsError):
        store.complete_upload(mine)


def test_an_empty_file_never_replaces_an_object(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/empty"
    store.fs.pipe_file(path, b"someone else's")
    with pytest.raises(FileExistsError):
        store.complete_upload(_pending(store, path, b""))
    assert store.read_bytes(path) == b"someone else's"


class LostAnswers:
    """Replaces ``store._call``: the named S3 method takes effect, then its answer is "lost" (a transient error);
    later calls of it get ``retry_answer`` instead of reaching S3 when one is given (what real S3 may answer)."""

    def __init__(self, store: S3Store, method: str, retry_answer: Callable[[], BaseException] | None = None) -> None:
        self.real = store._call
        self.method = method
        self.retry_answer = retry_answer
        self.calls = 0

    def __call__(self, method: str, **kwargs: Any) -> dict[str, Any]:
        if method != self.method:
            return self.real(method, **kwargs)
        self.calls += 1
        if self.calls == 1:
            self.real(method, **kwargs)
            raise s3_error("InternalError", 500, "injected: answer lost", "CompleteMultipartUpload")()
        if self.retry_answer is not None:
            raise self.retry_answer()
        return self.real(method, **kwargs)


PRECONDITION_FAILED = s3_error("PreconditionFailed", 412, operation="CompleteMultipartUpload")
NO_SUCH_UPLOAD = s3_error("NoSuchUpload", 404, operation="CompleteMultipartUpload")


@pytest.mark.parametrize(
    ("size", "retry_answer"),
    [
        pytest.param(7, None, id="multipart-moto-answers-200-again"),
        pytest.param(7, PRECONDITION_FAILED, id="multipart-412"),
        pytest.param(7, NO_SUCH_UPLOAD, id="multipart-no-such-upload"),
        pytest.param(0, None, id="empty-put-moto-answers-412"),
    ],
)
def test_a_retried_complete_whose_first_answer_was_lost_is_recognised_as_ours(
    s3_bucket: str,
    s3_store: S3Store,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    retry_answer: Callable[[], BaseException] | None,
) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/lost"
    pending = _pending(store, path, b"x" * size)
    method = "put_object" if size == 0 else "complete_multipart_upload"
    lost = LostAnswers(store, method, retry_answer)
    monkeypatch.setattr(store, "_call", lost)
    etag = _retry(store).call(lambda: store.complete_upload(pending), f"complete {path}")
    assert lost.calls == 2
    assert etag == pending.expected_etag()
    assert store.read_bytes(path) == b"x" * size


def test_a_412_for_an_object_of_unknown_origin_is_not_guessed(s3_bucket: str, s3_store: S3Store) -> None:
    """Part ETags that are not MD5s (SSE-KMS) and no token: the evidence cannot decide."""
    store = s3_store
    path = f"{s3_bucket}/out/kms"
    pending = _pending(store, path, b"data")
    store.fs.pipe_file(path, b"data")
    assert pending.upload_id is not None
    unprovable = PendingUpload(pending.bucket, pending.key, pending.upload_id, ('"kms-etag"',), pending.length, None)
    with pytest.raises(UploadOutcomeUnknownError, match=rf"s3://{path}: .*resolve by hand"):
        store.complete_upload(unprovable)


def test_completing_an_aborted_upload_is_file_not_found(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 answers NoSuchUpload (moto 5.2.5 answers 500 when the key is free, so that answer is injected here)."""
    store = s3_store
    path = f"{s3_bucket}/out/aborted"
    pending = _pending(store, path, b"data")
    assert pending.upload_id is not None
    assert store.abort_upload(path, pending.upload_id)
    real = store._call

    def as_s3_answers(method: str, **kwargs: Any) -> dict[str, Any]:
        if method == "complete_multipart_upload":
            raise NO_SUCH_UPLOAD()
        return real(method, **kwargs)

    monkeypatch.setattr(store, "_call", as_s3_answers)
    with pytest.raises(FileNotFoundError, match=rf"no longer exists.*{path}"):
        store.complete_upload(pending)
    assert store.info(path) is None


def test_a_batch_of_completions_goes_out_together_with_an_outcome_each(s3_bucket: str, s3_store: S3Store) -> None:
    """The batch's requests keep each completion's promise; a failed one is left for ``complete_upload`` to
    settle, which then answers exactly as alone."""
    store = s3_store
    taken = f"{s3_bucket}/out/taken"
    store.fs.pipe_file(taken, b"someone else's")
    uploads = [
        _pending(store, f"{s3_bucket}/out/a", b"a"),
        _pending(store, taken, b"mine"),
        _pending(store, f"{s3_bucket}/out/empty", b""),
        _pending(store, f"{s3_bucket}/out/b", b"bb"),
    ]
    outcomes = store.complete_uploads(uploads)
    assert [type(outcome).__name__ for outcome in outcomes] == ["str", "FileExistsError", "str", "str"]
    assert outcomes[0] == uploads[0].expected_etag()
    assert store.read_bytes(f"{s3_bucket}/out/a") == b"a"
    assert store.read_bytes(f"{s3_bucket}/out/empty") == b""
    assert store.read_bytes(taken) == b"someone else's", "never overwritten"
    with pytest.raises(FileExistsError, match="another object is at the key"):
        store.complete_upload(uploads[1])
    assert store.complete_upload(uploads[3]) == outcomes[3], "completed already: recognised as ours"


def test_a_read_is_one_get_whatever_its_size(s3_bucket: str, s3_store: S3Store) -> None:
    """s3fs would ask for a whole object's size (a HEAD) before reading it; the committer's reads are one GET, and a
    missing object is still ``FileNotFoundError``."""
    store = s3_store
    sent: list[str] = []
    client = store.fs.s3
    event = "before-send.s3"
    watch = lambda request, **_: sent.append(request.method)  # noqa: E731
    for size in (0, 10, 6 * MIB):
        store.fs.pipe_file(f"{s3_bucket}/read/{size}", b"x" * size)
    client.meta.events.register(event, watch)
    try:
        assert [len(store.read_bytes(f"{s3_bucket}/read/{size}")) for size in (0, 10, 6 * MIB)] == [0, 10, 6 * MIB]
        assert sent == ["GET", "GET", "GET"]
        with pytest.raises(FileNotFoundError):
            store.read_bytes(f"{s3_bucket}/read/missing")
    finally:
        client.meta.events.unregister(event, watch)


# --- put, abort, list ------------------------------------------------------------------------------------------------


def test_put_if_absent_creates_once(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/_manifest.json"
    store.put_if_absent(path, b"one", {"writer": "a"})
    with pytest.raises(FileExistsError, match="already at the key"):
        store.put_if_absent(path, b"two")
    assert store.read_bytes(path) == b"one"


def test_abort_leaves_no_upload_and_a_second_abort_says_so(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/a"
    pending = _pending(store, path, b"abc")
    assert pending.upload_id is not None
    assert store.abort_upload(path, pending.upload_id)
    assert _keys_with_uploads(store, f"{s3_bucket}/") == []
    assert not store.abort_upload(path, pending.upload_id)
    assert store.info(path) is None


def test_listing_sees_only_its_prefix(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    for key in ["out/a", "out/dt=1/b", "output/c", "other/d"]:
        _pending(store, f"{s3_bucket}/{key}", b"z")
    assert _keys_with_uploads(store, f"{s3_bucket}/out/") == ["out/a", "out/dt=1/b"]
    assert _keys_with_uploads(store, f"{s3_bucket}/out") == ["out/a", "out/dt=1/b", "output/c"]
    assert _keys_with_uploads(store, f"{s3_bucket}/") == ["other/d", "out/a", "out/dt=1/b", "output/c"]


class Pages:
    """Wraps ``store._call``: cuts ``list_multipart_uploads`` answers into pages as S3 does (moto 5.2.5 ignores
    ``MaxUploads`` and markers and always answers everything in one page)."""

    def __init__(self, store: S3Store) -> None:
        self.real = store._call
        self.requests: list[dict[str, Any]] = []

    def __call__(self, method: str, **kwargs: Any) -> dict[str, Any]:
        if method != "list_multipart_uploads":
            return self.real(method, **kwargs)
        self.requests.append(kwargs)
        size = kwargs.pop("MaxUploads")
        marker = (kwargs.pop("KeyMarker", ""), kwargs.pop("UploadIdMarker", ""))
        answer = self.real(method, **kwargs)
        uploads = sorted(answer.get("Uploads", []), key=lambda upload: (upload["Key"], upload["UploadId"]))
        after = [upload for upload in uploads if (upload["Key"], upload["UploadId"]) > marker]
        page = after[:size]
        truncated = len(after) > size
        result: dict[str, Any] = {"Uploads": page, "IsTruncated": truncated}
        if truncated:
            result.update(NextKeyMarker=page[-1]["Key"], NextUploadIdMarker=page[-1]["UploadId"])
        return result


def test_listing_follows_every_page(s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store = s3_store
    expected = []
    for index in range(7):
        key = f"out/k{index % 3}"  # several uploads of one key: a page can end between two of them
        pending = _pending(store, f"{s3_bucket}/{key}", b"p")
        expected.append((key, pending.upload_id))
    _pending(store, f"{s3_bucket}/elsewhere/x", b"q")
    pages = Pages(store)
    monkeypatch.setattr(store, "_call", pages)
    found = [(upload.key, upload.upload_id) for upload in store.list_uploads(f"{s3_bucket}/out/", page_size=2)]
    assert sorted(found) == sorted(expected)
    assert len(found) == len(set(found)) == 7
    assert len(pages.requests) == 4
    assert all(request["Prefix"] == "out/" for request in pages.requests)


def test_a_listing_that_never_advances_is_an_error(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = s3_store

    def stuck(method: str, **kwargs: Any) -> dict[str, Any]:
        return {"Uploads": [], "IsTruncated": True, "NextKeyMarker": "k", "NextUploadIdMarker": "u"}

    monkeypatch.setattr(store, "_call", stuck)
    with pytest.raises(OSError, match="no new place to resume"):
        store.list_uploads(f"{s3_bucket}/out/")


def test_open_store_refuses_s3_before_connecting() -> None:
    with pytest.raises(mc.UnsupportedStoreError, match="upload"):
        open_store("s3://bucket/out")


def _answer_complete_with(store: S3Store, monkeypatch: pytest.MonkeyPatch, make: Callable[[], BaseException]) -> None:
    real = store._call

    def answer(method: str, **kwargs: Any) -> dict[str, Any]:
        if method == "complete_multipart_upload":
            raise make()
        return real(method, **kwargs)

    monkeypatch.setattr(store, "_call", answer)


def test_a_412_that_does_not_name_its_condition_is_still_a_conflict(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """s3fs makes a 412 FileExistsError only when S3 names If-None-Match; otherwise an OSError(EINVAL)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    store = s3_store
    path = f"{s3_bucket}/out/taken"
    store.fs.pipe_file(path, b"someone else's")
    pending = _pending(store, path, b"mine")
    answer = {"Error": {"Code": "PreconditionFailed", "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": 412}}
    bare = translate_boto_error(ClientError(answer, "CompleteMultipartUpload"))
    assert type(bare) is OSError
    _answer_complete_with(
        store, monkeypatch, lambda: translate_boto_error(ClientError(answer, "CompleteMultipartUpload"))
    )
    with pytest.raises(FileExistsError, match="another object is at the key"):
        store.complete_upload(pending)
    assert store.read_bytes(path) == b"someone else's"


def test_a_409_on_complete_says_the_upload_is_lost_and_is_not_retried(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/conflict"
    pending = _pending(store, path, b"data")
    conflict = s3_error("ConditionalRequestConflict", 409, "injected", "CompleteMultipartUpload")
    _answer_complete_with(store, monkeypatch, conflict)
    calls = []

    def complete() -> str:
        calls.append(1)
        return store.complete_upload(pending)

    with pytest.raises(OSError, match=rf"409 \(ConditionalRequestConflict\).*uploaded again.*{path}"):
        _retry(store).call(complete)
    assert len(calls) == 1


def test_completions_ask_the_clients_model_once_per_parameter(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each completion asked botocore's service model twice (``IfNoneMatch``, ``MpuObjectSize``): CPU on the
    job's threads for an answer that never changes."""
    store = S3Store(s3_store.fs, data_fs=s3_store.data_fs)  # the session's clients, a binding of its own
    model = store.fs.s3.meta.service_model
    asked: list[str] = []
    lookup = model.operation_model

    def counted(operation: str) -> Any:
        if sys._getframe(1).f_code.co_name == "_accepts":  # botocore asks too, once a request, for itself
            asked.append(operation)
        return lookup(operation)

    monkeypatch.setattr(model, "operation_model", counted)
    for index in range(3):
        store.complete_upload(_pending(store, f"{s3_bucket}/model/{index}.bin", b"x" * 10))

    assert asked == ["CompleteMultipartUpload", "CompleteMultipartUpload"], "IfNoneMatch, MpuObjectSize: once"
    assert [s3_store.fs.cat_file(f"{s3_bucket}/model/{index}.bin") for index in range(3)] == [b"x" * 10] * 3


# --- deletes ---------------------------------------------------------------------------------------------------------


def _keys(store: S3Store, bucket: str) -> list[str]:
    return sorted(path.split("/", 1)[1] for path in store.fs.find(bucket))


def _requests_sent(store: S3Store) -> tuple[list[str], Callable[[], None]]:
    """The operations the client sends from now on, and how to stop watching."""
    sent: list[str] = []
    client = store.fs.s3
    watch = lambda model, **_: sent.append(model.name)  # noqa: E731
    client.meta.events.register("before-call.s3", watch)
    return sent, lambda: client.meta.events.unregister("before-call.s3", watch)


def test_a_directory_is_deleted_a_page_at_a_time_without_probes_or_globs(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page of the listing goes in one DeleteObjects, the directory's own key (a file or a marker) with the
    last; no HEAD where the listing found something; ``[1]`` is a name, not a pattern matching ``1``."""
    store = s3_store
    monkeypatch.setattr("manifest_committer.store.s3.DELETE_BATCH", 4)  # pages of 3 keys
    below = [f"out/dir[1]/{name}" for name in ("a", "b", "c/d", "c/e", "f", "g", "h/")]
    kept = ["out/dir1/a", "out/dir[1]x", "out/dir[1]x/a", "out/dir[2]/a"]
    for key in [*below, "out/dir[1]", *kept]:
        store.fs.pipe_file(f"{s3_bucket}/{key}", b"x")
    sent, stop = _requests_sent(store)
    try:
        assert store.delete_dir(f"{s3_bucket}/out/dir[1]")
    finally:
        stop()
    assert _keys(store, s3_bucket) == sorted(kept)
    assert sent == ["ListObjectsV2", "DeleteObjects"] * 3, (
        "7 keys below in pages of 3, the directory's own with the last"
    )


def test_deleting_a_file_or_nothing_through_delete_dir(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    store.fs.pipe_file(f"{s3_bucket}/out/file", b"x")
    store.fs.pipe_file(f"{s3_bucket}/out/file2/a", b"x")
    sent, stop = _requests_sent(store)
    try:
        assert store.delete_dir(f"{s3_bucket}/out/file")
        assert not store.delete_dir(f"{s3_bucket}/out/missing")
    finally:
        stop()
    assert _keys(store, s3_bucket) == ["out/file2/a"]
    assert sent == ["ListObjectsV2", "HeadObject", "DeleteObjects", "ListObjectsV2", "HeadObject"]


@pytest.mark.parametrize(
    "answer",
    [("AccessDenied", PermissionError, False), ("SlowDown", OSError, True), ("InternalError", OSError, True)],
    ids=["AccessDenied", "SlowDown", "InternalError"],
)
def test_a_key_s3_would_not_delete_raises_its_error(
    s3_bucket: str, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, answer: tuple[str, type[BaseException], bool]
) -> None:
    """DeleteObjects answers 200 with an error a key (a fault moto cannot make): the delete fails with that key."""
    code, error, transient = answer
    store = s3_store
    store.fs.pipe_file(f"{s3_bucket}/out/dir/a", b"x")
    real = store.fs._call_s3

    async def refusing(method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "delete_objects":
            return {"Errors": [{"Key": "out/dir/a", "Code": code, "Message": "no"}]}
        return await real(method, *args, **kwargs)

    monkeypatch.setattr(store.fs, "_call_s3", refusing)
    with pytest.raises(error, match="out/dir/a") as raised:
        store.delete_dir(f"{s3_bucket}/out/dir")
    assert store.is_transient(raised.value) is transient
    monkeypatch.undo()
    assert _keys(store, s3_bucket) == ["out/dir/a"]


def test_a_directory_in_a_missing_bucket_is_nothing_to_delete(s3_store: S3Store) -> None:
    assert not s3_store.delete_dir("no-such-bucket-here/out/dir")
