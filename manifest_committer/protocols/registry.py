"""The commit protocols behind one interface: ``Committer``, the registry of protocols and ``create_committer``.

A protocol is a small set of stages declared by a subclass of ``CommitterBase`` (``protocols/base.py``), which
shares the store layer, retries, statistics and the ``_SUCCESS``/summary reports. The next protocol is a copy of
the smallest existing package (``protocols/file_output/``) added to ``COMMITTERS`` below.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..config import CommitterConfig
from ..errors import CommitterError, UnsupportedStoreError
from ..manifest import TaskManifest
from ..stages.reads import StateReads
from ..store import StoreOperations
from ..store.registry import store_bindings
from ..success_data import SuccessData
from .base import CommitterBase, TaskAttempt
from .file_output import operations as file_output_operations
from .file_output.committer import FileOutputCommitterV1, FileOutputCommitterV2
from .job_state import JobOperations
from .manifest import operations as manifest_operations
from .manifest.committer import ManifestCommitter
from .names import AUTO, ProtocolName
from .transactional import operations as transactional_operations
from .transactional.committer import TransactionalCommitter
from .upload import operations as upload_operations
from .upload.committer import UploadCommitter

log = logging.getLogger(__name__)

COMMITTERS: Mapping[ProtocolName, type[CommitterBase[Any, Any]]] = types.MappingProxyType(
    {
        committer.protocol: committer
        for committer in (
            ManifestCommitter,
            TransactionalCommitter,
            UploadCommitter,
            FileOutputCommitterV1,
            FileOutputCommitterV2,
        )
    }
)
"""The committer class of each protocol (read only)."""

PROTOCOLS: tuple[ProtocolName, ...] = tuple(ProtocolName)
"""Every protocol name of the contract; ``auto`` picks one of them by store."""

OPERATIONS: tuple[JobOperations, ...] = (
    upload_operations.OPERATIONS,
    transactional_operations.OPERATIONS,
    file_output_operations.OPERATIONS,
    manifest_operations.OPERATIONS,
)
"""What the tools (status, commit, abort) need of each protocol, in the order a job attempt's state is recognised:
the signs of the other protocols first, the default protocol (``manifest``) last."""


def operations_of(protocol: ProtocolName) -> JobOperations:
    """The ``JobOperations`` serving ``protocol``."""
    return next(operations for operations in OPERATIONS if protocol in operations.protocols)


def recognise(reads: StateReads) -> ProtocolName:
    """The protocol of the job attempt at ``reads.paths`` (``_temporary/<jobId>/<NN>``), from its own state."""
    for operations in OPERATIONS:
        protocol = operations.recognises(reads)
        if protocol is not None:
            return protocol
    return ProtocolName.MANIFEST


class Committer(Protocol):
    """What every protocol's committer offers (docs/protocols.md): the calls of a job and its tasks.

    A fresh committer built with the same arguments, in any process, can run any of them.
    """

    @property
    def protocol(self) -> str: ...

    @property
    def job_id(self) -> str: ...

    @property
    def destination_url(self) -> str: ...

    def setup_job(self) -> None: ...

    def setup_task(self, task_id: str, attempt_id: str) -> TaskAttempt: ...

    def task_attempt(self, task_id: str, attempt_id: str) -> TaskAttempt: ...

    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest: ...

    def abort_task(self, task: TaskAttempt) -> None: ...

    def commit_job(
        self,
        accepted_attempts: Mapping[str, str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> SuccessData: ...

    def abort_job(self) -> object: ...

    def close(self) -> None: ...


def hosts_marker_server(protocol: str) -> bool:
    """Whether ``setup_job`` of ``protocol`` starts a marker server (with batched markers): see
    ``CommitterBase.job_hosts_marker_server``."""
    committer_class = COMMITTERS.get(ProtocolName(protocol)) if protocol in PROTOCOLS else None
    return committer_class is not None and committer_class.job_hosts_marker_server


def resolve_protocol(destination: str, protocol: str = AUTO) -> ProtocolName:
    """The protocol ``create_committer`` would use: ``auto`` is ``upload`` on a store that offers pending uploads
    and no safe rename (S3), and ``manifest`` elsewhere (which refuses, naming what is missing, a store it cannot
    serve).

    ``CommitterError`` naming the protocol for a name that is not one of ``PROTOCOLS`` (or ``auto``).
    """
    if protocol == AUTO:
        binding = store_bindings().find(destination)
        uploads_only = (
            binding is not None
            and binding.capabilities is not None
            and binding.capabilities.pending_uploads
            and not binding.renames_safely
        )
        return ProtocolName.UPLOAD if uploads_only else ProtocolName.MANIFEST
    if protocol not in PROTOCOLS:
        raise CommitterError(
            f"unknown commit protocol {protocol!r} for {destination}: use one of {AUTO}, {', '.join(PROTOCOLS)}"
        )
    return ProtocolName(protocol)


def create_committer(  # noqa: PLR0917 (ManifestCommitter's signature plus the protocol)
    destination: str,
    job_id: str,
    protocol: str = AUTO,
    job_attempt: int = 0,
    config: CommitterConfig | None = None,
    storage_options: dict[str, Any] | None = None,
    *,
    job_id_source: str = "JobID",
    store_wrapper: Callable[[StoreOperations], StoreOperations] | None = None,
) -> CommitterBase[Any, Any]:
    """A committer of ``protocol`` for ``destination``, with the calls of ``Committer`` whatever the protocol.

    ``CommitterError`` names the protocol (and the store) when it is unknown, or cannot commit safely to the
    store (the rename-based protocols on S3, whose "rename" is copy then delete). A destination that may not be
    one (``store/destination.py``), or of a scheme without a binding, is refused first, as the store refuses it.
    """
    store_bindings().binding_for(destination)
    name = resolve_protocol(destination, protocol)
    committer_class = COMMITTERS[name]
    try:
        return committer_class(
            destination,
            job_id,
            job_attempt,
            config,
            storage_options,
            job_id_source=job_id_source,
            store_wrapper=store_wrapper,
        )
    except UnsupportedStoreError as error:
        raise UnsupportedStoreError(f"commit protocol {name.value!r} cannot commit to this store: {error}") from error
