"""``memory://`` stores with O(1) probes for the benchmarks: fsspec's memory filesystem scans every key per call.

Imports only ``manifest_committer.store`` modules that every version of the package since the store layer has,
so a benchmark can run it against the code of an older git ref as well as the working tree.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from manifest_committer.store import FileStatus
from manifest_committer.store.memory import MemoryStore


class IndexedMemoryStore(MemoryStore):
    """``memory://`` with O(1) probes and renames, so a benchmark measures the committer, not fsspec's scans.

    fsspec's ``MemoryFileSystem.info`` scans every key of the filesystem (to find implied directories) and ``mv``
    expands paths, so with 20,000 keys one ``rename_file`` costs milliseconds of CPU under the GIL: more than
    the injected latency can hide. This store keeps a tree beside the filesystem's dict (each directory, explicit
    or implied, with its subdirectories and files), so a probe or rename is O(1) and a recursive delete visits
    only the subtree it deletes (a pass over every key per ``delete_dir`` made the cleanup of 200 task attempts
    cost seconds of CPU at 20,000 keys). A deleted file's directory stays, as a real directory would.
    """

    def __init__(self, fs: Any) -> None:
        super().__init__(fs)
        self._subdirs: dict[str, set[str]] = {}
        self._files: dict[str, set[str]] = {}
        self._indexed_keys = -1

    def _size(self) -> int:
        return len(self.fs.store) + len(self.fs.pseudo_dirs)

    def _index(self) -> dict[str, set[str]]:
        """The directories (to their subdirectories), rebuilt if files were written through the filesystem."""
        if self._size() != self._indexed_keys:
            self._subdirs, self._files = {}, {}
            # Snapshots: tasks may be writing through the filesystem meanwhile. The index is current as of the
            # snapshots' size, so a file written after them makes the next call rebuild again (counting after
            # the loops instead marked an index current that missed it, and a task's listing lost its file).
            directories, keys = list(self.fs.pseudo_dirs), list(self.fs.store)
            for directory in directories:
                if directory:
                    self._add_dir(directory)
            for key in keys:
                self._add_file(key)
            self._indexed_keys = len(directories) + len(keys)
        return self._subdirs

    def _add_dir(self, path: str) -> None:
        while path and path not in self._subdirs:
            self._subdirs[path] = set()
            parent = posixpath.dirname(path)
            if parent:
                self._add_dir(parent)
                self._subdirs[parent].add(path)
            path = parent

    def _add_file(self, key: str) -> None:
        parent = posixpath.dirname(key)
        if parent:
            self._add_dir(parent)
        self._files.setdefault(parent, set()).add(key)

    def _forget_file(self, key: str) -> None:
        parent = posixpath.dirname(key)
        self._files.get(parent, set()).discard(key)

    def info(self, path: str) -> FileStatus | None:
        path = self.fs._strip_protocol(path)
        found = self.fs.store.get(path)
        if found is not None:
            return FileStatus(path=path, size=found.size, is_dir=False)
        with self._rename_lock:
            return FileStatus(path=path, size=0, is_dir=True) if path in self._index() else None

    def list_dir(self, path: str) -> list[FileStatus]:
        """From the tree (fsspec's ``ls`` scans every key of the filesystem: a listing of the job's task attempts
        among 20,000 and more keys cost tens of milliseconds of CPU, several per commit)."""
        path = self.fs._strip_protocol(path).rstrip("/")
        with self._rename_lock:
            dirs = self._index()
            if path not in dirs:
                raise FileNotFoundError(path)
            found = [FileStatus(path=d, size=0, is_dir=True) for d in dirs[path]]
            for key in self._files.get(path, ()):
                data = self.fs.store.get(key)
                if data is not None:
                    found.append(FileStatus(path=key, size=data.size, is_dir=False))
        return found

    def rename_file(self, source: str, dest: str) -> None:
        source, dest = self.fs._strip_protocol(source), self.fs._strip_protocol(dest)
        with self._rename_lock:
            dirs = self._index()
            if dest in self.fs.store or dest in dirs:
                raise FileExistsError(f"rename destination exists: {dest}")
            if source not in self.fs.store:
                raise FileNotFoundError(f"rename source not found: {source}")
            self.fs.store[dest] = self.fs.store.pop(source)
            self._forget_file(source)
            self._add_file(dest)

    def mkdirs(self, path: str) -> None:
        """Keeps a current index current, as a write does (a rebuild after each of a job's ``mkdirs`` scanned
        every key again)."""
        status = self.info(path)
        if status is not None and not status.is_dir:
            raise FileExistsError(f"{path}: a file is in the way of a directory")
        with self._rename_lock:
            current = self._indexed_keys == self._size()
            self.fs.makedirs(path, exist_ok=True)
            if current:
                self._add_dir(self.fs._strip_protocol(path).rstrip("/"))
                self._indexed_keys = self._size()

    def write_bytes(self, path: str, data: bytes) -> None:
        """A write keeps a current index current instead of invalidating it: a job commit writes two journal
        records per unit of renames, and a rescan of every key after each was most of the CPU it took at 128
        threads and 20 ms."""
        with self._rename_lock:
            current = self._indexed_keys == self._size()
            super().write_bytes(path, data)
            if current:
                self._add_file(self.fs._strip_protocol(path))
                self._indexed_keys = self._size()

    def _is_directory(self, path: str) -> bool:
        """From the tree; called by ``write_bytes``, which holds the lock."""
        return path.rstrip("/") in self._index()

    def delete_dir(self, path: str) -> bool:
        """Deletes the subtree under ``path`` (fsspec's recursive ``rm`` probes every file it deletes, each a
        full scan)."""
        path = self.fs._strip_protocol(path).rstrip("/")
        with self._rename_lock:
            dirs = self._index()
            found = path in dirs or path in self.fs.store
            self.fs.store.pop(path, None)
            self._forget_file(path)
            pending = [path] if path in dirs else []
            removed: set[str] = set()
            while pending:
                directory = pending.pop()
                removed.add(directory)
                for key in self._files.pop(directory, ()):
                    self.fs.store.pop(key, None)
                pending.extend(dirs.pop(directory, ()))
            if removed:
                parent = posixpath.dirname(path)
                dirs.get(parent, set()).discard(path)
                self.fs.pseudo_dirs[:] = [d for d in self.fs.pseudo_dirs if d not in removed]
            self._indexed_keys = self._size()
        return found

    def delete_file(self, path: str) -> bool:
        key = self.fs._strip_protocol(path)
        with self._rename_lock:
            current = self._indexed_keys == self._size()
            deleted = self.fs.store.pop(key, None) is not None
            if deleted and current:
                self._forget_file(key)
                self._indexed_keys = self._size()
            return deleted


class ConcurrentIndexedMemoryStore(IndexedMemoryStore):
    """``IndexedMemoryStore`` that says it takes a batch of renames in flight at once, as the stores with an async
    client do (Azure, GCS): a rename here takes microseconds, so running the batch's in turn is the same as at
    once, and the ``FaultInjectingStore`` around it sleeps the latency once for the whole batch."""

    capabilities = replace(IndexedMemoryStore.capabilities, concurrent_calls=True)
