"""A task's file on S3 as a multipart upload to its final key, left incomplete until job commit.

The writer (``open_pending_upload``) streams a file into a multipart upload of the destination key and, on
close, leaves the upload incomplete: nothing is visible at the key until the job commit completes it
(``S3Store.complete_upload``). What the job commit needs to do that is a ``PendingUpload``, recorded in the
task's manifest.

Decisions every part of the ``upload`` protocol relies on:

- **Empty files start no upload.** A multipart upload needs at least one part, and a 0-byte part is not
  something every S3 implementation accepts; so an empty file is a ``PendingUpload`` with ``upload_id=None``,
  and job commit creates it with a ``PutObject`` carrying ``If-None-Match: *``. A task that writes an empty file
  therefore leaves nothing on the store at all.
- **Files under 5 MiB** are one part: S3 allows the last part, and so the only one, to be smaller.
- **Every object carries a token.** The writer generates a random token and stores it as user metadata
  (``x-amz-meta-manifest-committer-token``) on the upload, so the completed object carries it. When a retried
  completion meets an object at the key, the token (and the multipart ETag where it can be computed) proves
  whether that object is this upload's, without guessing.
- **A user's ``fs.transaction`` never completes our uploads.** fsspec's ``open`` registers every non-autocommit
  file in ``fs.transaction.files``, and a ``with fs.transaction:`` block of the user's would complete them on
  exit; the writer opens through s3fs's ``_open``, which registers nothing.
- **A failed write leaves no upload.** Leaving a ``with`` block by an exception aborts the upload.

A ``PendingUpload`` read back from a manifest is untrusted input: ``from_dict`` checks every field and names
the one at fault. Whether its key lies inside the job's destination is for the protocol to decide, with the
rest of what a manifest may name.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ManifestError

log = logging.getLogger(__name__)

TOKEN_METADATA_KEY = "manifest-committer-token"
"""User-metadata name (``x-amz-meta-...``) of the writer's token on every object the upload protocol creates."""

MAX_PARTS = 10_000
"""S3's limit on the parts of one multipart upload."""
MAX_KEY_BYTES = 1024
"""S3's limit on the length of a key, in UTF-8 bytes."""

EMPTY_ETAG = hashlib.md5(b"", usedforsecurity=False).hexdigest()
"""The ETag of an empty object written by ``PutObject`` without SSE-KMS or SSE-C."""

_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]{1,1024}")
_TOKEN = re.compile(r"[0-9a-f]{32}")
_PLAIN_MD5 = re.compile(r"[0-9a-f]{32}")


def _strip_quotes(etag: str) -> str:
    return etag.strip('"').lower()


@dataclass(frozen=True, slots=True)
class PendingUpload:
    """Everything job commit needs to publish one task file on S3: where, which upload, its parts, its length.

    ``upload_id`` is ``None`` for an empty file (no upload exists; job commit PUTs an empty object). ``etags``
    are the parts' ETags as S3 returned them, part N at index N-1. ``token`` is the value of the
    ``manifest-committer-token`` metadata the object will carry (``None`` when the upload was made by another
    writer; then only the ETag can prove an object is this upload's).
    """

    bucket: str
    key: str
    upload_id: str | None
    etags: tuple[str, ...]
    length: int
    token: str | None

    def __post_init__(self) -> None:
        _validate(self.to_dict(), f"pending upload of s3://{self.bucket}/{self.key}")

    @property
    def path(self) -> str:
        """The object's path in s3fs's form, ``bucket/key``."""
        return f"{self.bucket}/{self.key}"

    def expected_etag(self) -> str | None:
        """The ETag S3 gives the completed object, when it can be computed from the parts' ETags.

        A multipart object's ETag is the MD5 of the concatenated binary MD5s of its parts, then ``-N``; an empty
        object's is the MD5 of nothing. With SSE-KMS or SSE-C the part ETags are not MD5s: ``None``.
        """
        if self.upload_id is None:
            return EMPTY_ETAG
        digests = [_strip_quotes(etag) for etag in self.etags]
        if not all(_PLAIN_MD5.fullmatch(digest) for digest in digests):
            return None
        combined = hashlib.md5(b"".join(bytes.fromhex(digest) for digest in digests), usedforsecurity=False)
        return f"{combined.hexdigest()}-{len(digests)}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form recorded in a task manifest (field names after S3A's ``SinglePendingCommit``)."""
        return {
            "bucket": self.bucket,
            "destinationKey": self.key,
            "uploadId": self.upload_id,
            "etags": list(self.etags),
            "length": self.length,
            "token": self.token,
        }

    @classmethod
    def from_dict(cls, document: object, source: str) -> PendingUpload:
        """Read one pending upload from untrusted JSON; ``ManifestError`` naming ``source`` and the bad field."""
        if not isinstance(document, Mapping):
            raise ManifestError(f"{source}: a pending upload must be a JSON object, not {type(document).__name__}")
        _validate(document, source)
        return cls(
            bucket=document["bucket"],
            key=document["destinationKey"],
            upload_id=document["uploadId"],
            etags=tuple(document["etags"]),
            length=int(document["length"]),
            token=document.get("token"),
        )


