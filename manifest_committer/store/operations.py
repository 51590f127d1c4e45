"""The store-operations contract (``StoreOperations``, a ``Protocol``) and its binding over fsspec (``FsspecStore``).

fsspec's ``mv`` is copy-then-delete on object stores and overwrites silently, so this layer defines the
operations the protocol needs, each with one exact promise. Stages ask capability flags, never schemes.
Backends (local, memory, Azure, GCS) subclass ``FsspecStore`` and keep their own error classification in their
own module; wrappers (fault injection, rate limiting) implement the protocol by delegation.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import posixpath
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fsspec.asyn import sync

from ..urls import decode_path, encode_path, split_url

A = TypeVar("A")
Item = TypeVar("Item")

_GLOB_CHARACTERS = ("*", "?", "[")

AUTH_STATUS_CODES = frozenset({401, 403})


class LinkInPathError(OSError):
    """A directory on the way to a file to delete is a symbolic link: following it could leave the destination."""


"""HTTP statuses of refused credentials: unauthenticated (missing or bad) and forbidden."""


def _has_glob_characters(*paths: str) -> bool:
    """fsspec's ``mv``, ``copy`` and ``rm`` expand these as a glob pattern, even in a path meant literally."""
    return any(char in path for path in paths for char in _GLOB_CHARACTERS)


@dataclass(frozen=True, slots=True)
class FileStatus:
    """What a listing or probe tells about one path."""

    path: str
    size: int
    is_dir: bool
    etag: str | None = None
    checksum: str | None = None
    is_link: bool = False
    """A symbolic link (only local disk has them): task commit refuses it rather than commit a link."""
    modified: float | None = None
    """Last modification, seconds since the epoch, where the store reports it (``vacuum``'s retention)."""


@dataclass(frozen=True, slots=True)
class RenameHint:
    """What the job knows of one rename beforehand, so a store may leave out the probes that would tell it.

    A hint never weakens a promise: a store that uses one still never overwrites (its copy is conditional on
    the destination being absent), and where the hint turns out wrong it takes the path without it.
    """

    source_etag: str | None = None
    """The source's etag as the task commit listed it (the manifest's ``e``): a store may pin its copy and its
    delete to it instead of probing the source first."""
    dest_clear: bool = False
    """The job saw nothing at the destination nor below ``dest/`` (it found the destination's directory missing
    and made it, or listed it): a store may leave out its probe for a directory in the way."""


