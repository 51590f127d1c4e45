"""Azure Blob Storage through adlfs (``abfs://``, ``az://``): a rename that never overwrites, made of copy + delete.

The blob endpoint has no rename. adlfs's ``mv`` copies, never checks the copy finished and silently replaces
the destination, so this binding builds the rename itself from the SDK:

1. HEAD the source (its etag pins the version copied) and, at the same time, look for blobs below ``dest/``
   (a "directory" in the way).
2. Server-side copy with ``If-None-Match: *`` on the destination (``MatchConditions.IfMissing``): the service
   answers 409 if anything is there, so no file is ever replaced, even by a racing writer. The copy is pinned to
   the source's etag. A pending copy (large blobs on real Azure) is polled until it finishes.
3. Delete the source, only if it is still the version copied.

Between 2 and 3 both paths hold the file. A rename interrupted there is finished by the next call: a
destination whose copy properties name this very source, completed after the source's last change, with the
same size and Content-MD5, is the rename's own copy; the source is deleted and the call succeeds. A copy that
ends ``failed`` or ``aborted`` leaves a blob at the destination: the rename deletes it (pinned to its etag and
copy id) and raises ``OSError`` (``EIO``), the source untouched; a blob such a copy left behind (the process died
first) is recognised by its copy properties (status ``failed`` or ``aborted``, source this very blob), and the
next rename deletes it and copies again, as ``is_failed_copy`` tells a job's abort. Anything else at the
destination is ``FileExistsError``.

Etags change with a copy, so ``etags_preserved_in_rename`` is false; Content-MD5 is copied with the blob, so a
status's ``checksum`` (base64 Content-MD5, when the writer's upload set one) survives a rename.

URLs are Hadoop ABFS's: ``abfs[s]://<container>@<account>.dfs.core.windows.net/<path>``. A store knows its
account and its destination's container, and refuses a URL of any other, so a manifest cannot name blobs of
another account that the credentials happen to reach, nor be mapped silently into this one.

This module also decides which Azure errors a retry may cure (``is_transient_azure``).
"""

from __future__ import annotations

import asyncio
import base64
import errno
import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from fsspec.asyn import sync

from ..errors import ConfigError, SourceChangedError
from ..urls import decode_path, encode_path, split_url
from .azure_direct import DirectBlobRequests, service_error
from .azure_names import adlfs_kept_name
from .bindings import OpenedStore, StoreBinding, cloud_filesystems, scheme_of
from .operations import (
    AUTH_STATUS_CODES,
    COPY_THEN_DELETE_OBJECT_STORE,
    NO_HINTS,
    FileStatus,
    FsspecStore,
    RenameHint,
    renames_on_loop,
)
from .transient import RETRYABLE_STATUS_CODES, caused_by_transient, class_names, is_transient_generic, status_code

log = logging.getLogger(__name__)

COPY_POLL_INTERVAL = 0.05
"""Seconds between polls of a pending server-side copy (doubling up to 2 s)."""
COPY_TIMEOUT = 600.0
"""Seconds a pending copy may take before the rename gives up with ``TimeoutError``."""
DELETE_CONCURRENCY = 16
"""Blob deletes in flight at once within one ``delete_dir``."""
FAILED_COPY_STATES = frozenset({"failed", "aborted"})
"""Copy statuses of a copy that ended without the source's bytes: its destination blob holds nothing of use."""
DELETE_BATCH = 1000
"""Blob names one ``delete_dir`` lists, then deletes, at a time (one listing page): its memory stays bounded
however many blobs the prefix holds."""

URL_SCHEMES = ("abfs", "abfss", "az", "wasb", "wasbs")
"""Schemes whose URLs name Azure blobs: Hadoop's ABFS and WASB, and adlfs's ``az``."""
_ACCOUNT_HOST = re.compile(r"(?P<account>[a-z0-9]{3,24})\.(dfs|blob)\.[a-z0-9.-]+", re.IGNORECASE)
"""``<account>.dfs.core.windows.net`` (or ``.blob.``, or another Azure cloud's domain)."""