def _validate(document: Mapping[str, Any], source: str) -> None:
    def bad(field: str, why: str) -> ManifestError:
        return ManifestError(f"{source}: pending upload field {field!r} {why}")

    for field in ("bucket", "destinationKey", "uploadId", "etags", "length"):
        if field not in document:
            raise bad(field, "is missing")
    bucket, key, upload_id = document["bucket"], document["destinationKey"], document["uploadId"]
    etags, length, token = document["etags"], document["length"], document.get("token")
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
        raise bad("bucket", f"is not a bucket name: {bucket!r}")
    if not isinstance(key, str) or not key:
        raise bad("destinationKey", f"must be a non-empty string, got {key!r}")
    if "\x00" in key or key.endswith("/") or len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise bad("destinationKey", f"is not an object key (NUL, trailing '/' or over 1024 bytes): {key!r}")
    if upload_id is not None and (not isinstance(upload_id, str) or not _VISIBLE_ASCII.fullmatch(upload_id)):
        raise bad("uploadId", f"must be null or a non-empty string of visible ASCII, got {upload_id!r}")
    if not isinstance(etags, list | tuple) or not all(
        isinstance(etag, str) and _VISIBLE_ASCII.fullmatch(etag) for etag in etags
    ):
        raise bad("etags", "must be a list of non-empty strings of visible ASCII")
    # JSON Schema's integer, as every decoder reads it (``_decode.integer``): 2.0 counts, true does not.
    integral = type(length) is int or (type(length) is float and length.is_integer())
    if not integral or length < 0:
        raise bad("length", f"must be a non-negative integer, got {length!r}")
    if upload_id is None and (etags or length != 0):
        raise bad("uploadId", "is null (an empty file, no upload) but the entry has parts or a length")
    if upload_id is not None and not 1 <= len(etags) <= MAX_PARTS:
        raise bad("etags", f"must list 1 to {MAX_PARTS} part ETags for an upload, got {len(etags)}")
    if token is not None and (not isinstance(token, str) or not _TOKEN.fullmatch(token)):
        raise bad("token", f"must be null or 32 lowercase hex digits, got {token!r}")


class PendingUploadWriter(io.RawIOBase):
    """A binary file whose bytes go into a multipart upload of its final key, left incomplete on close.

    After ``close()``, ``pending`` says what job commit needs to complete it. Only sequential writes.
    """

    def __init__(
        self,
        fs: Any,
        path: str,
        *,
        block_size: int | None = None,
        on_started: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.token = uuid.uuid4().hex
        metadata = {**fs.s3_additional_kwargs.get("Metadata", {}), TOKEN_METADATA_KEY: self.token}
        # fs._open, not fs.open: open() would register the file in fs.transaction.files (see the module doc).
        self._file = fs._open(path, "wb", block_size=block_size, autocommit=False, Metadata=metadata)
        self._pending: PendingUpload | None = None
        self.path = path
        if on_started is not None:
            self._record_start(on_started)

    def _record_start(self, on_started: Callable[[str, str, str], None]) -> None:
        """Call ``on_started(bucket, key, upload_id)`` as soon as S3 has created the upload, before any part is
        sent: whoever aborts uploads by the ids it recorded then knows this one. If the record fails, the upload
        is aborted at once and the error raised (an upload nobody recorded must not stay)."""
        file = self._file
        initiate = file._initiate_upload

        def initiate_and_record() -> None:
            initiate()
            if not file.mpu:
                return
            upload_id = file.mpu["UploadId"]
            try:
                on_started(file.bucket, file.key, upload_id)
            except BaseException:
                log.warning("Aborting the upload of %s: its start could not be recorded", self.path)
                file.discard()
                file.closed = True
                raise

        file._initiate_upload = initiate_and_record

    # --- the file interface -----------------------------------------------------------------------------------

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        written: int = self._file.write(data)
        return written

    def tell(self) -> int:
        position: int = self._file.tell()
        return position

    def flush(self) -> None:
        if not self.closed and not self._file.closed:  # io's close() flushes after our close() finished the file
            self._file.flush()

    def close(self) -> None:
        """Upload what is buffered as the last part and leave the upload incomplete; see ``pending``."""
        if self.closed:
            return
        try:
            self._pending = self._finish()
        finally:
            super().close()

    def abort(self) -> None:
        """Abort the upload (if one was started) and close; nothing of this file remains on the store."""
        if self.closed:
            return
        try:
            self._file.discard()  # s3fs: aborts the upload, if one was started, and drops the buffer
            self._file.closed = True
        finally:
            super().close()

    def __exit__(self, error_type: object, error: object, traceback: object) -> None:
        if error_type is not None:
            log.debug("Aborting the upload of %s: the writer failed", self.path)
            self.abort()
        else:
            self.close()

    # --- the result -------------------------------------------------------------------------------------------

    @property
    def pending(self) -> PendingUpload:
        """What a manifest must record about this file; only after a successful ``close()``."""
        if self._pending is None:
            raise ValueError(f"{self.path}: no pending upload: the writer is open, or was aborted")
        return self._pending

    def _finish(self) -> PendingUpload:
        file = self._file
        if file.offset is None and file.tell() == 0:
            # Nothing written and nothing flushed: no upload was started, and none must be (see the module doc).
            file.discard()
            file.closed = True
            return PendingUpload(file.bucket, file.key, None, (), 0, self.token)
        file.close()  # autocommit=False: uploads the buffer as the last part, does not complete
        etags = tuple(part["ETag"] for part in file.parts)
        return PendingUpload(file.bucket, file.key, file.mpu["UploadId"], etags, file.tell(), self.token)


def open_pending_upload(
    fs: Any,
    path: str,
    *,
    block_size: int | None = None,
    on_started: Callable[[str, str, str], None] | None = None,
) -> PendingUploadWriter:
    """Open ``path`` (``bucket/key`` on the s3fs filesystem ``fs``) for writing as a pending upload.

    ``block_size``: bytes buffered before a part is sent (at least 5 MiB; s3fs's default is 50 MiB).
    ``on_started(bucket, key, upload_id)``: called once the multipart upload exists, before its first part.
    """
    return PendingUploadWriter(fs, path, block_size=block_size, on_started=on_started)
