"""``ManifestCommitter``: the ``manifest`` protocol, Hadoop 3.5's manifest committer, on the shared seam.

Task commit scans the attempt's directory into a JSON manifest; job commit loads every manifest, checks them all,
then creates the destination's directories and renames every file in parallel, validates and writes a JSON
``_SUCCESS``. Files are compatible with Hadoop's own classes. Its stages are in ``stages/manifest/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...iostatistics import StatisticsStore
from ...stages.manifest.abort_job import AbortJobArguments, AbortJobResult, AbortJobStage
from ...stages.manifest.abort_task import AbortTaskArguments, AbortTaskStage
from ...stages.manifest.commit_job import CommitJobArguments, CommitJobResult, CommitJobStage
from ...stages.manifest.commit_task import CommitTaskArguments, CommitTaskStage
from ...stages.manifest.plan_abort import AbortPlan, PlanAbortArguments, PlanAbortStage
from ...stages.manifest.setup_job import SetupJobArguments, SetupJobStage
from ...stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from ...success_data import COMMITTER_NAME
from ..base import CommitterBase, TaskAttempt
from ..names import ProtocolName


class ManifestCommitter(CommitterBase[CommitJobResult, AbortJobResult]):
    """Commits the output of many task attempts into one destination, compatible with Hadoop 3.5's files.

    Any of the calls may run in another process or machine on a committer built with the same destination,
    job id and attempt: nothing but the store links them. Each job commit has its own thread pool of
    ``io.threads``. A committer holds a cloud client: ``close()`` it, or use it as a context manager
    (``with ManifestCommitter(...) as committer:``), when done.
    """

    protocol = ProtocolName.MANIFEST
    committer_name = COMMITTER_NAME
    setup_job_stage = SetupJobStage
    setup_task_stage = SetupTaskStage
    commit_task_stage = CommitTaskStage
    abort_task_stage = AbortTaskStage
    commit_job_stage = CommitJobStage
    abort_job_stage = AbortJobStage
    job_commit_makes_batches = True

    def task_work_path(self, attempt_id: str) -> str:
        return self.paths.task_attempt_dir(attempt_id)

    def job_is_live(self) -> bool:
        """The manifest directory exists from job setup until commit or abort."""
        status = self._store.info(self.paths.manifest_dir)
        return status is not None and status.is_dir

    def job_state_directories(self) -> list[str]:
        return [self.paths.task_attempts_dir, self.paths.job_attempt_dir, self.paths.job_dir]

    def _setup_job_arguments(self) -> SetupJobArguments:
        """Create the job attempt directory; set an older ``_SUCCESS`` aside if the marker is on."""
        return SetupJobArguments(self.config.mark_successful_jobs)

    def _setup_task_arguments(self, task: TaskAttempt) -> SetupTaskArguments:
        return SetupTaskArguments(task.task_id, task.attempt_id)

    def _commit_task_arguments(self, task: TaskAttempt, outputs: Mapping[str, str] | None) -> CommitTaskArguments:
        """Scan the attempt's files (or the declared ``outputs``) into a manifest and publish it; the files move
        only at job commit. A flat attempt directory with ``outputs`` makes both commits cheaper."""
        return CommitTaskArguments(task.task_id, task.attempt_id, outputs)

    def _abort_task_arguments(self, task: TaskAttempt) -> AbortTaskArguments:
        return AbortTaskArguments(task.attempt_id)

    def _commit_job_arguments(
        self, accepted_attempts: Mapping[str, str] | None, progress: Callable[[int, int], None] | None
    ) -> CommitJobArguments:
        return CommitJobArguments(accepted_attempts=accepted_attempts, progress=progress)

    def _abort_job_arguments(self) -> AbortJobArguments:
        """Revert what an interrupted ``commit_job`` moved and delete the job's state; the output of a committed
        job (its ``_SUCCESS`` in place) stays."""
        return AbortJobArguments()

    def plan_abort(self) -> AbortPlan:
        """What ``abort_job`` would revert and delete now, decided as it decides; changes nothing (a dry run)."""
        return PlanAbortStage(self._context(StatisticsStore())).apply(PlanAbortArguments())