NO_HINTS: Sequence[RenameHint | None] = ()
"""No hint for any rename of a batch."""


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store guarantees, so stages can choose behaviour without looking at schemes.

    A store binding (``store/bindings.py``) declares them for its store. The rename-based protocols need the two
    ``rename_*`` guarantees; the ``upload`` protocol needs ``pending_uploads``; the others tune behaviour.
    """

    atomic_rename: bool
    """``rename_file`` is one atomic operation: no state where both or neither path holds the file."""
    etags_preserved_in_rename: bool
    """A renamed file keeps its etag, so validation can compare etags from task commit."""
    real_directories: bool
    """Directories exist on their own (POSIX); object stores only imply them from file names."""
    microsecond_calls: bool = False
    """Calls finish in microseconds (local disk, memory): Python's GIL, not the store, then bounds throughput, so
    running more of them at once than there are cores only adds contention."""
    checksums_preserved_in_rename: bool = False
    """A renamed file keeps the ``checksum`` its status reports (GCS crc32c, Azure Content-MD5), so a file at a
    destination can be proved to be a copy of a source by comparing the two."""
    hidden_checksum_files: bool = False
    """Hadoop's checksummed filesystem of this store writes a ``.NAME.crc`` beside each ``NAME`` and hides it from
    listings (only ``file://``: ``LocalFileSystem``), so task commit leaves such side files out."""
    directory_rename: bool = False
    """``rename_dir`` moves a whole tree in one atomic call (POSIX rename), so a job's state can leave the way at
    once and be deleted after the job commit returns (``stages/cleanup.py``)."""
    concurrent_calls: bool = False
    """``rename_files``, ``read_files`` and ``delete_dirs`` put a batch's calls in flight together from one thread
    (an async client on fsspec's event loop): one thread wake-up per batch instead of per call, the CPU a call
    costs at hundreds of threads."""
    rename_never_overwrites: bool = False
    """``rename_file`` never replaces anything at the destination, even while another process or host writes
    there: the store itself enforces the condition (a no-replace rename, a conditional copy), or no other process
    can reach the store (memory). A check then a move is not enough across processes."""
    rename_outcome_known: bool = False
    """``rename_file`` says whether it happened: it returns only once the file moved, and after an error either
    nothing moved, or the file moved whole (the source gone), or a second call finishes the move, so a retry
    never loses or doubles a file."""
    pending_uploads: bool = False
    """The store offers the ``upload`` protocol's calls (``store.s3.UploadStore``): uploads that stay invisible
    until completed, and completions that never replace an object (S3's conditional writes)."""
    appendable: bool = False
    """``append_bytes`` adds to the end of a file in place, durably (POSIX ``O_APPEND`` and ``fsync``): a file that
    grows batch by batch costs each batch only its own bytes. Object stores replace objects whole."""
    symbolic_links: bool = False
    """Directories may be symbolic links (local disk): a path below the destination can lead out of it, so deletes
    of paths named by untrusted state go through ``delete_file_below``; ``info`` says whether a path is a link
    (``FileStatus.is_link``), as a listing does."""
    process_local: bool = False
    """The store lives in the committer's process alone (``memory://``): another process that opens its URL
    finds another, empty store, so a job commit's worker processes (``io.processes``) cannot serve it."""
    separator_aliases: str = ""
    """Characters the store takes for ``/`` in a name it is given (Azure Blob Storage: ``\\``): a file opened as
    ``win\\name`` is kept as ``win/name``. A protocol that records the names its tasks open (``transactional``,
    ``upload``) refuses such a name at the task, so that what a record names is what the store holds."""
    kept_name: Callable[[str], str] | None = None
    """The path the store keeps for a path it is given, where its client rewrites more than ``separator_aliases``
    (adlfs reads a path as a URL: ``b.csv?`` is kept as ``b.csv``, ``a?b#c`` as ``a#c?b``); ``None``: every path
    is kept as given. The same protocols refuse a path it changes (``rewritten_path``)."""


def rewritten_path(kept_name: Callable[[str], str] | None, path: str, below: str) -> str | None:
    """What a store of ``kept_name`` (``StoreCapabilities.kept_name``) would keep instead of ``path`` or of one of
    its directories down to ``below``, or ``None`` when it keeps them all as given: a directory it rewrites can be
    written to but never listed under its own name."""
    if kept_name is None:
        return None
    candidate = path
    while candidate.startswith(below + "/"):
        kept = kept_name(candidate)
        if kept != candidate:
            return kept
        candidate = posixpath.dirname(candidate)
    return None


COPY_THEN_DELETE_OBJECT_STORE = StoreCapabilities(
    atomic_rename=False,
    etags_preserved_in_rename=False,
    real_directories=False,
    checksums_preserved_in_rename=True,
    concurrent_calls=True,
    rename_never_overwrites=True,
    rename_outcome_known=True,
)
"""A flat object store whose rename is a server-side copy conditional on an empty destination, then a delete,
keeping the content checksum, through an async client (Azure Blob Storage, GCS); an interrupted rename is
finished by the next call."""


class StoreOperations(Protocol):
    """Store calls with precise promises: what a stage may ask of a store, and nothing else.

    Paths are the store's own decoded paths (``/data/out`` locally, ``bucket/out`` on object stores);
    ``to_url``/``from_url`` convert to and from the percent-encoded URLs that manifests hold.
    """

    fs: Any
    """The filesystem of the committer's own calls."""
    data_fs: Any
    """The filesystem tasks write their files with."""
    scheme: str
    capabilities: StoreCapabilities
    credential_sources: str
    """Where this store's credentials come from (options, environment variables), for error messages; may be
    empty."""

    def to_url(self, path: str) -> str:
        """The percent-encoded URL of a path, as written into manifests and ``_SUCCESS``."""
        ...

    def from_url(self, url: str) -> str:
        """The path of a URL of this store; ``ValueError`` for a URL of another store, account or bucket."""
        ...

    def join(self, parent: str, *names: str) -> str: ...

    def parent(self, path: str) -> str: ...

    def info(self, path: str) -> FileStatus | None:
        """Status of a path, or ``None`` if nothing is there."""
        ...

    def list_dir(self, path: str) -> list[FileStatus]:
        """Direct children of a directory; ``FileNotFoundError`` if it does not exist."""
        ...

    def same_content(self, first: FileStatus, second: FileStatus) -> bool:
        """True only when the statuses prove two files hold the same bytes."""
        ...

    def is_failed_copy(self, source: str, dest: str) -> bool:
        """Whether ``dest`` holds what a server-side copy from ``source`` left when the copy failed (a
        copy-then-delete rename whose copy ended ``failed``): the rename's own leftover, never a file of use."""
        ...

    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents; fine if it exists; ``FileExistsError`` if a file is in the way."""
        ...

    def rename_file(self, source: str, dest: str) -> None:
        """Move one file; ``FileExistsError`` if anything is at ``dest``, ``FileNotFoundError`` if no source."""
        ...

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        """``rename_file`` of each ``(source, dest)``, in flight together where ``capabilities.concurrent_calls``;
        one outcome per pair, in order: ``None`` when it moved, else the error its own ``rename_file`` raises.
        ``hints`` (empty, or one per pair) may spare the store its probes (``RenameHint``)."""
        ...

    def rename_dir(self, source: str, dest: str) -> None:
        """Move a directory tree in one atomic call; ``FileExistsError`` if anything is at ``dest``,
        ``FileNotFoundError`` if no source or no parent of ``dest``. Only where ``capabilities.directory_rename``;
        ``NotImplementedError`` elsewhere."""
        ...

    def move_dir_holding(self, source: str, name: str, dest: str) -> bool:
        """``rename_dir`` of ``source`` to ``dest`` if ``source`` is a directory, not a link, holding the file
        ``name`` and nothing else; ``False``, with nothing moved, if it holds anything else or is gone. Errors are
        ``rename_dir``'s. A job commit moves a directory of one file in whole this way (``directory_moves``)."""
        ...

    def delete_file(self, path: str) -> bool:
        """Delete one file; ``False`` if nothing was there."""
        ...

    def delete_dir(self, path: str) -> bool:
        """Delete a directory tree; ``False`` if nothing was there."""
        ...

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        """``delete_dir`` of each path, in flight together where ``capabilities.concurrent_calls``; one outcome per
        path, in order: whether anything was there, else the error its own ``delete_dir`` raises."""
        ...

    def remove_empty_dir(self, path: str) -> bool:
        """Remove a directory only if it is empty; ``False`` if it is missing or holds anything."""
        ...

    def read_bytes(self, path: str) -> bytes: ...

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        """``read_bytes`` of each path, in flight together where ``capabilities.concurrent_calls``; one outcome per
        path, in order: its bytes, else the error its own ``read_bytes`` raises."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file, replacing any file there; a reader sees the old or the new bytes, never a part."""
        ...

    def append_bytes(self, path: str, data: bytes) -> None:
        """Add ``data`` at the end of ``path`` (created if missing) and make it durable before returning; only
        where ``capabilities.appendable``, ``NotImplementedError`` elsewhere. A failed call may leave a part of
        ``data`` at the end: the caller must not append to that file again."""
        ...

    def write_private_bytes(self, path: str, data: bytes) -> None:
        """``write_bytes`` of a secret: on local disk the file is readable and writable by its owner only (0600);
        elsewhere the store's own permissions decide who reads it."""
        ...

    def read_private_bytes(self, path: str) -> bytes:
        """``read_bytes`` of a secret that ``write_private_bytes`` wrote; on local disk ``PermissionError`` naming
        the file if it is a link, not owned by this user, or readable or writable by anyone else."""
        ...

    def delete_file_below(self, root: str, path: str) -> bool:
        """``delete_file`` of ``path`` (below directory ``root``), never through a symbolic link: on local disk each
        directory from ``root`` down is opened without following links, and ``LinkInPathError`` is raised when one
        is a link. ``False`` if nothing was there."""
        ...

    def copy_file(self, source: str, dest: str) -> None: ...

    def is_transient(self, error: BaseException) -> bool:
        """True for errors a retry may cure (timeouts, lost connections, throttling)."""
        ...

    def is_auth_error(self, error: BaseException) -> bool:
        """True when the store refused the call's credentials, or had none to send."""
        ...

    def close(self) -> None:
        """Release the store's clients and connections; idempotent. The store must not be used afterwards."""
        ...


def use_client_calls_only(store: StoreOperations) -> None:
    """``FsspecStore.use_client_calls_only`` of ``store``; a store of another kind sends no requests of its own."""
    if isinstance(store, FsspecStore):
        store.use_client_calls_only()


class FsspecStore:
    """``StoreOperations`` bound to one fsspec filesystem; the base of every backend.

    Paths are the filesystem's own decoded paths (``/data/out`` locally, ``bucket/out`` on object stores);
    ``to_url``/``from_url`` convert to and from the percent-encoded URLs that manifests hold.
    """

    capabilities = StoreCapabilities(atomic_rename=False, etags_preserved_in_rename=False, real_directories=False)
    credential_sources = ""

    def __init__(self, fs: Any, scheme: str, data_fs: Any = None) -> None:
        self.fs = fs
        self.scheme = scheme
        self.data_fs = fs if data_fs is None else data_fs
        """The filesystem tasks write their files with. Cloud stores: fsspec's shared instance with its client's
        own retries, while ``fs`` is a private one whose client does not retry, so the committer's policy
        alone decides how long a store call may take."""
        self._rename_lock = threading.Lock()
        self._read_options: dict[str, Any] = {}
        """Keyword arguments of each whole-file read (``cat_file``), where a store needs some."""
        self.closed = False

    def close(self) -> None:
        """Nothing to release for a filesystem without network clients (local disk, memory)."""
        self.closed = True

    def use_client_calls_only(self) -> None:
        """Send every request through the client library's own calls (``store.direct.requests=false``): a store
        that sends some requests itself stops; the others have nothing to change."""

    # --- URLs -------------------------------------------------------------------------------------------------

    def to_url(self, path: str) -> str:
        """The percent-encoded URL of a path, as written into manifests and ``_SUCCESS``."""
        return f"{self.scheme}://{encode_path(path)}"

    def from_url(self, url: str) -> str:
        """The path of a URL this store wrote (or Hadoop wrote); raises ``ValueError`` for another store."""
        scheme, authority, path = split_url(url)
        if scheme != self.scheme:
            raise ValueError(f"{url} is not a {self.scheme}:// URL")
        return decode_path(f"{authority}{path}" if authority else path.lstrip("/"))

    @staticmethod
    def join(parent: str, *names: str) -> str:
        return posixpath.join(parent, *names)

    @staticmethod
    def parent(path: str) -> str:
        return posixpath.dirname(path.rstrip("/"))

    # --- probes -----------------------------------------------------------------------------------------------

    def info(self, path: str) -> FileStatus | None:
        """Status of a path, or ``None`` if nothing is there."""
        try:
            raw = self.fs.info(path)
        except FileNotFoundError:
            return None
        return self._status(raw)

    def list_dir(self, path: str) -> list[FileStatus]:
        """Direct children of a directory; ``FileNotFoundError`` if it does not exist."""
        if not self.fs.isdir(path):
            raise FileNotFoundError(path)
        return [self._status(raw) for raw in self.fs.ls(path, detail=True)]

    def _status(self, raw: dict[str, Any]) -> FileStatus:
        etag = raw.get("etag") or raw.get("ETag")
        checksum = raw.get("crc32c") or raw.get("md5Hash") or raw.get("content_md5")
        return FileStatus(
            path=self.fs._strip_protocol(raw["name"]),
            size=int(raw.get("size") or 0),
            is_dir=raw.get("type") == "directory",
            etag=str(etag).strip('"') if etag else None,
            checksum=str(checksum) if checksum else None,
            is_link=bool(raw.get("islink")),
            modified=modified_time(raw),
        )

    def is_failed_copy(self, source: str, dest: str) -> bool:
        """``False``: a store whose copies finish within the call leaves no failed copy behind."""
        return False

    def same_content(self, first: FileStatus, second: FileStatus) -> bool:
        """True only when the statuses prove two files hold the same bytes: same size and same checksum.

        ``False`` means "not proved", not "different": a store without checksums never proves anything, so a
        caller deciding whether to delete a source must treat ``False`` as a conflict.
        """
        return (
            not first.is_dir
            and not second.is_dir
            and first.size == second.size
            and first.checksum is not None
            and first.checksum == second.checksum
        )

    # --- changes ----------------------------------------------------------------------------------------------

    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents; fine if it exists; ``FileExistsError`` if a file is in the way."""
        status = self.info(path)
        if status is not None and not status.is_dir:
            raise FileExistsError(f"{path}: a file is in the way of a directory")
        try:
            self.fs.makedirs(path, exist_ok=True)
        except NotADirectoryError:
            raise FileExistsError(f"{path}: a file is in the way of a parent directory") from None

    def rename_file(self, source: str, dest: str) -> None:
        """Move one file; ``FileExistsError`` if anything is at ``dest``, ``FileNotFoundError`` if no source.

        This generic binding checks then moves under a lock, which is exact within one process only.
        """
        with self._rename_lock:
            if self.fs.exists(dest):
                raise FileExistsError(f"rename destination exists: {dest}")
            if not self.fs.isfile(source):
                raise FileNotFoundError(f"rename source not found: {source}")
            if _has_glob_characters(source, dest):
                # mv would glob-expand the source (a file named "a[1]" is "not found", "a?" moves into a dir).
                self.fs.cp_file(source, dest)
                self.fs.rm_file(source)
            else:
                self.fs.mv(source, dest)

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        """One ``rename_file`` after another, hints unused; stores with an async client override it to run them
        at once."""
        return renames_one_by_one(self.rename_file, pairs)

    def rename_dir(self, source: str, dest: str) -> None:
        """Object stores have no directory to rename (a "rename" is a copy of every object): not offered."""
        raise NotImplementedError(
            f"{self.to_url(source)}: the {self.scheme} store cannot rename a directory in one call"
        )

    def move_dir_holding(self, source: str, name: str, dest: str) -> bool:
        return move_dir_holding_by_calls(self, source, name, dest)

    def delete_file(self, path: str) -> bool:
        """Delete one file; ``False`` if nothing was there."""
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            return False
        return True

    def delete_dir(self, path: str) -> bool:
        """Delete a directory tree; ``False`` if nothing was there."""
        if not self.fs.exists(path):
            return False
        if _has_glob_characters(path):
            self._delete_tree_literally(path)
        else:
            self.fs.rm(path, recursive=True)
        return True

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        """Every delete at once on the loop of an async client where ``capabilities.concurrent_calls`` (those the
        store cannot make there, one after another afterwards), else one ``delete_dir`` after another."""
        return self._each_on_loop(paths, self._delete_dir_on_loop, self.delete_dir)

    def _each_on_loop(
        self,
        paths: Sequence[str],
        on_loop: Callable[[str], Callable[[], Awaitable[A]] | None],
        alone: Callable[[str], A],
    ) -> list[A | Exception]:
        """A call for each path, all at once on the async client's loop (``on_loop(path)``, or ``None`` where the
        call cannot go there) where ``capabilities.concurrent_calls``; ``alone(path)`` one after another for the
        rest, and for every path elsewhere. An outcome per path, in order."""
        if not (self.capabilities.concurrent_calls and getattr(self.fs, "async_impl", False)):
            return calls_one_by_one(alone, paths)
        made = [on_loop(path) for path in paths]
        calls = [call for call in made if call is not None]

        async def all_at_once() -> list[Any]:
            return await asyncio.gather(*(call() for call in calls), return_exceptions=True)

        answers = iter(answers_of(sync(self.fs.loop, all_at_once)))
        return [
            next(answers) if call is not None else calls_one_by_one(alone, [path])[0]
            for path, call in zip(paths, made, strict=True)
        ]

    def _delete_dir_on_loop(self, path: str) -> Callable[[], Awaitable[bool]] | None:
        """``delete_dir`` of ``path`` as a coroutine on the client's loop, or ``None`` where it cannot be one (a
        name with glob characters, which fsspec's ``rm`` would expand)."""
        if _has_glob_characters(path):
            return None
        fs = self.fs

        async def delete() -> bool:
            if not await fs._exists(path):
                return False
            await fs._rm(path, recursive=True)
            return True

        return delete

    def _delete_tree_literally(self, path: str) -> None:
        """Delete file by file: ``rm("dt=?")`` would glob-expand and delete ``dt=1``, ``dt=2``, ... too."""
        if self.fs.isfile(path):
            self.fs.rm_file(path)
            return
        directories = [path]
        for name, detail in self.fs.find(path, withdirs=True, detail=True).items():
            if detail.get("type") == "directory":
                directories.append(name)
            else:
                self.fs.rm_file(name)
        for directory in sorted(set(directories), key=len, reverse=True):
            with contextlib.suppress(FileNotFoundError):  # an implied directory vanishes with its last file
                self.fs.rmdir(directory)

    def remove_empty_dir(self, path: str) -> bool:
        """Remove a directory only if it is empty; ``False`` if it is missing or holds anything."""
        try:
            if self.fs.ls(path):
                return False
            self.fs.rmdir(path)
        except (FileNotFoundError, OSError):
            return False
        return True

    def read_bytes(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path, **self._read_options)
        return data

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        """Every read at once on the loop of an async client where ``capabilities.concurrent_calls``, else one
        ``read_bytes`` after another."""
        fs, options = self.fs, self._read_options
        return self._each_on_loop(paths, lambda path: functools.partial(fs._cat_file, path, **options), self.read_bytes)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file, replacing any file there."""
        self.fs.pipe_file(path, data)

    def append_bytes(self, path: str, data: bytes) -> None:
        """Object stores replace objects whole: nothing to append to."""
        raise NotImplementedError(f"{self.to_url(path)}: the {self.scheme} store cannot append to a file")

    def write_private_bytes(self, path: str, data: bytes) -> None:
        """Object stores: the store's permissions (bucket or container policies) decide who reads the object."""
        self.write_bytes(path, data)

    def read_private_bytes(self, path: str) -> bytes:
        return self.read_bytes(path)

    def delete_file_below(self, root: str, path: str) -> bool:
        """No symbolic links on object stores: a path below ``root`` is below it."""
        return self.delete_file(path)

    def copy_file(self, source: str, dest: str) -> None:
        self.fs.cp_file(source, dest)  # one file, literally: copy() would glob-expand the source

    def is_transient(self, error: BaseException) -> bool:
        """True for errors a retry may cure (timeouts, lost connections, throttling)."""
        return isinstance(error, TimeoutError | ConnectionError)

    def is_auth_error(self, error: BaseException) -> bool:
        """True when the store refused the call's credentials, or had none to send (401, 403, no permission).

        Follows explicit causes (``raise ... from``), since fsspec backends often wrap the service's answer.
        Stores override ``_is_auth_error_here`` for their SDK's errors; this default knows ``PermissionError``.
        """
        return any(self._is_auth_error_here(cause) for cause in error_chain(error))

    def _is_auth_error_here(self, error: BaseException) -> bool:
        return isinstance(error, PermissionError)


