"""fsspec's in-memory filesystem, for tests and for trying the committer without a disk."""

from __future__ import annotations

from typing import Any

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
    )

    def __init__(self, fs: Any) -> None:
        super().__init__(fs, "memory")

    def from_url(self, url: str) -> str:
        path = super().from_url(url)
        return path if path.startswith("/") else "/" + path
