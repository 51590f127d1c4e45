"""The ``transactional`` protocol: tasks write straight into the destination; job commit writes one small file.

The Databricks-style transactional commit (CONTRACT §6, ``protocols/transactional/records.py`` for the files): each task's files
land in the destination under names carrying the job's tid and the attempt's tag, each after its write marker
is durable (``protocols/transactional/task_fs.py``); task commit saves a manifest naming them; job commit deletes the files of
attempts it does not commit (found through the markers), then writes ``_committed_<tid>`` listing the committed
ones, the commit point. Readers that honour the records (``mc.committed_files``) never see uncommitted or
removed files; ``mc.vacuum`` deletes them later and ``mc.rollback`` / ``abort_job`` undo a dead job from its
markers alone.

The driver's side of the markers runs in the committer that called ``setup_job``: with ``batched`` markers a
marker server (``markers/server.py``) taking every task's markers over HTTP, with ``direct`` markers a heartbeat
that says the driver is alive. Both stop at ``commit_job``, ``abort_job`` or ``close()``; a driver that dies
leaves a job that ``mc.rollback`` recognises as dead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from ...iostatistics import StatisticsStore
from ...manifest import TaskManifest
from ...paths import check_id
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
from ...statistic_names import JOB_STAGE_ABORT
from ...success_data import SuccessData
from ..base import TaskAttempt
from ..marker_protocol import MarkerProtocolCommitter
from .readers import committed_files
from .records import transaction_id
from .task_fs import DirectWriteFileSystem, final_name_function

log = logging.getLogger(__name__)


class TransactionalCommitter(MarkerProtocolCommitter[str]):
    """The ``transactional`` protocol on the shared seam; see the module. Its register maps each file the
    attempt opened (task-side relative path) to its destination-relative path."""

    protocol = "transactional"
    committer_name = "transactional"

    def _init_protocol(self) -> None:
        super()._init_protocol()
        self.tid = transaction_id(self.paths.job_id)

    def job_is_live(self) -> bool:
        status = self._store.info(self.paths.manifest_dir)
        return status is not None and status.is_dir

    def job_state_directories(self) -> list[str]:
        return [self.paths.task_attempts_dir, self.paths.job_attempt_dir, self.paths.job_dir]

    # --- job ------------------------------------------------------------------------------------------------------

    def setup_job(self) -> None:
        """Write ``_started_<tid>`` and the job's state, then start the driver's side of the markers."""
        context = self._context(self._job_stats)
        TransactionalSetupJobStage(context).apply(TransactionalSetupJobArguments())
        self._markers.start()

    def commit_job(self, accepted_attempts: Mapping[str, str] | None = None) -> SuccessData:
        """Delete the files of attempts not committed, write ``_committed_<tid>`` (the commit point), then
        ``_SUCCESS``; returns the summary. Repeatable after a kill at any point."""
        return self._commit(TransactionalCommitJobArguments(self.committer_name, accepted_attempts)).success

    def commit_job_replacing(
        self, replaced: Sequence[str], accepted_attempts: Mapping[str, str] | None = None
    ) -> tuple[SuccessData, int]:
        """Commit with ``replaced`` listed as ``removed`` in ``_committed_<tid>``: readers stop seeing them at the
        commit point, and ``vacuum`` deletes them once older than its retention. Nothing is deleted now."""
        committed = set()
        if replaced:
            # Only what readers see now: not the records, nor uncommitted or already removed files.
            urls = committed_files(self.destination_url, self.storage_options)
            committed = {self._store.from_url(url) for url in urls}
        removed = tuple(path for path in replaced if path in committed)
        result = self._commit(TransactionalCommitJobArguments(self.committer_name, accepted_attempts, removed))
        return result.success, result.removed

    def _commit(self, arguments: TransactionalCommitJobArguments) -> TransactionalCommitJobResult:
        start = time.perf_counter()
        self._markers.stop()
        result, context = self._run_job_call(
            lambda context: TransactionalCommitJobStage(context).apply(arguments), overwrite_report=True
        )
        if not result.already_committed:
            report = SuccessData.from_json(result.success.to_json())
            report.iostatistics = context.stats.snapshot()
            self._save_report(report, overwrite=True)
        log.info(
            "Job %s (transactional, tid %s) committed %d files of %d tasks into %s in %.3f s; %d files of other "
            "attempts deleted",
            self.job_id,
            self.tid,
            result.files_committed,
            result.tasks_committed,
            self.destination_url,
            time.perf_counter() - start,
            result.stragglers_deleted,
        )
        return result

    def abort_job(self) -> TransactionalAbortJobResult:
        """Delete every data file the job's markers name (unless ``_committed_<tid>`` is in place), then the job's
        state. The caller says the job is dead; a second call does nothing and succeeds."""
        self._markers.stop()
        result, context = self._run_job_call(
            lambda context: TransactionalAbortJobStage(context).apply(TransactionalAbortJobArguments()),
            overwrite_report=False,
        )
        self._save_abort_report(context, JOB_STAGE_ABORT)
        return result

    def plan_abort(self) -> TransactionalAbortJobResult:
        """What ``abort_job`` would delete now; changes nothing (a dry run)."""
        return TransactionalAbortJobStage(self._context(StatisticsStore())).apply(
            TransactionalAbortJobArguments(dry_run=True)
        )

    # --- tasks ----------------------------------------------------------------------------------------------------

    def task_attempt(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """The attempt's ``TaskAttempt``: ``fs`` writes straight into the destination (``direct_write_fs``)."""
        check_id("task id", task_id)
        check_id("task attempt id", attempt_id)
        work_path = self.task_work_path(attempt_id)
        files = self._register(attempt_id)
        client = self._markers.client(attempt_id)
        fs = DirectWriteFileSystem(
            self._store.data_fs,
            work_path=work_path,
            destination=self.paths.dest,
            final_name=final_name_function(self.tid, attempt_id),
            record_marker=client.create,
            files=files,
            make_parents=self._store.capabilities.real_directories,
        )
        return TaskAttempt(task_id, attempt_id, work_path, fs, self._store.to_url(work_path))

    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest:
        """Save a manifest naming the attempt's files, which are in the destination already.

        ``outputs`` selects files (paths relative to ``work_path``, each mapped to itself: nothing is renamed).
        An attempt that wrote through another committer object (another process) is found through its markers.
        """
        written = self._registered(task.attempt_id)
        if written is None and outputs is not None and not outputs:
            written = []  # declared empty: nothing to look for
        try:
            result = TransactionalCommitTaskStage(self._task_context(task.attempt_id)).apply(
                TransactionalCommitTaskArguments(task.task_id, task.attempt_id, written, outputs)
            )
        except BaseException:
            log.error("Commit of task attempt %s of job %s (transactional) failed", task.attempt_id, self.job_id)
            raise
        return result.manifest

    def abort_task(self, task: TaskAttempt) -> None:
        """Delete the attempt's files from the destination (its markers stay, for the job commit to check)."""
        TransactionalAbortTaskStage(self._task_context(task.attempt_id)).apply(
            TransactionalAbortTaskArguments(task.attempt_id, self._registered(task.attempt_id))
        )
        self._forget(task.attempt_id)
