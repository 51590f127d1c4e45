"""Google Cloud Storage through gcsfs (``gs://``, ``gcs://``): a rename that never overwrites, by rewrite + delete.

gcsfs's ``mv`` tries GCS's ``moveTo`` (same bucket) and falls back to rewrite + delete, and either way replaces
the destination. This binding builds the rename from the JSON API:

1. GET the source (its generation pins the version copied) and the destination, and list one object below
   ``dest/`` (a "directory" in the way); anything there is ``FileExistsError``.
2. ``rewriteTo`` with ``ifGenerationMatch=0``: real GCS answers 412 if an object appeared at the destination
   meanwhile, so no file is ever replaced. fake-gcs-server ignores preconditions on rewrite (it enforces
   ``ifGenerationMatch=0`` on uploads only); there the probe of step 1 is the only guard, which leaves a window
   of one request for a racing writer. A committer never races itself for one destination (manifests are checked
   for duplicates first), so the window matters only against writers outside the job.
3. Delete that generation of the source.

Where the job saw the destination clear (``RenameHint.dest_clear``: its directory was missing when the job
probed it), step 1 is only the source's generation, and for a batch of renames it comes from one listing of the
range of names the sources span rather than a GET each: two requests a file. What the probe of the destination
guarded on fake-gcs-server (a writer outside the job putting an object there in between) real GCS refuses with
the precondition of step 2.

Between 2 and 3 both paths hold the file. A rename interrupted there is finished by the next call: a destination
with the source's size, crc32c and MD5 holds the same bytes, so deleting the source loses nothing. Etags and
generations change with a copy (``etags_preserved_in_rename`` is false); crc32c survives it.

Steps 2 and 3 go straight onto gcsfs's session (``gcs_direct``): the same calls and errors as gcsfs's, the calls
of renames in flight together in JSON API batch requests; a filesystem it cannot reproduce stays on gcsfs's path.

This module also decides which GCS errors a retry may cure (``is_transient_gcs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import posixpath
import types
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # before gcsfs is imported, or writes stall

from fsspec.asyn import sync

from ..urls import decode_path, split_url
from .bindings import OpenedStore, StoreBinding, cloud_filesystems, scheme_of
from .gcs_direct import DirectObjectRequests
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

LISTING_PAGE = 1000
"""Names a page of a listing holds at most (the JSON API's limit)."""
LISTING_SLACK = 4
"""A batch's listing of its sources' names reads at most this many names a source (other objects in the range)
plus a page, before the sources not yet seen are probed one by one."""
LISTED_FIELDS = "items(name,generation),nextPageToken"
"""What a listing of a batch's sources returns of each (a partial response): all its renames use."""

CREDENTIAL_SOURCES = (
    "storage_options token (a service-account JSON file or dict, 'google_default', 'cloud', or 'anon') and "
    "project; or the environment variable GOOGLE_APPLICATION_CREDENTIALS, or gcloud's application-default login"
)
"""Where gcsfs finds GCS credentials, for the messages of missing or refused ones."""


def is_transient_gcs(error: BaseException) -> bool:
    """A GCS error (gcsfs) that a retry may cure.

    Throttling and server errors are ``gcsfs.retry.HttpError`` with ``.code`` 408/429/500/502/503/504; a failed
    connection is one of aiohttp's client errors or ``asyncio.TimeoutError`` (generic); a download that arrived
    damaged is ``ChecksumError``.
    """
    if is_transient_generic(error):
        return True
    names = class_names(error)
    if "HttpError" in names:
        return status_code(error) in RETRYABLE_STATUS_CODES
    return "ChecksumError" in names


def without_client_retries(fs: Any) -> Any:
    """``fs`` with gcsfs's own retries switched off; the committer's retry policy governs instead.

    gcsfs retries every failed request up to six times (about 33 s of sleeps) before the error surfaces. Its
    count is fixed when the class is defined, so this instance gets the undecorated request method.
    """
    request = getattr(type(fs)._request, "__wrapped__", None)
    if request is None:
        log.warning("Cannot switch off gcsfs's retries of %s: its request method is not a retry wrapper", fs)
        return fs
    fs._request = types.MethodType(request, fs)
    return fs


class GCSStore(FsspecStore):
    """Google Cloud Storage (flat buckets) via gcsfs; ``rename_file`` is a conditional rewrite + delete."""

    capabilities = COPY_THEN_DELETE_OBJECT_STORE
    credential_sources = CREDENTIAL_SOURCES

    def __init__(self, fs: Any, scheme: str = "gs", data_fs: Any = None) -> None:
        super().__init__(fs, scheme, data_fs)
        self._direct = DirectObjectRequests.of(fs)
        """The rewrite and delete of a rename as direct requests (``gcs_direct``); ``None``: through gcsfs."""

    def from_url(self, url: str) -> str:
        scheme, authority, path = split_url(url)
        if scheme not in ("gs", "gcs"):
            raise ValueError(f"{url} is not a gs:// URL")
        return decode_path(f"{authority}{path}" if authority else path.lstrip("/"))

    def is_transient(self, error: BaseException) -> bool:
        return caused_by_transient(error, is_transient_gcs)

    def use_client_calls_only(self) -> None:
        """Renames and their listings through gcsfs's own calls, one request each (``gcs_direct`` and its batch
        requests off)."""
        self._direct = None

    def close(self) -> None:
        """Close the private filesystem's aiohttp session; idempotent.

        gcsfs closes it only in a finaliser at garbage collection, and there without waiting for it. ``data_fs``
        is fsspec's shared instance, which other code in the process may use: it is left open.
        """
        if self.closed:
            return
        self.closed = True
        session = getattr(self.fs, "_session", None)
        if session is not None and not session.closed:
            sync(self.fs.loop, session.close)

    def _is_auth_error_here(self, error: BaseException) -> bool:
        """gcsfs's ``HttpError`` 401/403, its plain ``OSError("Forbidden: ...")`` for a 403, or google-auth failing
        to find or refresh credentials."""
        if super()._is_auth_error_here(error):
            return True
        names = class_names(error)
        if "HttpError" in names and status_code(error) in AUTH_STATUS_CODES:
            return True
        if {"RefreshError", "DefaultCredentialsError"} & names:
            return True
        return type(error) is OSError and str(error).startswith("Forbidden:")

    def _status(self, raw: dict[str, Any]) -> FileStatus:
        status = super()._status(raw)
        if status.is_dir:
            return status
        # crc32c and md5 together: either alone is a weak identity for deciding to delete a source.
        crc32c, md5 = raw.get("crc32c"), raw.get("md5Hash")
        checksum = f"crc32c:{crc32c},md5:{md5}" if crc32c else None
        return FileStatus(
            path=status.path,
            size=status.size,
            is_dir=False,
            etag=status.etag,
            checksum=checksum,
            modified=status.modified,
        )

    # --- directories: zero-byte "dir/" placeholder objects, the convention of gcsfs and the GCS console ------

    def list_dir(self, path: str) -> list[FileStatus]:
        # gcsfs lists a directory's own placeholder object as a child of it.
        own = path.rstrip("/")
        unique = {status.path.rstrip("/"): status for status in super().list_dir(path)}
        return [status for name, status in unique.items() if name != own]

    def mkdirs(self, path: str) -> None:
        """Create a ``path/`` placeholder unless the directory already exists (as a placeholder or a prefix)."""
        status = self.info(path)
        if status is not None:
            if not status.is_dir:
                raise FileExistsError(errno.EEXIST, "a file is in the way of a directory", path)
            return
        _, key, _ = self.fs.split_path(path)
        if not key:
            self.fs.mkdir(path.rstrip("/"), exist_ok=True)
            return
        with contextlib.suppress(FileExistsError):  # created meanwhile: the goal all the same
            self.fs.pipe_file(path.rstrip("/") + "/", b"", mode="create")

    def remove_empty_dir(self, path: str) -> bool:
        try:
            if self.list_dir(path):
                return False
            self.fs.rm_file(path.rstrip("/") + "/")
        except FileNotFoundError:
            return False
        return True

    # --- rename -----------------------------------------------------------------------------------------------

    def rename_file(self, source: str, dest: str) -> None:
        """Rewrite with ``ifGenerationMatch=0``, then delete; ``FileExistsError`` if anything is at ``dest``."""
        sync(self.fs.loop, self._rename, source, dest, None, None)

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        """Every rename of the batch in flight at once on the client's event loop.

        Where the job saw the destination clear (``RenameHint.dest_clear``), the probes of the destination and
        below it are left out, and the sources' generations come from one listing of the range of names they
        span (a page of up to 1,000 names) instead of a GET each: a rename is then the rewrite and the delete.
        """
        every_hint = list(hints) if hints else [None] * len(pairs)
        clear = [source for (source, _), hint in zip(pairs, every_hint, strict=True) if hint and hint.dest_clear]
        listed: dict[tuple[str, str], dict[str, Any]] = sync(self.fs.loop, self._listed, clear) if clear else {}

        async def rename(source: str, dest: str, hint: RenameHint | None) -> None:
            bucket, key, _ = self.fs.split_path(source)
            await self._rename(source, dest, hint, listed.get((bucket, key)))

        return renames_on_loop(self.fs.loop, rename, pairs, every_hint)

    async def _listed(self, sources: Sequence[str]) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects at ``sources`` as one listing per bucket shows them, from the first name in order to the
        last; objects not seen (moved, or beyond ``LISTING_SLACK`` names of others) are simply absent."""
        by_bucket: dict[str, list[str]] = {}
        for source in sources:
            bucket, key, _ = self.fs.split_path(source)
            if key:
                by_bucket.setdefault(bucket, []).append(key)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for bucket, keys in by_bucket.items():
            keys.sort()
            wanted = set(keys)
            prefix = posixpath.commonprefix(keys).rpartition("/")[0]
            budget = LISTING_SLACK * len(keys) + LISTING_PAGE
            token: str | None = None
            seen = 0
            while seen <= budget:
                params = {
                    "prefix": f"{prefix}/" if prefix else None,
                    "startOffset": keys[0],
                    # a first page just large enough for the usual case (the sources and few others between)
                    "maxResults": LISTING_PAGE if token else min(LISTING_PAGE, LISTING_SLACK * len(keys)),
                    "fields": LISTED_FIELDS,
                    "pageToken": token,
                }
                if self._direct is not None:
                    page = await self._direct.list_objects(bucket, params)
                else:
                    page = await self.fs._call("GET", "b/{}/o", bucket, json_out=True, **params)
                items = page.get("items") or []
                seen += len(items)
                for item in items:
                    if item.get("name") in wanted:
                        found[bucket, item["name"]] = item
                token = page.get("nextPageToken")
                if not token or not items or items[-1].get("name", "") >= keys[-1]:
                    break
        return found

    async def _get(self, bucket: str, key: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.fs._call("GET", "b/{}/o/{}", bucket, key, json_out=True)
        except FileNotFoundError:
            return None
        return found

    async def _has_objects_below(self, bucket: str, key: str) -> bool:
        listing = await self.fs._call(
            "GET", "b/{}/o", bucket, prefix=key.rstrip("/") + "/", maxResults=1, json_out=True
        )
        return bool(listing.get("items") or listing.get("prefixes"))

    async def _rename(
        self, source: str, dest: str, hint: RenameHint | None, listed: dict[str, Any] | None = None
    ) -> None:
        """``listed``: the source's object as a listing just showed it (its generation pins the rewrite)."""
        source_bucket, source_key, _ = self.fs.split_path(source)
        dest_bucket, dest_key, _ = self.fs.split_path(dest)
        if not source_key or not dest_key:
            raise IsADirectoryError(errno.EISDIR, "cannot rename a bucket", source if not source_key else dest)
        if hint is not None and hint.dest_clear:
            source_object = listed if listed is not None else await self._get(source_bucket, source_key)
            dest_object, below_dest = None, False
        else:
            source_object, dest_object, below_dest = await asyncio.gather(
                self._get(source_bucket, source_key),
                self._get(dest_bucket, dest_key),
                self._has_objects_below(dest_bucket, dest_key),
            )
        if source_object is None:
            raise FileNotFoundError(errno.ENOENT, "rename source not found", source)
        generation = source_object["generation"]
        if dest_object is not None:
            source_status = self._status(self.fs._process_object(source_bucket, source_object))
            dest_status = self._status(self.fs._process_object(dest_bucket, dest_object))
            if not below_dest and self.same_content(source_status, dest_status):
                log.info("Finishing an interrupted rename of %s to %s: deleting the source", source, dest)
                await self._delete_generation(source_bucket, source_key, generation)
                return
            raise FileExistsError(errno.EEXIST, "rename destination exists", dest)
        if below_dest:
            raise FileExistsError(errno.EEXIST, "rename destination is a directory", dest)

        rewrite: dict[str, Any] = {"done": False}
        token: str | None = None
        while rewrite.get("done") is not True:
            # gcsfs maps 412 (precondition failed: the destination appeared) to FileExistsError.
            if self._direct is not None:
                rewrite = await self._direct.rewrite(
                    (source_bucket, source_key), (dest_bucket, dest_key), generation, token
                )
            else:
                rewrite = await self.fs._call(
                    "POST",
                    "b/{}/o/{}/rewriteTo/b/{}/o/{}",
                    source_bucket,
                    source_key,
                    dest_bucket,
                    dest_key,
                    headers={"Content-Type": "application/json"},
                    json_out=True,
                    sourceGeneration=generation,
                    ifGenerationMatch=0,
                    rewriteToken=token,
                )
            token = rewrite.get("rewriteToken")
        await self._delete_generation(source_bucket, source_key, generation)

    async def _delete_generation(self, bucket: str, key: str, generation: str) -> None:
        try:
            if self._direct is not None:
                await self._direct.delete(bucket, key, generation)
            else:
                await self.fs._call("DELETE", "b/{}/o/{}", bucket, key, generation=generation)
        except FileNotFoundError:
            log.debug("Rename source %s/%s was already deleted", bucket, key)


def open_gcs_store(url: str, storage_options: dict[str, Any]) -> OpenedStore[GCSStore]:
    """The GCS store and the ``bucket/path`` of a ``gs://`` or ``gcs://`` URL, through gcsfs."""
    fs, data_fs, path = cloud_filesystems(url, storage_options)
    return OpenedStore(GCSStore(without_client_retries(fs), scheme_of(url), data_fs), path)


GCS_BINDING = StoreBinding(
    name="gcs",
    schemes=("gs", "gcs"),
    opener=open_gcs_store,
    capabilities=GCSStore.capabilities,
    backend_module="gcsfs",
    backend_requirement="manifest-committer[gcs]",
)
"""Google Cloud Storage (flat buckets) through gcsfs."""
