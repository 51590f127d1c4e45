"""Choose the store binding for a URL; the one place that looks at schemes."""

from __future__ import annotations

from typing import Any

import fsspec

from .local import LocalStore
from .memory import MemoryStore
from .operations import StoreOperations


def open_store(url: str, storage_options: dict[str, Any] | None = None) -> tuple[StoreOperations, str]:
    """The store operations and the store path for a plain path or fsspec URL."""
    options = dict(storage_options or {})
    fs, path = fsspec.core.url_to_fs(url, **options)
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "file" in protocols or "local" in protocols:
        local_fs = fsspec.filesystem("file", auto_mkdir=True)
        return LocalStore(local_fs), path.rstrip("/") or "/"
    if "memory" in protocols:
        return MemoryStore(fs), path.rstrip("/") or "/"
    return StoreOperations(fs, protocols[0]), path.rstrip("/")
