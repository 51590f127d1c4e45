"""Store operations: the one interface through which stages touch a filesystem."""

from __future__ import annotations

from .azure import is_transient_azure
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
from .operations import FileStatus, FsspecStore, LinkInPathError, StoreCapabilities, StoreOperations
from .rate_limit import RateLimitedStore, TokenBucket
from .transient import is_transient_generic

__all__ = [
    "Fault",
    "FaultInjectingStore",
    "FileStatus",
    "FsspecStore",
    "LinkInPathError",
    "RateLimitedStore",
    "StoreCapabilities",
    "StoreOperations",
    "TokenBucket",
    "azure_operation_timed_out",
    "azure_server_busy",
    "gcs_http_error",
    "is_transient_azure",
    "is_transient_generic",
    "open_destination_store",
    "open_store",
    "s3_error",
    "s3_internal_error",
    "s3_slow_down",
]
