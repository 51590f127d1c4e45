"""fsspec's in-memory filesystem, for tests and for trying the committer without a disk."""

from __future__ import annotations

from typing import Any

import fsspec

from .bindings import OpenedStore, StoreBinding
from .operations import FsspecStore, StoreCapabilities


class MemoryStore(FsspecStore):
    """In-memory store; renames are exact because every rename holds one lock."""

    capabilities = StoreCapabilities(
        atomic_rename=True,
        etags_preserved_in_rename=False,
        real_directories=True,
        microsecond_calls=True,
        rename_never_overwrites=True,
        rename_outcome_known=True,
        process_local=True,
    )

    def __init__(self, fs: Any) -> None:
        super().__init__(fs, "memory")

    def write_bytes(self, path: str, data: bytes) -> None:
        """As on a disk, which this store's ``real_directories`` promises: a directory's place takes no file
        (fsspec's would keep both, a file and a directory of one name)."""
        if self._is_directory(self.fs._strip_protocol(path)):
            raise IsADirectoryError(f"{self.to_url(path)}: a directory is in the way of a file")
        super().write_bytes(path, data)

    def _is_directory(self, path: str) -> bool:
        """A directory made by ``mkdirs`` or implied by a file below it (a scan of every key)."""
        below = path.rstrip("/") + "/"
        return path in self.fs.pseudo_dirs or any(key.startswith(below) for key in self.fs.store)

    def from_url(self, url: str) -> str:
        path = super().from_url(url)
        return path if path.startswith("/") else "/" + path


def open_memory_store(url: str, storage_options: dict[str, Any]) -> OpenedStore[MemoryStore]:
    """fsspec's in-memory filesystem of this process, and the path of a ``memory://`` URL."""
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    return OpenedStore(MemoryStore(fs), path.rstrip("/") or "/")


MEMORY_BINDING = StoreBinding(
    name="memory",
    schemes=("memory",),
    opener=open_memory_store,
    capabilities=MemoryStore.capabilities,
)
"""fsspec's ``memory://``, which only this process can reach."""
