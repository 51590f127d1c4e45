"""A task attempt's filesystem where its files go straight to their final place (transactional, upload).

A task writes as under every protocol, ``task.fs.open(task.work_path + "/year=2024/part-0.parquet", "wb")``.
Here ``work_path`` is a virtual directory: each file opened for writing below it is created in the destination
at the same relative directory, its name carrying the job's tid and the attempt's tag
(``transactional.records.data_file_name``; the upload protocol keeps the name), and only after its write marker is
durable, so that job commit and rollback find every file this attempt may have created without listing the destination.
A name the store would rewrite (a character of its ``separator_aliases``, such as Azure's ``\\``) is refused before
its marker is recorded, as is a destination path the store's client would keep under another name
(``StoreCapabilities.kept_name``: adlfs keeps ``b.csv?`` as ``b.csv``): the records name exactly what the store holds.
What the attempt opened is kept in an ``AttemptFiles`` register, which the task commit of the same committer object
reads; reads, probes, listings and deletes of paths below ``work_path`` see the attempt's own files under their
task-side names. Paths outside ``work_path`` are refused: a task of this protocol writes nowhere else.
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from fsspec.spec import AbstractFileSystem

from ..errors import CommitterError
from ..paths import is_hidden
from ..store.operations import rewritten_path

log = logging.getLogger(__name__)

WRITE_MODES = frozenset("wax+")
V = TypeVar("V")


class AttemptRegister(Generic[V]):
    """What one task attempt wrote in this process, by task-side relative path; safe across the task's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, V] = {}

    def add(self, relative: str, value: V) -> None:
        with self._lock:
            self._entries[relative] = value

    def pop(self, relative: str) -> V | None:
        with self._lock:
            return self._entries.pop(relative, None)

    def remove(self, relative: str) -> None:
        self.pop(relative)

    def get(self, relative: str) -> V | None:
        with self._lock:
            return self._entries.get(relative)

    def items(self) -> list[tuple[str, V]]:
        with self._lock:
            return sorted(self._entries.items())

    def clear(self) -> list[tuple[str, V]]:
        with self._lock:
            items = sorted(self._entries.items())
            self._entries.clear()
            return items


AttemptFiles = AttemptRegister[str]
"""The files one task attempt opened for writing: task-side relative path -> destination-relative path."""


