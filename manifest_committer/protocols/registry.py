"""The commit protocols behind one interface: ``Committer`` and ``create_committer``.

A protocol is a small set of stages driven by a subclass of ``CommitterBase`` (``protocols/base.py``), which shares
the store layer, retries, statistics and the ``_SUCCESS``/summary reports. The next protocol is a copy of the
smallest existing one (``protocols/file_output/committer.py``), not of the largest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..config import CommitterConfig
from ..errors import CommitterError, UnsupportedStoreError
from ..manifest import TaskManifest
from ..store import StoreOperations
from ..store.factory import S3_PROTOCOLS, _protocol_of
from ..success_data import SuccessData
from .base import CommitterBase, ManifestCommitter, TaskAttempt
from .file_output.committer import FileOutputCommitterV1, FileOutputCommitterV2
from .transactional.committer import TransactionalCommitter
from .upload.committer import UploadCommitter

log = logging.getLogger(__name__)

PROTOCOLS = ("manifest", "transactional", "upload", "v1", "v2")
"""Every protocol name of the contract; ``auto`` picks one of them by store."""

_BUILT: dict[str, type[CommitterBase]] = {
    "manifest": ManifestCommitter,
    "v1": FileOutputCommitterV1,
    "v2": FileOutputCommitterV2,
    "transactional": TransactionalCommitter,
    "upload": UploadCommitter,
}


class Committer(Protocol):
    """What every protocol's committer offers (CONTRACT section 1): the calls of a job and its tasks.

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

    def commit_job(self, accepted_attempts: Mapping[str, str] | None = None) -> SuccessData: ...

    def abort_job(self) -> object: ...

    def close(self) -> None: ...


def hosts_marker_server(protocol: str) -> bool:
    """Whether ``setup_job`` of ``protocol`` starts a marker server (with batched markers): see
    ``CommitterBase.job_hosts_marker_server``."""
    committer_class = _BUILT.get(protocol)
    return committer_class is not None and committer_class.job_hosts_marker_server


def resolve_protocol(destination: str, protocol: str = "auto") -> str:
    """The protocol ``create_committer`` would use: ``auto`` is ``upload`` on S3 and ``manifest`` elsewhere.

    ``CommitterError`` naming the protocol for a name that is not one of ``PROTOCOLS`` (or ``auto``).
    """
    if protocol == "auto":
        return "upload" if _protocol_of(destination) in S3_PROTOCOLS else "manifest"
    if protocol not in PROTOCOLS:
        raise CommitterError(
            f"unknown commit protocol {protocol!r} for {destination}: use one of auto, {', '.join(PROTOCOLS)}"
        )
    return protocol


def create_committer(  # noqa: PLR0917 (the signature of CONTRACT section 6, ManifestCommitter's plus protocol)
    destination: str,
    job_id: str,
    protocol: str = "auto",
    job_attempt: int = 0,
    config: CommitterConfig | None = None,
    storage_options: dict[str, Any] | None = None,
    *,
    job_id_source: str = "JobID",
    store_wrapper: Callable[[StoreOperations], StoreOperations] | None = None,
) -> CommitterBase:
    """A committer of ``protocol`` for ``destination``, with the calls of ``Committer`` whatever the protocol.

    ``CommitterError`` names the protocol (and the store) when it is unknown, not built yet, or cannot commit
    safely to the store (the rename-based protocols on S3, whose "rename" is copy then delete).
    """
    name = resolve_protocol(destination, protocol)
    committer_class = _BUILT.get(name)
    if committer_class is None:
        chosen = f"{name!r} (chosen by auto)" if protocol == "auto" else repr(name)
        raise CommitterError(
            f"{destination}: the commit protocol {chosen} is not available yet; available: {', '.join(sorted(_BUILT))}"
        )
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
        raise UnsupportedStoreError(f"commit protocol {name!r} cannot commit to this store: {error}") from error
