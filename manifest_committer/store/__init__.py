"""Store operations: the one interface through which stages touch a filesystem."""

from __future__ import annotations

from .factory import open_store
from .faults import Fault, FaultInjectingStore
from .operations import FileStatus, StoreCapabilities, StoreOperations

__all__ = ["Fault", "FaultInjectingStore", "FileStatus", "StoreCapabilities", "StoreOperations", "open_store"]