CREDENTIAL_SOURCES = (
    "storage_options connection_string, or account_name (or the account in the URL, "
    "abfs://<container>@<account>.dfs.core.windows.net/<path>) with one of account_key, sas_token, credential, "
    "client_id + client_secret + tenant_id, or anon=True; or the environment variables "
    "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY, "
    "AZURE_STORAGE_SAS_TOKEN, or AZURE_STORAGE_CLIENT_ID + AZURE_STORAGE_CLIENT_SECRET + AZURE_STORAGE_TENANT_ID"
)
"""Where adlfs finds Azure credentials, for the messages of missing or refused ones."""

# --- which errors a retry may cure --------------------------------------------------------------------------

AZURE_RETRYABLE_ERROR_CODES = frozenset(
    {"ServerBusy", "OperationTimedOut", "InternalError", "IngressOverAccountLimit", "EgressOverAccountLimit"}
)
"""Azure Storage error codes (``x-ms-error-code``) that a retry may cure."""

_AZURE_CONNECTION_ERROR_NAMES = frozenset(
    # azure-core: the request never reached the service, or its answer never came back.
    {"ServiceRequestError", "ServiceResponseError", "ServiceRequestTimeoutError", "ServiceResponseTimeoutError"}
)


def is_transient_azure(error: BaseException) -> bool:
    """An Azure Blob error (azure-core or adlfs) that a retry may cure.

    Throttling and server errors are ``HttpResponseError`` with ``status_code`` 408/429/500/502/503/504 or an
    ``error_code`` such as ``ServerBusy`` or ``OperationTimedOut``; a failed or dropped connection is
    ``ServiceRequestError`` or ``ServiceResponseError``. Not found, exists, precondition failed and refused
    credentials are answers, never retried.
    """
    if is_transient_generic(error):
        return True
    names = class_names(error)
    if names & _AZURE_CONNECTION_ERROR_NAMES:
        return True
    if "HttpResponseError" not in names:
        return False
    if {"ResourceNotFoundError", "ResourceExistsError", "ResourceModifiedError", "ClientAuthenticationError"} & names:
        return False
    if getattr(error, "error_code", None) in AZURE_RETRYABLE_ERROR_CODES:
        return True
    return status_code(error) in RETRYABLE_STATUS_CODES


def missing_credentials_error(url: str, error: BaseException) -> ConfigError:
    """The error for adlfs refusing to build a client (no account or credentials found), naming where they go."""
    return ConfigError(
        f"{url}: no Azure credentials or account were found ({error}); supply them with {CREDENTIAL_SOURCES}"
    )


def without_client_retries(fs: Any) -> Any:
    """``fs`` with the Azure SDK's own retries switched off; the committer's retry policy governs instead.

    The SDK retries a throttled or failed request three times, 15, 18 and 24 s apart, before the error
    surfaces: a single store call could take a minute, whatever the committer's attempts and time limit say.
    adlfs offers no option for it, so the service client's retry policy is changed in place.
    """
    policy = getattr(getattr(getattr(fs, "service_client", None), "_config", None), "retry_policy", None)
    if policy is None or not hasattr(policy, "total_retries"):
        log.warning("Cannot switch off the Azure SDK's retries of %s: its client has no retry policy", fs)
        return fs
    policy.total_retries = policy.connect_retries = policy.read_retries = policy.status_retries = 0
    return fs


def without_environment_lookups(fs: Any) -> Any:
    """``fs`` with its HTTP client reading no proxy settings or ``.netrc`` per request, when neither names the
    account's host: what the lookups would find is known once, so the requests go out exactly as before.

    azure-core opens its aiohttp session with ``trust_env``, and aiohttp then reads ``~/.netrc`` in an executor
    thread and the proxy variables in another for every request: about a third of the client's CPU a rename
    (a py-spy profile on Azurite). Where a proxy variable or a ``.netrc`` entry does apply to the host, the
    per-request lookups stay.
    """
    service = getattr(fs, "service_client", None)
    transport = getattr(getattr(service, "_pipeline", None), "_transport", None)
    if transport is None or not hasattr(transport, "_use_env_settings"):
        log.warning("Cannot spare the Azure client of %s its per-request environment lookups: no aiohttp transport", fs)
        return fs
    if _environment_applies_to(str(getattr(service, "url", ""))):
        return fs
    transport._use_env_settings = False
    session = getattr(transport, "session", None)
    if session is not None:
        session._trust_env = False
    return fs