def move_dir_holding_by_calls(store: StoreOperations, source: str, name: str, dest: str) -> bool:
    """``StoreOperations.move_dir_holding`` made of the store's own probe, listing and ``rename_dir``."""
    found = store.info(source)
    if found is None or found.is_link or not found.is_dir:  # a link would be moved as a link, out of the job
        return False
    try:
        held = store.list_dir(source)
    except FileNotFoundError:
        return False
    if len(held) != 1 or held[0].is_dir or held[0].is_link or held[0].path.rstrip("/").rpartition("/")[2] != name:
        return False
    store.rename_dir(source, dest)
    return True


def renames_one_by_one(rename: Callable[[str, str], None], pairs: Sequence[tuple[str, str]]) -> list[Exception | None]:
    """``rename`` of each pair in turn; ``None`` for each that moved, else its error (the batch carries on)."""
    return calls_one_by_one(lambda pair: rename(*pair), pairs)


def calls_one_by_one(call: Callable[[Item], A], items: Sequence[Item]) -> list[A | Exception]:
    """``call`` of each item in turn: its answer, else its error (the batch carries on)."""
    outcomes: list[A | Exception] = []
    for item in items:
        try:
            outcomes.append(call(item))
        except Exception as error:
            outcomes.append(_without_frames(error))
    return outcomes


