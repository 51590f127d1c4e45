"""The ``transactional`` protocol: tasks write straight into the destination; job commit writes one small file.

The Databricks-style transactional commit (docs/protocols.md; ``records.py`` for the files): each
task's files land in the destination under names carrying the job's tid and the attempt's tag, each after its write
marker is durable (``protocols/direct_write_fs.py``); task commit saves a manifest naming them; job commit deletes
the files of attempts it does not commit (found through the markers), then writes ``_committed_<tid>`` listing the
committed ones, the commit point. Readers that honour the records (``mc.committed_files``) never see uncommitted or
removed files; ``mc.vacuum`` deletes them later and ``mc.rollback`` / ``abort_job`` undo a dead job from its markers
alone.

The driver's side of the markers runs in the committer that called ``setup_job``: with ``batched`` markers a
marker server (``markers/server.py``) taking every task's markers over HTTP, with ``direct`` markers a heartbeat
that says the driver is alive. Both stop at ``commit_job``, ``abort_job`` or ``close()``; a driver that dies
leaves a job that ``mc.rollback`` recognises as dead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...stages.transactional.abort_job import (
    TransactionalAbortJobArguments,
    TransactionalAbortJobResult,
    TransactionalAbortJobStage,
)
from ...stages.transactional.abort_task import TransactionalAbortTaskArguments, TransactionalAbortTaskStage
from ...stages.transactional.commit_job import (
    TransactionalCommitJobArguments,
    TransactionalCommitJobResult,
    TransactionalCommitJobStage,
)
from ...stages.transactional.commit_task import TransactionalCommitTaskArguments, TransactionalCommitTaskStage
from ...stages.transactional.setup_job import TransactionalSetupJobArguments, TransactionalSetupJobStage
from ..base import ReplacingCommit, TaskAttempt
from ..direct_write_fs import DirectWriteFileSystem
from ..marker_protocol import MarkerProtocolCommitter
from ..names import ProtocolName
from .readers import committed_files
from .records import final_name_function, transaction_id


class TransactionalCommitter(MarkerProtocolCommitter[str, TransactionalCommitJobResult, TransactionalAbortJobResult]):
    """The ``transactional`` protocol on the shared seam; see the module. Its register maps each file the
    attempt opened (task-side relative path) to its destination-relative path."""

    protocol = ProtocolName.TRANSACTIONAL
    committer_name = "transactional"
    setup_job_stage = TransactionalSetupJobStage
    commit_task_stage = TransactionalCommitTaskStage
    abort_task_stage = TransactionalAbortTaskStage
    commit_job_stage = TransactionalCommitJobStage
    abort_job_stage = TransactionalAbortJobStage

    def _init_protocol(self) -> None:
        super()._init_protocol()
        self.tid = transaction_id(self.paths.job_id)

    def job_is_live(self) -> bool:
        status = self._store.info(self.paths.manifest_dir)
        return status is not None and status.is_dir

    def job_state_directories(self) -> list[str]:
        return [self.paths.task_attempts_dir, self.paths.job_attempt_dir, self.paths.job_dir]

    # --- job ------------------------------------------------------------------------------------------------------

    def _setup_job_arguments(self) -> TransactionalSetupJobArguments:
        """Write ``_started_<tid>`` and the job's state; the driver's side of the markers starts after it."""
        return TransactionalSetupJobArguments()

    def _commit_job_arguments(
        self, accepted_attempts: Mapping[str, str] | None, progress: Callable[[int, int], None] | None
    ) -> TransactionalCommitJobArguments:
        """Delete the files of attempts not committed, write ``_committed_<tid>`` (the commit point), then
        ``_SUCCESS``. Repeatable after a kill at any point. Nothing moves, so ``progress`` is not called."""
        return TransactionalCommitJobArguments(
            self.committer_name, accepted_attempts, outcome_recorded=self._outcome_recorded
        )

    def commit_job_replacing(
        self, replaced: Sequence[str], accepted_attempts: Mapping[str, str] | None = None
    ) -> ReplacingCommit:
        """Commit with ``replaced`` listed as ``removed`` in ``_committed_<tid>``: readers stop seeing them at the
        commit point, and ``vacuum`` deletes them once older than its retention. Nothing is deleted now."""
        committed = set()
        if replaced:
            # Only what readers see now: not the records, nor uncommitted or already removed files.
            urls = committed_files(self.destination_url, self.storage_options)
            committed = {self._store.from_url(url) for url in urls}
        removed = tuple(path for path in replaced if path in committed)
        result = self._commit(
            TransactionalCommitJobArguments(
                self.committer_name, accepted_attempts, removed, outcome_recorded=self._outcome_recorded
            )
        )
        return ReplacingCommit(result.success, result.removed)

    def _abort_job_arguments(self, *, dry_run: bool = False) -> TransactionalAbortJobArguments:
        """Delete every data file the job's markers name (unless ``_committed_<tid>`` is in place), then the job's
        state. The caller says the job is dead; a second call does nothing and succeeds."""
        return TransactionalAbortJobArguments(dry_run=dry_run)

    # --- tasks ----------------------------------------------------------------------------------------------------

    def _task_fs(self, attempt_id: str, work_path: str) -> Any:
        """``fs`` writes straight into the destination (``direct_write_fs``), each file behind its marker."""
        return DirectWriteFileSystem(
            self._store.data_fs,
            work_path=work_path,
            destination=self.paths.dest,
            final_name=final_name_function(self.tid, attempt_id),
            record_marker=self._markers.client(attempt_id).create,
            files=self._register(attempt_id),
            make_parents=self._store.capabilities.real_directories,
            separator_aliases=self._store.capabilities.separator_aliases,
            kept_name=self._store.capabilities.kept_name,
        )

    def _commit_task_arguments(
        self, task: TaskAttempt, outputs: Mapping[str, str] | None
    ) -> TransactionalCommitTaskArguments:
        """Save a manifest naming the attempt's files, which are in the destination already.

        ``outputs`` selects files (paths relative to ``work_path``, each mapped to itself: nothing is renamed).
        An attempt that wrote through another committer object (another process) is found through its markers.
        """
        written = self._registered(task.attempt_id)
        if written is None and outputs is not None and not outputs:
            written = []  # declared empty: nothing to look for
        return TransactionalCommitTaskArguments(task.task_id, task.attempt_id, written, outputs)

    def _abort_task_arguments(self, task: TaskAttempt) -> TransactionalAbortTaskArguments:
        """Delete the attempt's files from the destination (its markers stay, for the job commit to check)."""
        return TransactionalAbortTaskArguments(task.attempt_id, self._registered(task.attempt_id))

    def _task_aborted(self, task: TaskAttempt) -> None:
        self._forget(task.attempt_id)
