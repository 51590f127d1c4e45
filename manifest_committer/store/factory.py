"""The doors to a destination's store: each chooses the store for a URL through the store bindings.

``open_store`` serves the protocols that rename (manifest, v1, v2) and the transactional protocol;
``open_destination_store`` serves any binding, for the upload protocol and for the tools that read or undo any
protocol's jobs (status, rollback). Neither looks at schemes: the bindings do (``store/registry.py``).
"""

from __future__ import annotations

from typing import Any

from .bindings import OpenedStore
from .registry import store_bindings


def open_store(url: str, storage_options: dict[str, Any] | None = None) -> OpenedStore:
    """The store and its path for a plain path or URL (an ``OpenedStore``), on a store with a safe rename.

    ``UnsupportedStoreError``, before any connection is made, for a scheme without a binding (saying what a
    binding provides), a store whose rename may overwrite or not say whether it happened (S3: its reason), a
    refused store (HDFS) and a missing fsspec backend (naming what installs it).
    """
    binding = store_bindings().binding_for(url)
    binding.require_safe_rename(url)
    return binding.open(url, storage_options)


def open_destination_store(url: str, storage_options: dict[str, Any] | None = None) -> OpenedStore:
    """``open_store`` whatever the store's rename: S3 opens through its binding too."""
    return store_bindings().binding_for(url).open(url, storage_options)
