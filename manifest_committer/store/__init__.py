"""Store operations: the one interface through which stages touch a filesystem.

Which store serves a URL is a store binding's to say (``bindings.py``: ``StoreBinding``; ``registry.py``: the
built-in ones, the entry point group ``manifest_committer.stores`` and ``register_store_binding``;
``generic.py``: a user's fsspec filesystem in a few lines); ``factory.py`` opens a destination through them.
"""

from __future__ import annotations

from .azure import is_transient_azure
from .bindings import OpenedStore, StoreBinding
from .factory import open_destination_store, open_store
from .faults import (
    Fault,
    FaultInjectingStore,
    azure_operation_timed_out,
    azure_server_busy,
    gcs_http_error,
    s3_error,
    s3_internal_error,
    s3_slow_down,
)
from .generic import DeclaredFsspecStore, fsspec_store_binding
from .operations import (
    NO_HINTS,
    FileStatus,
    FsspecStore,
    LinkInPathError,
    RenameHint,
    StoreCapabilities,
    StoreOperations,
)
from .rate_limit import RateLimitedStore, TokenBucket
from .registry import ENTRY_POINT_GROUP, StoreBindings, register_store_binding, store_bindings
from .transient import is_transient_generic

__all__ = [
    "ENTRY_POINT_GROUP",
    "NO_HINTS",
    "DeclaredFsspecStore",
    "Fault",
    "FaultInjectingStore",
    "FileStatus",
    "FsspecStore",
    "LinkInPathError",
    "OpenedStore",
    "RateLimitedStore",
    "RenameHint",
    "StoreBinding",
    "StoreBindings",
    "StoreCapabilities",
    "StoreOperations",
    "TokenBucket",
    "azure_operation_timed_out",
    "azure_server_busy",
    "fsspec_store_binding",
    "gcs_http_error",
    "is_transient_azure",
    "is_transient_generic",
    "open_destination_store",
    "open_store",
    "register_store_binding",
    "s3_error",
    "s3_internal_error",
    "s3_slow_down",
    "store_bindings",
]
