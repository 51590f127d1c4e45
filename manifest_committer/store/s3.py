"""Amazon S3 through s3fs (``s3://``, ``s3a://``): the store calls of the ``upload`` protocol.

S3 has no rename, so the manifest protocol refuses it (``factory.open_store``). What S3 has instead is enough
for a committer: a multipart upload stays invisible until it is completed, and both ``PutObject`` and
``CompleteMultipartUpload`` accept ``If-None-Match: *``, which makes the write fail with 412 rather than
replace an object. This binding gives the ``upload`` protocol those calls, each with one exact promise:

- ``put_if_absent``: create an object, never replace one.
- ``complete_upload``: publish a ``PendingUpload`` at its key, never replacing an object; repeatable after a lost
  answer, deciding "already ours" or "conflict" from evidence (the writer's token in the object's metadata,
  and the multipart ETag computed from the parts' ETags), never by guessing.
- ``abort_upload``: make one upload go away.
- ``list_uploads``: the incomplete uploads under one prefix, across every page. s3fs's
  ``list_multipart_uploads`` takes no prefix and reads one page; its ``clear_multipart_uploads`` aborts every
  upload of the bucket, other jobs' too, and is never used here.

The committer's calls go through a private s3fs instance whose retries (s3fs's own loop and botocore's) are
switched off, so the committer's retry policy alone decides how long a call may take; tasks write through
fsspec's shared instance, which keeps them. ``is_transient`` says which S3 errors that policy may retry:
throttling (``SlowDown``, 503), server errors (500, ``InternalError``), ``RequestTimeout`` and lost
connections. A 412 (precondition failed) and a 409 (``ConditionalRequestConflict``: "re-upload the parts") are
answers, not accidents.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from fsspec.asyn import sync

from ..errors import UnsupportedStoreError, UploadOutcomeUnknownError
from ..urls import decode_path, split_url
from . import s3_direct
from .bindings import OpenedStore, StoreBinding, cloud_filesystems
from .operations import AUTH_STATUS_CODES, FsspecStore, StoreCapabilities
from .pending_upload import TOKEN_METADATA_KEY, PendingUpload
from .transient import RETRYABLE_STATUS_CODES, caused_by_transient, is_transient_generic

log = logging.getLogger(__name__)

S3_SCHEMES = ("s3", "s3a")
CREDENTIAL_SOURCES = (
    "storage_options key and secret (or profile, or anon=True); or the environment variables AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the shared credentials file (~/.aws/credentials), or an instance role"
)
"""Where s3fs (botocore) finds S3 credentials, for the messages of missing or refused ones."""

S3_RETRYABLE_ERROR_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
    }
)
"""S3 error codes (``<Code>`` of the error document) that a retry may cure."""

S3_DEFINITE_ERROR_CODES = frozenset(
    {"PreconditionFailed", "ConditionalRequestConflict", "NoSuchUpload", "NoSuchKey", "NoSuchBucket", "InvalidPart"}
)
"""Answers a retry would only repeat; ``ConditionalRequestConflict`` (409) on a completion means the parts must be
uploaded again under a new upload, which a retry of the same call cannot do."""

_CONNECTION_ERROR_NAMES = frozenset(
    {
        # botocore: the request never reached S3, or its answer never came back whole.
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ProxyConnectionError",
        "HTTPClientError",
        "ResponseStreamingError",
        "IncompleteReadError",
        # botocore cannot parse a throttling answer that arrived as invalid XML (s3fs retries it for that reason).
        "ResponseParserError",
        # fsspec's timeout around an s3fs call.
        "FSTimeoutError",
    }
)

DELETE_BATCH = 1000
"""Keys a ``DeleteObjects`` request takes at most, and a listing page holds."""
_DELETE_ERROR_STATUS = {"AccessDenied": 403, "SlowDown": 503, "ServiceUnavailable": 503}
"""The HTTP status S3 gives these codes when a whole request fails: a key's error in ``DeleteObjects`` has none."""
_AUTH_ERROR_CODES = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled"}
)