def _without_frames(error: Exception) -> Exception:
    """``error`` (and the errors it was raised from) without their tracebacks, which the message does not need.

    A traceback holds the frames it passes through, and each finished frame its locals and its caller's frame, up
    to the frame holding the list this error goes into: error, traceback, frames and list would form a cycle,
    one a failed call, that only the cyclic collector frees.
    """
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error


def answers_of(results: Sequence[Any]) -> list[Any]:
    """``asyncio.gather(..., return_exceptions=True)`` results, a ``BaseException`` that is not an ``Exception``
    (cancellation, interrupt) raised rather than returned."""
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
    return list(results)


def renames_on_loop(
    loop: Any,
    rename: Callable[[str, str, RenameHint | None], Awaitable[None]],
    pairs: Sequence[tuple[str, str]],
    hints: Sequence[RenameHint | None] = NO_HINTS,
) -> list[Exception | None]:
    """The coroutine ``rename`` of every pair (with its hint, if any) at once on ``loop`` (an async client's,
    fsspec's); ``None`` for each that moved, else its error. A ``BaseException`` that is not an ``Exception``
    (cancellation, interrupt) is raised, not returned."""
    every_hint = list(hints) if hints else [None] * len(pairs)

    async def all_at_once() -> list[Any]:
        renames = (rename(source, dest, hint) for (source, dest), hint in zip(pairs, every_hint, strict=True))
        return await asyncio.gather(*renames, return_exceptions=True)

    return outcomes_of(sync(loop, all_at_once))


def outcomes_of(results: Sequence[Any]) -> list[Exception | None]:
    """``asyncio.gather(..., return_exceptions=True)`` results as outcomes: ``None`` for a success, the error for
    a failure; a ``BaseException`` that is not an ``Exception`` (cancellation, interrupt) is raised."""
    outcomes: list[Exception | None] = []
    for result in results:
        if isinstance(result, Exception):
            outcomes.append(result)
        elif isinstance(result, BaseException):
            raise result
        else:
            outcomes.append(None)
    return outcomes


def modified_time(raw: dict[str, Any]) -> float | None:
    """Seconds since the epoch of an fsspec ``info`` dict's modification time, whatever the backend calls it:
    ``mtime`` (local), ``created`` (memory), ``last_modified`` (adlfs), ``updated`` (gcsfs), ``LastModified`` (s3fs).
    """
    for key in ("mtime", "last_modified", "LastModified", "updated", "created"):
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime.datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
        if isinstance(value, str):
            try:
                moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
    return None


def error_chain(error: BaseException) -> list[BaseException]:
    """``error`` and its explicit causes, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__
    return chain