def _environment_applies_to(url: str) -> bool:
    """Whether a proxy variable or a ``.netrc`` entry applies to ``url``'s host (aiohttp's own lookups)."""
    from aiohttp.helpers import get_env_proxy_for_url, netrc_from_env
    from yarl import URL

    try:
        get_env_proxy_for_url(URL(url))
    except LookupError:
        pass
    else:
        return True
    entries = netrc_from_env()
    host = urlsplit(url).hostname
    return entries is not None and host is not None and entries.authenticators(host) is not None


def _md5_of(properties: Any) -> str | None:
    settings = properties.get("content_settings") if isinstance(properties, dict) else properties.content_settings
    if settings is None:
        return None
    md5 = settings.get("content_md5") if isinstance(settings, dict) else getattr(settings, "content_md5", None)
    return base64.b64encode(bytes(md5)).decode("ascii") if md5 else None


def _is_directory_marker(metadata: dict[str, str] | None) -> bool:
    return bool(metadata) and str((metadata or {}).get("is_directory", "")).lower() == "true"


def _if_not_modified() -> Any:
    from azure.core import MatchConditions

    return MatchConditions.IfNotModified


def _account_of(fs: Any) -> str | None:
    """The storage account a filesystem's client talks to (from a connection string, or adlfs's account_name)."""
    account = getattr(getattr(fs, "service_client", None), "account_name", None) or getattr(fs, "account_name", None)
    return str(account).lower() if account else None


def _account_in_host(url: str, host: str) -> str:
    match = _ACCOUNT_HOST.fullmatch(host)
    if match is None:
        raise ValueError(f"{url}: {host} is not an Azure storage account host (<account>.dfs.core.windows.net)")
    return match.group("account").lower()


def _request_name(blob: str) -> str:
    """A blob's name as a request may carry it: a name with a ``.`` or ``..`` segment (a task opened
    ``..\\..\\x``, which the service keeps as ``../../x``) with ``\\`` for ``/``, which the service takes back
    for ``/``, since an HTTP client resolves such segments in a URL and the request then names (and is signed for)
    another blob."""
    if any(segment in (".", "..") for segment in blob.split("/")):
        return blob.replace("/", "\\")
    return blob


def _same_blob(first: str, second: str) -> bool:
    """Whether two blob URLs name the same blob (a copy source's query, such as a SAS, aside)."""
    one, other = urlsplit(first), urlsplit(second)
    return (one.netloc, unquote(one.path)) == (other.netloc, unquote(other.path))


def _quoted(etag: str) -> str:
    """An etag as the service sends it (quoted): manifests hold it without quotes, Hadoop's may with them."""
    return f'"{etag.strip(chr(34))}"'


@dataclass(frozen=True, slots=True)
class _Copied:
    """The copy half of a rename is done: the source to delete, pinned to the version copied."""

    source_client: Any
    """The source's ``BlobClient`` where the SDK copied it; ``None`` where the copy went direct."""
    etag: str