S3_CAPABILITIES = StoreCapabilities(
    atomic_rename=False, etags_preserved_in_rename=False, real_directories=False, pending_uploads=True
)
"""No rename at all (``rename_file`` is refused); the ``upload`` protocol's calls instead."""


def client_error_details(error: BaseException) -> tuple[str | None, int | None] | None:
    """``(code, HTTP status)`` of a botocore ``ClientError``, or ``None`` for any other error."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict) or "Error" not in response:
        return None
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (str(code) if code is not None else None, status if isinstance(status, int) else None)


def _client_error_in_chain(error: BaseException) -> tuple[str | None, int | None] | None:
    """``client_error_details`` of ``error`` or of its first explicit cause that is a ``ClientError``."""
    current: BaseException | None = error
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        details = client_error_details(current)
        if details is not None:
            return details
        seen.add(id(current))
        current = current.__cause__
    return None


def is_transient_s3(error: BaseException) -> bool:
    """An S3 error (botocore's, or s3fs's translation of it) that a retry may cure.

    s3fs turns ``SlowDown``/503 into ``OSError(EBUSY)``, 500 into ``OSError(EREMOTEIO)`` and ``RequestTimeout``
    into ``TimeoutError`` (all transient everywhere); other codes become ``OSError(EIO)`` with botocore's
    ``ClientError`` as ``__cause__``, which ``S3Store.is_transient`` follows.
    """
    if is_transient_generic(error):
        return True
    if {cls.__name__ for cls in type(error).__mro__} & _CONNECTION_ERROR_NAMES:
        return True
    details = client_error_details(error)
    if details is None:
        return False
    code, status = details
    if code in S3_DEFINITE_ERROR_CODES:
        return False
    return code in S3_RETRYABLE_ERROR_CODES or status in RETRYABLE_STATUS_CODES


def without_client_retries(fs: Any) -> Any:
    """``fs`` (an s3fs filesystem not yet connected) with s3fs's and botocore's retries switched off.

    s3fs retries ``SlowDown`` and connection errors five times in its own loop, and botocore retries throttling
    and 5xx answers under its retry mode; either would hide a storm from the committer's policy and stretch one
    store call far past its time limit. One attempt each; the committer's policy retries.
    """
    fs.retries = 1  # s3fs's _error_wrapper: range(retries) attempts
    fs.config_kwargs = {**fs.config_kwargs, "retries": {"total_max_attempts": 1, "mode": "standard"}}
    if getattr(fs, "_s3", None) is not None:  # connected already: rebuild the client with the new config
        fs.connect(refresh=True)
    return fs


@dataclass(frozen=True, slots=True)
class IncompleteUpload:
    """One multipart upload that is neither completed nor aborted, as S3 lists it."""

    bucket: str
    key: str
    upload_id: str
    initiated: datetime | None

    @property
    def path(self) -> str:
        return f"{self.bucket}/{self.key}"


@runtime_checkable
class UploadStore(Protocol):
    """The calls the ``upload`` protocol needs beyond ``StoreOperations``: ``S3Store``'s, or a wrapper's of it."""

    def put_if_absent(self, path: str, data: bytes, metadata: dict[str, str] | None = None) -> str: ...

    def complete_upload(self, pending: PendingUpload) -> str: ...

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]: ...

    def holds(self, pending: PendingUpload) -> str | None: ...

    def abort_upload(self, path: str, upload_id: str) -> bool: ...

    def list_uploads(self, prefix: str, page_size: int = 1000) -> list[IncompleteUpload]: ...


class S3Store(FsspecStore):
    """S3 via s3fs, for the ``upload`` protocol: conditional creates and completions, upload listing and aborts.

    The generic probes and deletes of ``FsspecStore`` work on s3fs as they are; ``rename_file`` is refused.
    """

    capabilities = S3_CAPABILITIES
    credential_sources = CREDENTIAL_SOURCES

    def __init__(self, fs: Any, scheme: str = "s3", data_fs: Any = None) -> None:
        super().__init__(fs, scheme, data_fs)
        self._direct = True
        """Whether completions may go direct (``s3_direct``); ``use_client_calls_only`` turns it off."""
        self._routes: dict[str, s3_direct.Route | None] = {}
        """Per bucket, where its completions go directly, or ``None`` where they keep the SDK path (``s3_direct``)."""
        # One GET a read: s3fs releases with ``max_concurrency`` first ask for a whole object's size (a HEAD), to
        # split a large one into concurrent ranges; the committer's documents are small, and that HEAD was a third
        # of the job commit's reads.
        if "max_concurrency" in inspect.signature(fs._cat_file).parameters:
            self._read_options = {"max_concurrency": 1}
        self._accepted: dict[tuple[str, str], bool] = {}
        """``_accepts`` answers: the client's model does not change, and each completion asked twice (two
        lookups through botocore's service model, a visible share of a completion's CPU on the job's threads)."""

    def from_url(self, url: str) -> str:
        scheme, authority, path = split_url(url)
        if scheme not in S3_SCHEMES:
            raise ValueError(f"{url} is not an s3:// URL")
        return decode_path(f"{authority}{path}" if authority else path.lstrip("/"))

    # --- errors -----------------------------------------------------------------------------------------------

    def is_transient(self, error: BaseException) -> bool:
        return caused_by_transient(error, is_transient_s3)

    def _is_auth_error_here(self, error: BaseException) -> bool:
        """s3fs's ``PermissionError`` (``AccessDenied``), botocore's ``NoCredentialsError``, or a 401/403 answer."""
        if super()._is_auth_error_here(error):
            return True
        if {cls.__name__ for cls in type(error).__mro__} & {"NoCredentialsError", "PartialCredentialsError"}:
            return True
        details = client_error_details(error)
        return details is not None and (details[0] in _AUTH_ERROR_CODES or details[1] in AUTH_STATUS_CODES)

    def use_client_calls_only(self) -> None:
        """Completions through the SDK's own call (``s3_direct`` off); a batch's still go out together."""
        self._direct = False

    # --- deletes ----------------------------------------------------------------------------------------------

    def delete_dir(self, path: str) -> bool:
        """Every object below ``path/`` and the one at ``path`` itself (a file, or a directory's marker), a page of
        the listing at a time, each page in one ``DeleteObjects``; ``False`` if there was none.

        Not s3fs's recursive ``rm``: it probes the directory (a HEAD and a listing) before listing it again to
        expand it, and expands glob characters in its name."""
        bucket, key, _ = self.fs.split_path(path)
        if not key:
            return super().delete_dir(path)
        return bool(sync(self.fs.loop, self._delete_tree, bucket, key.rstrip("/"), path))

    async def _delete_tree(self, bucket: str, key: str, path: str) -> bool:
        """Delete behind the listing: its continuation token names the next key, not a position."""
        continuation: dict[str, str] = {}
        found = False
        while True:
            try:
                page = await self.fs._call_s3(
                    "list_objects_v2", Bucket=bucket, Prefix=key + "/", MaxKeys=DELETE_BATCH - 1, **continuation
                )
            except FileNotFoundError:  # no such bucket
                if found:
                    raise
                return False
            keys = [str(item["Key"]) for item in page.get("Contents") or []]
            more = bool(page.get("IsTruncated"))
            if not more and (found or keys):
                keys.append(key)  # deleting a key that is not there succeeds: no probe needed (pages hold 999)
            if keys:
                await self._delete_objects(bucket, keys, path)
                found = True
            if not more:
                break
            token = page.get("NextContinuationToken")
            if not token or continuation.get("ContinuationToken") == token:
                raise OSError(errno.EIO, "S3 said the listing goes on but gave no new place to resume", path)
            continuation = {"ContinuationToken": str(token)}
        if found:
            return True
        try:  # nothing below: a file at the path, or nothing
            await self.fs._call_s3("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return False
        await self._delete_objects(bucket, [key], path)
        return True

    async def _delete_objects(self, bucket: str, keys: Sequence[str], path: str) -> None:
        """One ``DeleteObjects`` of up to 1,000 keys; a key it could not delete raises the error s3fs raises for its
        code (``AccessDenied``: ``PermissionError``; ``SlowDown``, ``InternalError``: transient)."""
        answer = await self.fs._call_s3(
            "delete_objects",
            Bucket=bucket,
            Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True},
        )
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            fields = {"Code": str(first.get("Code", "")), "Message": f"{first.get('Key')}: {first.get('Message', '')}"}
            log.debug("S3 could not delete %d of %d keys below %s", len(errors), len(keys), path)
            raise s3_direct.client_error(fields, _DELETE_ERROR_STATUS.get(fields["Code"], 500), "DeleteObjects")

    # --- no rename --------------------------------------------------------------------------------------------

    def rename_file(self, source: str, dest: str) -> None:
        """Refused: s3fs's move is copy + delete that overwrites; the ``upload`` protocol never renames."""
        raise UnsupportedStoreError(f"{source} -> {dest}: S3 has no rename; the upload protocol does not rename")

    # --- the upload protocol's calls --------------------------------------------------------------------------

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """One S3 request through the committer's client (no retries; errors as s3fs translates them)."""
        result: dict[str, Any] = self.fs.call_s3(method, **kwargs)
        return result

    def _accepts(self, operation: str, parameter: str) -> bool:
        """Whether this botocore knows ``parameter`` of ``operation``: s3fs silently drops parameters it does not."""
        known = self._accepted.get((operation, parameter))
        if known is None:
            model = self.fs.s3.meta.service_model.operation_model(operation)
            known = self._accepted[operation, parameter] = parameter in model.input_shape.members
        return known

    def _require(self, operation: str, parameter: str, path: str) -> None:
        if not self._accepts(operation, parameter):
            raise UnsupportedStoreError(
                f"{path}: this botocore cannot send {parameter} on {operation} (it would silently overwrite); "
                "install botocore > 1.35.20"
            )

    def put_if_absent(self, path: str, data: bytes, metadata: dict[str, str] | None = None) -> str:
        """Create the object ``path`` (``bucket/key``) holding ``data``; returns its ETag.

        ``PutObject`` with ``If-None-Match: *``: ``FileExistsError`` (412) if any object is at the key, which is
        then left as it was. Not repeatable by itself: after a lost answer a retry reports ``FileExistsError`` for
        our own object; ``complete_upload`` resolves that case for pending uploads.
        """
        self._require("PutObject", "IfNoneMatch", path)
        bucket, key, _ = self.fs.split_path(path)
        try:
            result = self._conditional_call(
                "put_object", path, Bucket=bucket, Key=key, Body=data, IfNoneMatch="*", Metadata=dict(metadata or {})
            )
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "an object is already at the key (412)", path) from None
        return str(result.get("ETag", "")).strip('"')

    def complete_upload(self, pending: PendingUpload) -> str:
        """Publish ``pending`` at its key, never replacing an object; returns the new object's ETag.

        A multipart upload is completed with ``If-None-Match: *`` (and ``MpuObjectSize``, a length check, where
        botocore has it; moto ignores it); an empty file (no upload) is put as an empty object with
        ``If-None-Match: *`` and the writer's token. Outcomes:

        - returns: the key holds this upload's object (completed now, or by an earlier call whose answer was
          lost: decided from evidence, see ``holds``);
        - ``FileExistsError``: another object is at the key; nothing changed, the upload stays incomplete;
        - ``FileNotFoundError``: the upload no longer exists (aborted) and the key does not hold its object;
        - ``UploadOutcomeUnknownError``: a 412 or a vanished upload, and the evidence cannot say whose the object
          at the key is (part ETags not MD5s, and no token);
        - any other error: unchanged (the store's ``is_transient`` says whether to call again).
        """
        try:
            result = self._publish(pending)
        except FileExistsError:
            # 412: an object is at the key. Ours, if an earlier completion took effect but its answer was lost.
            etag = self.holds(pending)
            if etag is None:
                raise FileExistsError(
                    errno.EEXIST,
                    f"another object is at the key; upload {pending.upload_id} not completed",
                    pending.path,
                ) from None
            log.info("Completion of %s was already done by an earlier attempt (upload %s)", pending.path, etag)
            return etag
        except FileNotFoundError:
            # NoSuchUpload: completed by an earlier attempt whose answer was lost, or aborted.
            etag = self.holds(pending)
            if etag is None:
                raise FileNotFoundError(
                    errno.ENOENT,
                    f"upload {pending.upload_id} no longer exists and the key does not hold its object",
                    pending.path,
                ) from None
            return etag
        return str(result.get("ETag", "")).strip('"')

    def _conditional_call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """``_call`` of a request with ``If-None-Match: *``, its answers made exact.

        s3fs makes a 412 ``FileExistsError`` only when S3 names the ``If-None-Match`` condition; any 412 here is
        that condition. A 409 (``ConditionalRequestConflict``, a concurrent write to the key) means, for a
        completion, that the upload can never be completed: said so, and never transient.
        """
        try:
            return self._call(method, **kwargs)
        except (FileExistsError, FileNotFoundError):
            raise
        except OSError as error:
            details = _client_error_in_chain(error)
            code, status = details if details is not None else (None, None)
            if code == "PreconditionFailed" or status == 412:
                raise FileExistsError(errno.EEXIST, f"precondition failed: {error}", path) from error
            if code == "ConditionalRequestConflict" or status == 409:
                raise OSError(
                    errno.EIO,
                    f"S3 answered 409 ({code}): a concurrent write to the key; the write can no longer succeed "
                    "as it is and its data must be uploaded again",
                    path,
                ) from error
            raise

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]:
        """The conditional request of ``complete_upload`` for every upload at once on the client's event loop: one
        hand-over to the loop for the batch instead of one a file. An outcome per upload, in order: the new
        object's ETag, or the error the request raised, for ``complete_upload`` of that upload to settle (a 412:
        whose object is at the key; ``NoSuchUpload``: completed already, or aborted; anything else as it is).

        A multipart completion goes out as ``s3_direct`` builds it where the bucket has a route: learned from the
        first completion of the bucket, which goes through the SDK before the others of its batch."""
        requests = [self._publish_request(pending) for pending in uploads]

        async def all_at_once() -> list[Any]:
            results: list[Any] = [None] * len(uploads)
            for index, pending in enumerate(uploads):  # the first completion of a bucket shows its route
                if self._direct and pending.upload_id is not None and pending.bucket not in self._routes:
                    results[index] = await self._observed(pending, requests[index])
            pending_indexes = [index for index in range(len(uploads)) if results[index] is None]
            answers = await asyncio.gather(
                *(self._send(uploads[index], requests[index]) for index in pending_indexes), return_exceptions=True
            )
            for index, answer in zip(pending_indexes, answers, strict=True):
                results[index] = answer
            return results

        outcomes: list[str | Exception] = []
        for result in sync(self.fs.loop, all_at_once):
            if isinstance(result, Exception):
                outcomes.append(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                outcomes.append(str(result.get("ETag", "")).strip('"'))
        return outcomes

    async def _send(self, pending: PendingUpload, request: tuple[str, dict[str, Any]]) -> Any:
        """The completion of ``pending``: direct where its bucket has a route, else through the SDK. Returns what
        the SDK returns (a dict with the ``ETag``); raises what s3fs raises."""
        route = self._routes.get(pending.bucket) if self._direct else None
        if route is None or pending.upload_id is None:
            method, arguments = request
            return await self.fs._call_s3(method, **arguments)
        client = await self.fs.get_s3(pending.bucket)
        credentials = await client._request_signer._credentials.get_frozen_credentials()
        prepared = s3_direct.signed_request(
            route, credentials, pending, self._accepts("CompleteMultipartUpload", "MpuObjectSize")
        )
        response = await client._endpoint.http_session.send(prepared)
        body = await response.content
        answer = s3_direct.parse_answer(response.status_code, body)
        if isinstance(answer, str):
            return {"ETag": answer}
        raise s3_direct.client_error(answer, response.status_code)

    async def _observed(self, pending: PendingUpload, request: tuple[str, dict[str, Any]]) -> Any:
        """The SDK's completion of ``pending``, watched: its request gives the bucket's route (``s3_direct``), or
        ``None`` where it cannot be sent directly. Returns the SDK's answer, or its error (not raised)."""
        client = await self.fs.get_s3(pending.bucket)
        upload_id = pending.upload_id
        seen: list[tuple[str, dict[str, str]]] = []

        def watch(request: Any, **_: Any) -> None:
            if f"uploadId={quote(str(upload_id), safe='~')}" in request.url:
                headers = {
                    name: value.decode() if isinstance(value, bytes) else str(value)
                    for name, value in request.headers.items()
                }
                seen.append((request.url, headers))

        event = "before-send.s3.CompleteMultipartUpload"
        client.meta.events.register(event, watch)
        method, arguments = request
        try:
            result: Any = await self.fs._call_s3(method, **arguments)
        except Exception as error:
            result = error
        finally:
            client.meta.events.unregister(event, watch)
        route = s3_direct.route_of(*seen[-1], pending.key) if seen and self._direct_possible(client) else None
        self._routes[pending.bucket] = route
        log.debug("S3 completions in bucket %s go %s", pending.bucket, "direct" if route else "through the SDK")
        return result

    @staticmethod
    def _direct_possible(client: Any) -> bool:
        """The client has what a direct request needs: its credentials and its HTTP session."""
        signer = getattr(client, "_request_signer", None)
        endpoint = getattr(client, "_endpoint", None)
        return getattr(signer, "_credentials", None) is not None and callable(
            getattr(getattr(endpoint, "http_session", None), "send", None)
        )

    def _publish(self, pending: PendingUpload) -> dict[str, Any]:
        """The one conditional request of ``complete_upload``."""
        method, arguments = self._publish_request(pending)
        return self._conditional_call(method, pending.path, **arguments)

    def _publish_request(self, pending: PendingUpload) -> tuple[str, dict[str, Any]]:
        """The method and arguments of ``pending``'s conditional request: a PutObject of an empty file, else the
        CompleteMultipartUpload of its parts, each with ``If-None-Match: *``."""
        if pending.upload_id is None:
            self._require("PutObject", "IfNoneMatch", pending.path)
            metadata = {TOKEN_METADATA_KEY: pending.token} if pending.token else {}
            return "put_object", {
                "Bucket": pending.bucket,
                "Key": pending.key,
                "Body": b"",
                "IfNoneMatch": "*",
                "Metadata": metadata,
            }
        self._require("CompleteMultipartUpload", "IfNoneMatch", pending.path)
        parts = [{"PartNumber": number, "ETag": etag} for number, etag in enumerate(pending.etags, start=1)]
        size = {"MpuObjectSize": pending.length} if self._accepts("CompleteMultipartUpload", "MpuObjectSize") else {}
        return "complete_multipart_upload", {
            "Bucket": pending.bucket,
            "Key": pending.key,
            "UploadId": pending.upload_id,
            "MultipartUpload": {"Parts": parts},
            "IfNoneMatch": "*",
            **size,
        }

    def holds(self, pending: PendingUpload) -> str | None:
        """The ETag of the object at ``pending``'s key if it is provably that upload's; ``None`` if provably not.

        Evidence: the writer's token in the object's metadata, when ``pending`` has one, and the multipart ETag
        computed from the part ETags, when they are plain MD5s. Both must agree where both exist. Without either,
        ``UploadOutcomeUnknownError``: the caller must not guess.
        """
        try:
            head = self._call("head_object", Bucket=pending.bucket, Key=pending.key)
        except FileNotFoundError:
            return None
        etag = str(head.get("ETag", "")).strip('"').lower()
        expected = pending.expected_etag()
        if pending.token is None and expected is None:
            raise UploadOutcomeUnknownError(
                f"s3://{pending.path}: an object is at the key, and upload {pending.upload_id} has neither a token "
                "nor MD5 part ETags to tell whether it is this upload's; resolve by hand"
            )
        if expected is not None and etag != expected:
            return None
        if pending.token is not None:
            metadata = {str(name).lower(): value for name, value in (head.get("Metadata") or {}).items()}
            if metadata.get(TOKEN_METADATA_KEY) != pending.token:
                return None
        return etag

    def abort_upload(self, path: str, upload_id: str) -> bool:
        """Abort the multipart upload ``upload_id`` of ``path`` (``bucket/key``); ``False`` if it did not exist.

        Afterwards the upload cannot be completed and its parts are freed. S3 notes that parts still being
        uploaded at that moment may land after an abort: abort only uploads whose writer is finished or dead.
        """
        bucket, key, _ = self.fs.split_path(path)
        try:
            self._call("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
        except FileNotFoundError:  # NoSuchUpload: aborted or completed already
            return False
        return True

    def list_uploads(self, prefix: str, page_size: int = 1000) -> list[IncompleteUpload]:
        """Every incomplete multipart upload whose key starts with ``prefix``'s key part (``bucket/key-prefix``).

        Follows ``NextKeyMarker``/``NextUploadIdMarker`` across every page (``page_size`` uploads a page, at most
        1,000). ``prefix`` is a plain key prefix: ``bucket/out`` also matches ``bucket/output``; pass
        ``bucket/out/`` for a directory.
        """
        bucket, key_prefix, _ = self.fs.split_path(prefix)
        if prefix.endswith("/") and key_prefix and not key_prefix.endswith("/"):
            key_prefix += "/"  # s3fs's split_path drops a trailing slash
        uploads: list[IncompleteUpload] = []
        markers: dict[str, str] = {}
        while True:
            page = self._call(
                "list_multipart_uploads", Bucket=bucket, Prefix=key_prefix, MaxUploads=page_size, **markers
            )
            for upload in page.get("Uploads") or []:
                initiated = upload.get("Initiated")
                uploads.append(
                    IncompleteUpload(
                        bucket,
                        upload["Key"],
                        upload["UploadId"],
                        initiated if isinstance(initiated, datetime) else None,
                    )
                )
            if not page.get("IsTruncated"):
                return uploads
            next_markers = {"KeyMarker": page.get("NextKeyMarker"), "UploadIdMarker": page.get("NextUploadIdMarker")}
            if not next_markers["KeyMarker"] or next_markers == markers:
                raise OSError(errno.EIO, "S3 said the upload listing goes on but gave no new place to resume", prefix)
            markers = {name: str(value) for name, value in next_markers.items() if value}


def open_s3_store(url: str, storage_options: dict[str, Any] | None = None) -> OpenedStore[S3Store]:
    """The S3 store and the ``bucket/path`` of an ``s3://`` or ``s3a://`` URL, for the ``upload`` protocol.

    ``factory.open_store`` refuses S3 (the manifest protocol needs a rename); ``S3_BINDING`` opens it for the
    upload protocol and the tools.
    """
    scheme = split_url(url)[0]
    if scheme not in S3_SCHEMES:
        raise ValueError(f"{url} is not an s3:// URL")
    fs, data_fs, path = cloud_filesystems(url, dict(storage_options or {}))
    return OpenedStore(S3Store(without_client_retries(fs), scheme, data_fs), path)


S3_REFUSAL = (
    "S3 has no rename: s3fs moves a file by copy then delete, and overwrites whatever is at the destination, "
    "so the rename-based protocols (manifest, v1, v2) and the transactional protocol cannot commit there safely. "
    "Use the `upload` protocol (protocol='upload', or 'auto' on s3:// and s3a://): tasks write multipart uploads "
    "to the final keys, and job commit completes them with conditional writes, never overwriting and never copying"
)

S3_BINDING = StoreBinding(
    name="s3",
    schemes=S3_SCHEMES,
    opener=open_s3_store,
    capabilities=S3_CAPABILITIES,
    backend_module="s3fs",
    backend_requirement="manifest-committer[s3]",
    refusal=S3_REFUSAL,
)
"""Amazon S3 through s3fs: the ``upload`` protocol (and the tools) open it; the rename-based protocols refuse it."""

S3N_BINDING = StoreBinding(
    name="s3n",
    schemes=("s3n",),
    refusal=f"s3n:// is Hadoop's old S3 connector, which Hadoop 3 removed: write to s3:// or s3a://. {S3_REFUSAL}",
)
"""Refused: no fsspec backend serves ``s3n://``."""
