"""manifest-committer: Hadoop's manifest committer protocol in Python, on any fsspec filesystem with a store binding.

Each task attempt writes under its own directory; task commit saves a JSON manifest of its files; job commit
loads every manifest, checks them all, then creates directories and renames files in parallel, validates and
writes a JSON ``_SUCCESS`` summary. Files are compatible with Hadoop 3.5's ManifestCommitter.
"""

from __future__ import annotations

from .config import CommitterConfig, MarkerType
from .errors import (
    CommitterError,
    ConfigError,
    DuplicateDestinationError,
    JobStateError,
    ManifestError,
    MarkerError,
    MarkerServerError,
    OutputConflictError,
    OutputValidationError,
    SourceChangedError,
    UnsupportedStoreError,
    UploadOutcomeUnknownError,
    WorkerProcessError,
)
from .iostatistics import IOStatisticsSnapshot, MeanStatistic
from .manifest import DirEntry, EntryStatus, FileEntry, TaskManifest
from .operate.rollback import RolledBack, rollback
from .operate.transactional import PartlyFailedError
from .protocols.base import TaskAttempt
from .protocols.manifest.committer import ManifestCommitter
from .protocols.names import ProtocolName
from .protocols.registry import PROTOCOLS, Committer, create_committer
from .protocols.transactional.committer import TransactionalCommitter
from .protocols.transactional.readers import committed_files, vacuum
from .protocols.upload.committer import UploadCommitter
from .store.bindings import OpenedStore, StoreBinding
from .store.destination import DestinationTypeError
from .store.generic import fsspec_store_binding
from .store.operations import StoreCapabilities
from .store.registry import register_store_binding
from .success_data import SuccessData
from .writing.dataset_output import SchemaConflictError
from .writing.job import DestinationExistsError, TaskResultError

__version__ = "0.1.0"

__all__ = [
    "PROTOCOLS",
    "Committer",
    "CommitterConfig",
    "CommitterError",
    "ConfigError",
    "DestinationExistsError",
    "DestinationTypeError",
    "DirEntry",
    "DuplicateDestinationError",
    "EntryStatus",
    "FileEntry",
    "IOStatisticsSnapshot",
    "JobStateError",
    "ManifestCommitter",
    "ManifestError",
    "MarkerError",
    "MarkerServerError",
    "MarkerType",
    "MeanStatistic",
    "OpenedStore",
    "OutputConflictError",
    "OutputValidationError",
    "PartlyFailedError",
    "ProtocolName",
    "RolledBack",
    "SchemaConflictError",
    "SourceChangedError",
    "StoreBinding",
    "StoreCapabilities",
    "SuccessData",
    "TaskAttempt",
    "TaskManifest",
    "TaskResultError",
    "TransactionalCommitter",
    "UnsupportedStoreError",
    "UploadCommitter",
    "UploadOutcomeUnknownError",
    "WorkerProcessError",
    "__version__",
    "committed_files",
    "create_committer",
    "fsspec_store_binding",
    "register_store_binding",
    "rollback",
    "vacuum",
]
