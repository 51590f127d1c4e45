"""The task-side writer of the upload protocol on moto, and PendingUpload read back as untrusted input."""

from __future__ import annotations

import hashlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import fsspec
import pytest

from manifest_committer.errors import ManifestError
from manifest_committer.store.pending_upload import (
    EMPTY_ETAG,
    TOKEN_METADATA_KEY,
    PendingUpload,
    open_pending_upload,
)
from manifest_committer.store.s3 import S3Store
from tests.fixtures.emulators import Emulator

MIB = 2**20

pytestmark = pytest.mark.s3


def _write(fs: Any, path: str, data: bytes, block_size: int | None = None) -> PendingUpload:
    with open_pending_upload(fs, path, block_size=block_size) as writer:
        writer.write(data)
    return writer.pending


def _uploads(store: S3Store, bucket: str) -> list[tuple[str, str]]:
    return [(upload.key, upload.upload_id) for upload in store.list_uploads(bucket + "/")]


# --- the writer ---------------------------------------------------------------------------------------------------


def test_close_leaves_the_upload_incomplete_and_says_what_to_record(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/dt=1/part-0.csv"
    pending = _write(store.data_fs, path, b"a,b\n1,2\n")
    assert (pending.bucket, pending.key, pending.length) == (s3_bucket, "out/dt=1/part-0.csv", 8)
    assert pending.upload_id is not None and len(pending.etags) == 1, "a small file is one (last) part"
    assert store.info(path) is None, "nothing is visible before the upload is completed"
    assert _uploads(store, s3_bucket) == [(pending.key, pending.upload_id)]


def test_parts_are_recorded_in_order_for_a_file_of_several_blocks(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    chunk = bytes(range(256)) * (MIB // 256)
    with open_pending_upload(store.data_fs, f"{s3_bucket}/out/big.bin", block_size=5 * MIB) as writer:
        for _ in range(12):  # streamed as an engine writes: a part leaves whenever 5 MiB are buffered
            writer.write(chunk)
    pending = writer.pending
    assert pending.length == 12 * MIB
    assert len(pending.etags) == 3, "5 MiB, 5 MiB, then the last 2 MiB"
    assert store.info(f"{s3_bucket}/out/big.bin") is None
    store.complete_upload(pending)
    assert store.read_bytes(f"{s3_bucket}/out/big.bin") == chunk * 12


def test_an_empty_file_starts_no_upload(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    with open_pending_upload(store.data_fs, f"{s3_bucket}/out/empty") as writer:
        pass
    pending = writer.pending
    assert (pending.upload_id, pending.etags, pending.length) == (None, (), 0)
    assert pending.expected_etag() == EMPTY_ETAG
    assert _uploads(store, s3_bucket) == []
    assert store.info(f"{s3_bucket}/out/empty") is None


def test_the_upload_carries_the_writers_token(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    pending = _write(store.data_fs, f"{s3_bucket}/out/a", b"x")
    assert pending.token is not None
    store.complete_upload(pending)
    head = store.fs.call_s3("head_object", Bucket=s3_bucket, Key="out/a")
    assert head["Metadata"][TOKEN_METADATA_KEY] == pending.token


def test_a_users_transaction_does_not_complete_the_writers_uploads(s3_bucket: str, s3_store: S3Store) -> None:
    """fsspec's open() registers non-autocommit files in fs.transaction; a user's transaction would complete them."""
    store = s3_store
    fs = store.data_fs
    path = f"{s3_bucket}/out/in-transaction"
    with fs.transaction:
        writer = open_pending_upload(fs, path)
        writer.write(b"pending")
        writer.close()
        assert all(file.path != path for file in fs.transaction.files)
    assert store.info(path) is None, "the transaction's end completed our upload"
    assert _uploads(store, s3_bucket) == [("out/in-transaction", writer.pending.upload_id)]


def test_a_failed_write_aborts_its_upload(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    with (
        pytest.raises(RuntimeError, match="engine failed"),
        open_pending_upload(store.data_fs, f"{s3_bucket}/out/failed", block_size=5 * MIB) as writer,
    ):
        writer.write(b"y" * (6 * MIB))  # one part uploaded already
        raise RuntimeError("engine failed")
    assert _uploads(store, s3_bucket) == []
    with pytest.raises(ValueError, match="no pending upload"):
        _ = writer.pending


def test_pending_is_unavailable_while_the_writer_is_open(s3_bucket: str, s3_store: S3Store) -> None:
    store = s3_store
    writer = open_pending_upload(store.data_fs, f"{s3_bucket}/out/open")
    with pytest.raises(ValueError, match=r"out/open: no pending upload"):
        _ = writer.pending
    writer.abort()


def _write_in_child(path: str, data: bytes, storage_options: dict[str, Any]) -> dict[str, Any]:
    """A task in another process: writes one file and hands back only the manifest's JSON form."""
    fs = fsspec.filesystem("s3", **storage_options)
    return _write(fs, path, data).to_dict()


def test_a_writer_in_another_process_is_completed_by_the_parent(
    s3_bucket: str, s3_store: S3Store, moto_s3: Emulator
) -> None:
    store = s3_store
    path = f"{s3_bucket}/out/from-child"
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        document = pool.submit(_write_in_child, path, b"written by a task", moto_s3.storage_options).result(60)
    pending = PendingUpload.from_dict(document, "child manifest")
    assert store.info(path) is None
    store.complete_upload(pending)
    assert store.read_bytes(path) == b"written by a task"
    assert _uploads(store, s3_bucket) == []


# --- PendingUpload as untrusted input --------------------------------------------------------------------------------


GOOD: dict[str, Any] = {
    "bucket": "bucket-1",
    "destinationKey": "out/dt=1/a.csv",
    "uploadId": "2~abc.DEF_-x",
    "etags": ['"0123456789abcdef0123456789abcdef"', '"fedcba9876543210fedcba9876543210"'],
    "length": 5 * MIB + 3,
    "token": "0" * 32,
}


def test_a_pending_upload_round_trips_through_json() -> None:
    pending = PendingUpload.from_dict(GOOD, "m.json")
    assert pending.to_dict() == GOOD
    assert pending.path == "bucket-1/out/dt=1/a.csv"
    assert PendingUpload.from_dict({**GOOD, "token": None}, "m.json").token is None


def test_the_expected_etag_is_the_md5_of_the_part_md5s() -> None:
    pending = PendingUpload.from_dict(GOOD, "m.json")
    digests = b"".join(bytes.fromhex(etag.strip('"')) for etag in GOOD["etags"])
    assert pending.expected_etag() == hashlib.md5(digests, usedforsecurity=False).hexdigest() + "-2"
    kms = PendingUpload.from_dict({**GOOD, "etags": ['"not-an-md5"']}, "m.json")
    assert kms.expected_etag() is None, "SSE-KMS part ETags are not MD5s: nothing can be computed"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bucket", ""),
        ("bucket", "a/b"),
        ("bucket", 7),
        ("destinationKey", ""),
        ("destinationKey", "out/dir/"),
        ("destinationKey", "out/\x00x"),
        ("destinationKey", "k" * 1025),
        ("destinationKey", None),
        ("uploadId", ""),
        ("uploadId", "has space"),
        ("uploadId", 5),
        ("etags", "abc"),
        ("etags", []),
        ("etags", [""]),
        ("etags", [1]),
        ("etags", ["x"] * 10_001),
        ("length", -1),
        ("length", True),
        ("length", "5"),
        ("length", 1.5),
        ("token", "xyz"),
        ("token", 1),
    ],
)
def test_every_bad_field_is_refused_by_name(field: str, value: object) -> None:
    with pytest.raises(ManifestError, match=rf"^bad\.json: pending upload field '{field}'"):
        PendingUpload.from_dict({**GOOD, field: value}, "bad.json")


@pytest.mark.parametrize("field", ["bucket", "destinationKey", "uploadId", "etags", "length"])
def test_a_missing_field_is_named(field: str) -> None:
    document = {name: value for name, value in GOOD.items() if name != field}
    with pytest.raises(ManifestError, match=rf"bad\.json: pending upload field '{field}' is missing"):
        PendingUpload.from_dict(document, "bad.json")


def test_an_empty_file_has_no_parts_and_no_length() -> None:
    empty = {**GOOD, "uploadId": None, "etags": [], "length": 0}
    assert PendingUpload.from_dict(empty, "m.json").upload_id is None
    with pytest.raises(ManifestError, match="'uploadId' is null"):
        PendingUpload.from_dict({**empty, "length": 1}, "m.json")
    with pytest.raises(ManifestError, match="'uploadId' is null"):
        PendingUpload.from_dict({**empty, "etags": GOOD["etags"]}, "m.json")


@pytest.mark.parametrize("document", [[], "x", None, 3])
def test_a_pending_upload_must_be_an_object(document: object) -> None:
    with pytest.raises(ManifestError, match=r"bad\.json: a pending upload must be a JSON object"):
        PendingUpload.from_dict(document, "bad.json")