class DirectWriteFileSystem(AbstractFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """The ``task.fs`` of one transactional task attempt; see the module."""

    protocol = "mc-direct-write"
    protocol_name = "transactional"
    """The commit protocol named in refusals (a subclass serves another protocol)."""
    cachable = False
    root_marker = ""

    def __init__(
        self,
        target: Any,
        *,
        work_path: str,
        destination: str,
        final_name: Callable[[str], str],
        record_marker: Callable[[str], object],
        files: AttemptFiles,
        make_parents: bool,
        separator_aliases: str = "",
        kept_name: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self.work_path = work_path.rstrip("/")
        self.destination = destination.rstrip("/")
        self.final_name = final_name
        self.record_marker = record_marker
        self.files = files
        self.make_parents = make_parents
        self.separator_aliases = separator_aliases
        """The store's ``StoreCapabilities.separator_aliases``: a name holding one is refused."""
        self.kept_name = kept_name
        """The store's ``StoreCapabilities.kept_name``: a destination path it rewrites is refused."""

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        return text.rstrip("/") or text

    # --- path mapping ---------------------------------------------------------------------------------------------

    def relative(self, path: str) -> str:
        """The task-side path relative to ``work_path``; ``CommitterError`` outside it or for a hidden name."""
        path = self._strip_protocol(path)
        prefix = self.work_path + "/"
        if not path.startswith(prefix):
            raise CommitterError(
                f"{path}: the {self.protocol_name} protocol: a task writes only below its work path {self.work_path} "
                "(its files go straight to their final place)"
            )
        relative = path[len(prefix) :]
        rewritten = sorted({character for character in relative if character in self.separator_aliases})
        if rewritten:
            held = " and ".join(repr(character) for character in rewritten)
            raise CommitterError(
                f"{path}: the {self.protocol_name} protocol: a data file path must not hold {held}, which this store "
                "keeps as '/' (the commit records would name another file than the store holds)"
            )
        segments = relative.split("/")
        if any(segment in ("", ".", "..") for segment in segments) or any(is_hidden(s) for s in segments):
            raise CommitterError(
                f"{path}: the {self.protocol_name} protocol: a data file path must not have empty, '.' or '..' "
                "segments, or names starting with '_' or '.' (readers skip those)"
            )
        return relative

    def _final_path(self, relative: str) -> str:
        final = self.files.get(relative)
        if final is None:
            raise FileNotFoundError(posixpath.join(self.work_path, relative))
        return posixpath.join(self.destination, final)

    def _directory_listing(self, relative: str) -> list[tuple[str, str]]:
        """The attempt's files below a task-side directory (``""``: all of them)."""
        prefix = relative + "/" if relative else ""
        return [(name, final) for name, final in self.files.items() if name.startswith(prefix)]

    # --- writing --------------------------------------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Any = None,
        autocommit: bool = True,
        cache_options: Any = None,
        **kwargs: Any,
    ) -> Any:
        relative = self.relative(path)
        if not WRITE_MODES & set(mode):
            return self.target.open(self._final_path(relative), mode, block_size=block_size, **kwargs)
        if "a" in mode or "+" in mode:
            raise CommitterError(
                f"{path}: the {self.protocol_name} protocol: a task creates new files only (mode {mode!r})"
            )
        directory, name = posixpath.split(relative)
        final = posixpath.join(directory, self.final_name(name)) if directory else self.final_name(name)
        kept = rewritten_path(self.kept_name, posixpath.join(self.destination, final), self.destination)
        if kept is not None:
            raise CommitterError(
                f"{path}: the {self.protocol_name} protocol: this store would keep {final!r} as {kept!r} (its client "
                "reads a path as a URL: the commit records would name another file than the store holds)"
            )
        self.record_marker(final)  # durable before the file exists: rollback must find every file
        self.files.add(relative, final)
        final_path = posixpath.join(self.destination, final)
        if self.make_parents:
            self.target.makedirs(posixpath.dirname(final_path), exist_ok=True)
        return self.target.open(final_path, mode, block_size=block_size, **kwargs)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.makedirs(path, exist_ok=True)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Directories are the destination's: created with the first file where the store has real ones."""
        path = self._strip_protocol(path)
        if path != self.work_path:
            self.relative(path)

    def rmdir(self, path: str) -> None:
        """Nothing to remove: the work path is virtual."""

    # --- reading back what the attempt wrote ------------------------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        relative = "" if path == self.work_path else self.relative(path)
        if relative and self.files.get(relative) is not None:
            detail = dict(self.target.info(self._final_path(relative)))
            detail["name"] = path
            return detail
        if relative == "" or self._directory_listing(relative):
            return {"name": path, "size": 0, "type": "directory"}
        raise FileNotFoundError(path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        relative = "" if path == self.work_path else self.relative(path)
        if relative and self.files.get(relative) is not None:
            entries = [self.info(path)]
            return entries if detail else [path]
        children: dict[str, bool] = {}
        prefix = relative + "/" if relative else ""
        for name, _ in self._directory_listing(relative):
            child, _, below = name[len(prefix) :].partition("/")
            children[child] = children.get(child, False) or bool(below)
        if not children and relative:
            raise FileNotFoundError(path)
        names = [posixpath.join(path, child) for child in sorted(children)]
        if not detail:
            return names
        return [self.info(name) for name in names]

    def _rm(self, path: str) -> None:
        relative = self.relative(path)
        final = self._final_path(relative)
        self.target.rm_file(final)
        self.files.remove(relative)

    def rm_file(self, path: str) -> None:
        self._rm(path)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        raise CommitterError(
            f"{path1}: copying files is not supported by the {self.protocol_name} protocol's task filesystem"
        )

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        raise CommitterError(
            f"{path1}: the {self.protocol_name} protocol: a task cannot rename its files (they are written to their "
            "final place)"
        )