class AzureBlobStore(FsspecStore):
    """Azure Blob Storage (flat namespace) via adlfs; ``rename_file`` is conditional copy + delete.

    ``destination``, the URL the store was opened for, binds it to one container (and names the account host
    Hadoop's URLs carry); without it, URLs of any container of the account are accepted.
    """

    capabilities = replace(COPY_THEN_DELETE_OBJECT_STORE, separator_aliases="\\", kept_name=adlfs_kept_name)
    """Azure keeps a blob named ``a\\b`` as ``a/b`` (so does Azurite); adlfs keeps ``b.csv?`` as ``b.csv``."""
    credential_sources = CREDENTIAL_SOURCES

    def __init__(self, fs: Any, scheme: str = "abfs", data_fs: Any = None, *, destination: str | None = None) -> None:
        super().__init__(fs, scheme, data_fs)
        self.account = _account_of(fs)
        service = getattr(fs, "service_client", None)
        self._direct = DirectBlobRequests.of(service) if service is not None else None
        """The pinned copy and delete of a rename as direct requests; ``None``: through the SDK."""
        self.account_host = f"{self.account}.dfs.core.windows.net" if self.account else None
        self.container: str | None = None
        if destination is not None:
            _, authority, path = split_url(destination)
            container, at, host = authority.partition("@")
            if at:
                named = _account_in_host(destination, host)
                if self.account is not None and named != self.account:
                    raise ConfigError(
                        f"{destination}: names storage account {named}, but the credentials are for {self.account}"
                    )
                self.account_host = host.lower()
            self.container = container or path.lstrip("/").split("/", 1)[0] or None

    # --- URLs: Hadoop writes abfs://container@account.dfs.core.windows.net/path ---------------------------

    def to_url(self, path: str) -> str:
        """Hadoop ABFS's form, ``abfs[s]://<container>@<account host>/<path>`` (adlfs reads it too).

        A store whose account is unknown (no client) writes adlfs's short form ``abfs://<container>/<path>``.
        """
        if self.account_host is None:
            return super().to_url(path)
        container, _, rest = path.partition("/")
        scheme = "abfss" if self.scheme == "abfss" else "abfs"  # az:// is adlfs's alone; Hadoop reads abfs://
        return f"{scheme}://{container}@{self.account_host}/{encode_path(rest)}"

    def from_url(self, url: str) -> str:
        """The path of a URL of this store's account and container; ``ValueError`` for any other.

        Accepted: Hadoop's ``abfs[s]://<container>@<account>.dfs.core.windows.net/<path>`` (and ``wasb[s]://``
        with ``.blob.``) naming this account, and adlfs's short ``abfs://<container>/<path>``, which names no
        account and so always means this one.
        """
        scheme, authority, path = split_url(url)
        if scheme not in URL_SCHEMES:
            raise ValueError(f"{url} is not an Azure Blob Storage URL")
        container, at, host = authority.partition("@")
        if at:
            account = _account_in_host(url, host)
            if account != self.account:
                raise ValueError(f"{url} names storage account {account}, not this store's {self.account}")
            if not container:
                raise ValueError(f"{url} names no container")
        decoded = decode_path(f"{container}{path}" if container else path.lstrip("/"))
        if self.container is not None and decoded.split("/", 1)[0] != self.container:
            raise ValueError(f"{url} is not in container {self.container}")
        return decoded

    # --- errors and statuses --------------------------------------------------------------------------------

    def is_transient(self, error: BaseException) -> bool:
        return caused_by_transient(error, is_transient_azure)

    # --- resources ------------------------------------------------------------------------------------------

    def use_client_calls_only(self) -> None:
        """Renames copy and delete through the SDK's own calls (``azure_direct`` off)."""
        self._direct = None

    def close(self) -> None:
        """Close the private filesystem's service client (its HTTP session) and credential; idempotent.

        adlfs does the same only in a finaliser at garbage collection, which may never run before exit (and
        then aiohttp warns of an unclosed session). ``data_fs`` is fsspec's shared instance, which other code
        in the process may use: it is left open.
        """
        if self.closed:
            return
        self.closed = True
        if getattr(self.fs, "service_client", None) is not None:
            sync(self.fs.loop, self._close_clients)

    async def _close_clients(self) -> None:
        await self.fs.service_client.close()
        close_credential = getattr(getattr(self.fs, "credential", None), "close", None)
        if close_credential is not None:
            result = close_credential()
            if inspect.isawaitable(result):
                await result

    def _is_auth_error_here(self, error: BaseException) -> bool:
        """azure-core's ``ClientAuthenticationError`` (bad key or token, no credential), or a 401/403 answer."""
        if super()._is_auth_error_here(error):
            return True
        names = class_names(error)
        if "ClientAuthenticationError" in names:
            return True
        return "HttpResponseError" in names and status_code(error) in AUTH_STATUS_CODES

    def _status(self, raw: dict[str, Any]) -> FileStatus:
        status = super()._status(raw)
        is_dir = status.is_dir or _is_directory_marker(raw.get("metadata"))
        return FileStatus(
            path=status.path,
            size=0 if is_dir else status.size,
            is_dir=is_dir,
            etag=status.etag,
            checksum=None if is_dir else _md5_of(raw),
            modified=status.modified,
        )

    # --- directories: zero-byte blobs with metadata is_directory=true, the convention adlfs and HNS share -----

    def list_dir(self, path: str) -> list[FileStatus]:
        # adlfs lists a directory that has both a marker blob and blobs below it twice.
        unique = {status.path.rstrip("/"): status for status in super().list_dir(path)}
        return [status for name, status in unique.items() if name != path.rstrip("/")]

    def mkdirs(self, path: str) -> None:
        """Create a directory marker blob unless the directory already exists (as a marker or a prefix)."""
        status = self.info(path)
        if status is not None:
            if not status.is_dir:
                raise FileExistsError(errno.EEXIST, "a file is in the way of a directory", path)
            return
        sync(self.fs.loop, self._create_marker, path)

    async def _create_marker(self, path: str) -> None:
        from azure.core.exceptions import ResourceExistsError

        container, blob = self._split(path)
        if not blob:
            await self.fs._mkdir(container, exist_ok=True)
            return
        client = self.fs.service_client.get_blob_client(container, blob.rstrip("/"))
        try:
            await client.upload_blob(b"", overwrite=False, metadata={"is_directory": "true"})
        except ResourceExistsError:
            properties = await client.get_blob_properties()
            if not _is_directory_marker(properties.metadata):
                raise FileExistsError(errno.EEXIST, "a file is in the way of a directory", path) from None

    def delete_dir(self, path: str) -> bool:
        """Delete every blob below ``path/`` and the blob at ``path`` itself (its marker); ``False`` if none.

        Not adlfs's recursive ``rm``: it keeps the marker of the directory deleted and of every directory below
        that also has blobs under it, so ``_temporary`` would outlive the job. A prefix listing also needs no
        glob escaping.
        """
        container, blob = self._split(path)
        if not blob:
            return super().delete_dir(path)
        return bool(sync(self.fs.loop, self._delete_tree, container, blob.rstrip("/")))

    def _delete_dir_on_loop(self, path: str) -> Callable[[], Awaitable[bool]] | None:
        container, blob = self._split(path)
        if not blob:
            return None

        async def delete() -> bool:
            return bool(await self._delete_tree(container, blob.rstrip("/")))

        return delete

    async def _delete_tree(self, container: str, blob: str) -> int:
        """List a page of names, delete them, list the next: never more than one page of names in memory.

        Deleting behind the listing is safe: its continuation marker is the next blob name, not a position.
        """
        client = self.fs.service_client.get_container_client(container)
        deleted = 0
        batch: list[str] = []
        async for item in client.list_blobs(name_starts_with=blob + "/", results_per_page=DELETE_BATCH):
            batch.append(item.name)
            if len(batch) >= DELETE_BATCH:
                deleted += await self._delete_blobs(client, batch)
                batch = []
        batch.append(blob)  # the directory's own marker, after everything below it
        return deleted + await self._delete_blobs(client, batch)

    @staticmethod
    async def _delete_blobs(client: Any, names: Iterable[str]) -> int:
        """Delete blobs with ``DELETE_CONCURRENCY`` workers taking names from one iterator: as many coroutines
        as workers, however many names; missing blobs are fine."""
        from azure.core.exceptions import ResourceNotFoundError

        pending = iter(names)

        async def worker() -> int:
            count = 0
            for name in pending:  # shared: each name is taken by one worker
                try:
                    await client.delete_blob(_request_name(name))
                except ResourceNotFoundError:
                    continue
                count += 1
            return count

        return sum(await asyncio.gather(*(worker() for _ in range(DELETE_CONCURRENCY))))

    def remove_empty_dir(self, path: str) -> bool:
        try:
            if self.list_dir(path):
                return False
        except FileNotFoundError:
            return False
        return bool(sync(self.fs.loop, self._delete_marker, path))

    async def _delete_marker(self, path: str) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        container, blob = self._split(path)
        client = self.fs.service_client.get_blob_client(container, blob.rstrip("/"))
        try:
            properties = await client.get_blob_properties()
            if not _is_directory_marker(properties.metadata):
                return False
            await client.delete_blob(etag=properties.etag, match_condition=_if_not_modified())
        except ResourceNotFoundError:
            return False
        return True

    # --- rename -----------------------------------------------------------------------------------------------

    def _split(self, path: str) -> tuple[str, str]:
        container, blob, _ = self.fs.split_path(path)
        return container, blob

    def rename_file(self, source: str, dest: str) -> None:
        """Conditional server-side copy, then delete; ``FileExistsError`` if anything is at ``dest``."""
        sync(self.fs.loop, self._rename, source, dest, None)

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        """Every rename of the batch in flight at once on the client's event loop.

        With a hint giving the source's etag and a destination the job saw clear, a rename is two requests: the
        copy, pinned to that etag and conditional on an absent destination, and the delete of that version;
        instead of a probe of the source, a listing below the destination, the copy and the delete.
        """
        return renames_on_loop(self.fs.loop, self._rename, pairs, hints)

    async def _rename(self, source: str, dest: str, hint: RenameHint | None) -> None:
        copied = await self._copy(source, dest, hint)
        if copied is None:
            return
        if copied.source_client is None and self._direct is not None:
            await self._delete_source_directly(copied.etag, source, dest)
        else:
            client = copied.source_client or self._clients(source, dest)[0]
            await self._delete_source(client, copied.etag, source, dest)

    async def _copy(self, source: str, dest: str, hint: RenameHint | None) -> _Copied | None:
        """The copy half of a rename: ``_Copied`` (the source to delete, and the version copied), or ``None`` when
        nothing is left to delete (an interrupted rename of this very copy, finished meanwhile)."""
        if hint is not None and hint.source_etag and hint.dest_clear:
            pin = _quoted(hint.source_etag)
            if self._direct is not None:
                copied = await self._copy_pinned_directly(source, dest, pin)
            else:
                copied = await self._copy_pinned(source, dest, pin)
            if copied is not None:
                return copied
            log.debug("Rename of %s: the hint did not hold; probing", source)
        return await self._copy_probed(source, dest)

    async def _copy_pinned(self, source: str, dest: str, etag: str) -> _Copied | None:
        """One request: the copy pinned to ``etag`` and conditional on an absent destination. ``None`` whenever
        the service says no (source changed or gone, destination taken): the probing path then decides, exactly
        as without a hint."""
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError

        source_client, dest_client = self._clients(source, dest)
        try:
            copy = await dest_client.start_copy_from_url(
                source_client.url,
                match_condition=MatchConditions.IfMissing,
                source_etag=etag,
                source_match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
            return None
        await self._copy_finished(copy, dest_client, dest)
        return _Copied(source_client, etag)

    async def _copy_pinned_directly(self, source: str, dest: str, etag: str) -> _Copied | None:
        """``_copy_pinned`` as a direct request (``azure_direct``); a copy still pending is waited for, through the
        SDK, before this returns, so that no source is deleted while its copy runs."""
        direct = self._direct
        assert direct is not None
        source_container, source_blob = self._split(source)
        dest_container, dest_blob = self._split(dest)
        if not source_blob or not dest_blob:
            raise IsADirectoryError(errno.EISDIR, "cannot rename a container", source if not source_blob else dest)
        answer = await direct.copy(dest_container, dest_blob, direct.blob_url(source_container, source_blob), etag)
        if answer.status in (404, 409, 412):
            return None
        if not 200 <= answer.status < 300:
            raise service_error(answer, f"copy of {self.to_url(source)} to {self.to_url(dest)}")
        status = answer.copy_status
        if status != "success":
            dest_client = self._clients(source, dest)[1]
            if status == "pending":
                status = await self._wait_for_copy(dest_client, dest)
            if status != "success":
                raise await self._failed_copy(dest_client, dest, status, answer.copy_id)
        return _Copied(None, etag)

    async def _delete_source_directly(self, etag: str, source: str, dest: str) -> None:
        """``_delete_source`` as a direct request (``azure_direct``)."""
        direct = self._direct
        assert direct is not None
        container, blob = self._split(source)
        answer = await direct.delete(container, blob, etag)
        if answer.status == 404:
            log.debug("Rename source %s was already deleted", source)
        elif answer.status == 412:
            raise self._source_changed(source, dest) from service_error(answer, f"delete of {self.to_url(source)}")
        elif not 200 <= answer.status < 300:
            raise service_error(answer, f"delete of {self.to_url(source)}")

    def _clients(self, source: str, dest: str) -> tuple[Any, Any]:
        service = self.fs.service_client
        source_container, source_blob = self._split(source)
        dest_container, dest_blob = self._split(dest)
        if not source_blob or not dest_blob:
            raise IsADirectoryError(errno.EISDIR, "cannot rename a container", source if not source_blob else dest)
        return service.get_blob_client(source_container, source_blob), service.get_blob_client(
            dest_container, dest_blob
        )

    async def _copy_finished(self, copy: Any, dest_client: Any, dest: str) -> None:
        status = copy.get("copy_status")
        if status == "pending":
            status = await self._wait_for_copy(dest_client, dest)
        if status != "success":
            raise await self._failed_copy(dest_client, dest, status, copy.get("copy_id"))

    async def _failed_copy(self, dest_client: Any, dest: str, status: str | None, copy_id: str | None) -> OSError:
        """The error of a copy that ended ``status``, once the blob it left at ``dest`` is deleted (only while it
        is still that copy's, pinned to its etag); a delete that fails leaves it to ``is_failed_copy``."""
        from azure.core import MatchConditions
        from azure.core.exceptions import AzureError

        removed = "its destination blob was removed"
        try:
            properties = await dest_client.get_blob_properties()
            copy = properties.copy
            if copy is None or copy.status not in FAILED_COPY_STATES or (copy_id and copy.id != copy_id):
                removed = "nothing of it was found at the destination"
            else:
                await dest_client.delete_blob(etag=properties.etag, match_condition=MatchConditions.IfNotModified)
        except AzureError as error:
            log.warning("Could not remove what the failed copy to %s left: %s", dest, error)
            removed = "what it left at the destination is removed by the next rename or the job's abort"
        return OSError(errno.EIO, f"server-side copy ended as {status!r}; {removed}", dest)

    async def _copy_probed(self, source: str, dest: str, *, first: bool = True) -> _Copied | None:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError

        source_client, dest_client = self._clients(source, dest)
        dest_container, dest_blob = self._split(dest)
        source_probe: Any
        below_dest: Any
        source_probe, below_dest = await asyncio.gather(
            source_client.get_blob_properties(),
            self._has_blobs_below(dest_container, dest_blob),
            return_exceptions=True,
        )
        if isinstance(source_probe, ResourceNotFoundError):
            raise FileNotFoundError(errno.ENOENT, "rename source not found", source) from None
        if isinstance(source_probe, BaseException):
            raise source_probe
        if isinstance(below_dest, BaseException):
            raise below_dest
        if _is_directory_marker(source_probe.metadata):
            raise FileNotFoundError(errno.ENOENT, "rename source is a directory, not a file", source)
        if below_dest:
            raise FileExistsError(errno.EEXIST, "rename destination is a directory", dest)

        try:
            copy = await dest_client.start_copy_from_url(
                source_client.url,
                match_condition=MatchConditions.IfMissing,
                source_etag=source_probe.etag,
                source_match_condition=MatchConditions.IfNotModified,
            )
        except ResourceExistsError:
            # Azurite 3.35 answers a destination that exists with 409 BlobAlreadyExists.
            return await self._finish_or_refuse(source_client, source_probe, dest_client, source, dest, first=first)
        except ResourceNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "rename source vanished during the rename", source) from None
        except ResourceModifiedError as error:
            # 412 has two meanings here. Real Azure may answer a failed If-None-Match: * on the destination with
            # 412 (ConditionNotMet / TargetConditionNotMet) rather than 409; a source no longer at the pinned etag
            # is 412 too (SourceConditionNotMet on Azure; Azurite says ConditionNotMet for both).
            # Where the code does not say "source", the destination decides: anything there is the 409 case.
            if getattr(error, "error_code", None) != "SourceConditionNotMet" and await self._exists(dest_client):
                return await self._finish_or_refuse(source_client, source_probe, dest_client, source, dest, first=first)
            if not await self._exists(source_client):
                raise FileNotFoundError(errno.ENOENT, "rename source vanished during the rename", source) from None
            raise SourceChangedError(
                f"{self.to_url(source)}: the blob changed while it was being renamed to {self.to_url(dest)}; "
                "something outside the job still writes it, so it was not moved"
            ) from error
        await self._copy_finished(copy, dest_client, dest)
        return _Copied(source_client, source_probe.etag)

    def _source_changed(self, source: str, dest: str) -> SourceChangedError:
        return SourceChangedError(
            f"{self.to_url(source)}: the blob changed after it was copied to {self.to_url(dest)}; both were "
            "kept, since something outside the job still writes it"
        )

    async def _finish_or_refuse(
        self, source_client: Any, source_probe: Any, dest_client: Any, source: str, dest: str, *, first: bool
    ) -> _Copied | None:
        """Something is at the destination: finish an interrupted rename of this very copy (its source is to be
        deleted), or delete what a failed copy of this source left and copy again (once), else refuse."""
        if await self._is_own_copy(source_client, source_probe, dest_client):
            log.info("Finishing an interrupted rename of %s to %s: deleting the source", source, dest)
            return _Copied(source_client, source_probe.etag)
        if first and await self._delete_failed_copy(source_client, dest_client):
            log.info("Deleted what a failed copy of %s left at %s; copying again", source, dest)
            return await self._copy_probed(source, dest, first=False)
        raise FileExistsError(errno.EEXIST, "rename destination exists", dest)

    def is_failed_copy(self, source: str, dest: str) -> bool:
        """Whether ``dest`` holds what a server-side copy from ``source`` left when it failed or was aborted."""
        source_client, dest_client = self._clients(source, dest)
        return sync(self.fs.loop, self._failed_copy_properties, source_client, dest_client) is not None

    async def _failed_copy_properties(self, source_client: Any, dest_client: Any) -> Any:
        """The destination's properties when its copy properties say a copy from this source failed; else ``None``."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            properties = await dest_client.get_blob_properties()
        except ResourceNotFoundError:
            return None
        copy = properties.copy
        if copy is None or copy.status not in FAILED_COPY_STATES or not copy.source:
            return None
        return properties if _same_blob(copy.source, source_client.url) else None

    async def _delete_failed_copy(self, source_client: Any, dest_client: Any) -> bool:
        """Delete the destination if a failed copy of this source left it, pinned to the etag that says so."""
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        properties = await self._failed_copy_properties(source_client, dest_client)
        if properties is None:
            return False
        try:
            await dest_client.delete_blob(etag=properties.etag, match_condition=MatchConditions.IfNotModified)
        except ResourceNotFoundError:
            pass
        except ResourceModifiedError:
            return False  # rewritten since: no longer the failed copy
        return True

    @staticmethod
    async def _exists(client: Any) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            await client.get_blob_properties()
        except ResourceNotFoundError:
            return False
        return True

    async def _has_blobs_below(self, container: str, blob: str) -> bool:
        client = self.fs.service_client.get_container_client(container)
        async for _ in client.list_blobs(name_starts_with=blob.rstrip("/") + "/", results_per_page=1):
            return True
        return False

    async def _wait_for_copy(self, dest_client: Any, dest: str) -> str:
        deadline = time.monotonic() + COPY_TIMEOUT
        interval = COPY_POLL_INTERVAL
        while time.monotonic() < deadline:
            await asyncio.sleep(interval)
            interval = min(interval * 2, 2.0)
            properties = await dest_client.get_blob_properties()
            status: str = properties.copy.status
            if status != "pending":
                return status
        raise TimeoutError(f"server-side copy to {dest} still pending after {COPY_TIMEOUT} s")

    async def _is_own_copy(self, source_client: Any, source: Any, dest_client: Any) -> bool:
        """Is the destination a finished copy of this version of the source (an interrupted rename)?"""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            dest = await dest_client.get_blob_properties()
        except ResourceNotFoundError:
            return False
        copy = dest.copy
        if copy is None or copy.status != "success" or not copy.source or copy.completion_time is None:
            return False
        if not _same_blob(copy.source, source_client.url):
            return False
        if copy.completion_time < source.last_modified or dest.size != source.size:
            return False
        return _md5_of(dest) == _md5_of(source)

    async def _delete_source(self, source_client: Any, etag: str, source: str, dest: str) -> None:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        try:
            await source_client.delete_blob(etag=etag, match_condition=MatchConditions.IfNotModified)
        except ResourceNotFoundError:
            log.debug("Rename source %s was already deleted", source)
        except ResourceModifiedError as error:
            raise self._source_changed(source, dest) from error


def open_azure_store(url: str, storage_options: dict[str, Any]) -> OpenedStore[AzureBlobStore]:
    """The Azure store and the ``container/path`` of an ``abfs[s]://`` or ``az://`` URL, through adlfs."""
    try:
        fs, data_fs, path = cloud_filesystems(url, storage_options)
    except ValueError as error:  # adlfs: no account or credentials to build a client with
        raise missing_credentials_error(url, error) from error
    fs = without_environment_lookups(without_client_retries(fs))
    return OpenedStore(AzureBlobStore(fs, scheme_of(url), data_fs, destination=url), path)


AZURE_BINDING = StoreBinding(
    name="azure",
    schemes=("abfs", "abfss", "az"),
    opener=open_azure_store,
    capabilities=AzureBlobStore.capabilities,
    backend_module="adlfs",
    backend_requirement="manifest-committer[azure]",
)
"""Azure Blob Storage (flat namespace) through adlfs."""
