"""The ``v1`` and ``v2`` protocols: Hadoop FileOutputCommitter's two algorithms, as baselines.

Both keep Hadoop's layout (``$dest/_temporary/<appAttempt>/_temporary/<taskAttemptId>/`` for a task's work)
and run on the same seam as the manifest protocol (``CommitterBase``: store, retries, statistics, reports).
What differs from Hadoop, and why:

- every rename is the store's no-overwrite ``rename_file``: a file already at a target is an
  ``OutputConflictError`` naming it (Hadoop overwrites), unless ``delete.target.files``;
- directories are never renamed whole (the store layer has no directory rename; on object stores Hadoop's
  is file by file too), so a v1 job commit interrupted part-way can be rerun and moves what is left;
- ``_SUCCESS`` is this project's JSON summary (Hadoop's FileOutputCommitter writes an empty file), with
  ``committer`` naming the protocol, totals from the task reports under ``_tasks/``;
- Hadoop lets every job into a destination share ``_temporary/<appAttempt>`` (and deletes all of
  ``_temporary`` at cleanup). Here the first job holds it (``_JOB``) and a second job's setup is refused until
  the first commits or aborts; cleanup deletes only that app attempt's directory. ``appAttempt`` is the job
  attempt (Spark's is always 0); a later attempt does not recover an earlier one's committed tasks.

- the job commit records what it publishes before it first changes the destination
  (``stages/file_output/journal.py``), so a rerun after a crash finishes exactly that, and ``abort_job`` before
  the commit point (``_SUCCESS``, or ``_COMMIT_FINISHED.json`` with ``marksuccessfuljobs=false``) removes exactly
  the files an interrupted v1 job commit had moved and puts back the ``_SUCCESS`` it replaced: v1 keeps every
  promise of docs/safety.md.

Kept from Hadoop on purpose: v2 task commit moves files straight into the destination, so committed tasks'
files are visible before job commit and ``abort_job`` does not remove them (docs/safety.md, "Where a protocol promises
less").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar, Literal

from ...stages.file_output.abort_job import (
    FileOutputAbortJobArguments,
    FileOutputAbortJobResult,
    FileOutputAbortJobStage,
)
from ...stages.file_output.abort_task import FileOutputAbortTaskArguments, FileOutputAbortTaskStage
from ...stages.file_output.commit_job import (
    FileOutputCommitJobArguments,
    FileOutputCommitJobResult,
    FileOutputCommitJobStage,
)
from ...stages.file_output.commit_task import FileOutputCommitTaskArguments, FileOutputCommitTaskStage
from ...stages.file_output.setup_job import FileOutputSetupJobArguments, FileOutputSetupJobStage
from ...stages.file_output.setup_task import FileOutputSetupTaskArguments, FileOutputSetupTaskStage
from ..base import CommitterBase, TaskAttempt
from ..names import ProtocolName
from .layout import FileOutputPaths, LayoutHolder


class FileOutputCommitter(CommitterBase[FileOutputCommitJobResult, FileOutputAbortJobResult]):
    """Hadoop FileOutputCommitter's algorithm ``algorithm`` (1 or 2) on the shared seam; see the module."""

    algorithm: ClassVar[Literal[1, 2]]
    setup_job_stage = FileOutputSetupJobStage
    setup_task_stage = FileOutputSetupTaskStage
    commit_task_stage = FileOutputCommitTaskStage
    abort_task_stage = FileOutputAbortTaskStage
    commit_job_stage = FileOutputCommitJobStage
    abort_job_stage = FileOutputAbortJobStage

    @property
    def layout(self) -> FileOutputPaths:
        return FileOutputPaths(self.paths.dest, self.paths.job_attempt)

    def task_work_path(self, attempt_id: str) -> str:
        return self.layout.task_attempt_dir(attempt_id)

    def job_is_live(self) -> bool:
        """``_JOB`` names this job from setup until the end of commit or abort."""
        try:
            holder = LayoutHolder.from_bytes(self._store.read_bytes(self.layout.owner_path))
        except FileNotFoundError:
            return False
        return holder.job_id == self.job_id

    def job_state_directories(self) -> list[str]:
        layout = self.layout
        return [layout.task_attempts_dir, layout.job_attempt_dir, layout.pending_dir]

    def _setup_job_arguments(self) -> FileOutputSetupJobArguments:
        """Claim ``_temporary/<appAttempt>`` for this job; set an older ``_SUCCESS`` aside if the marker is on."""
        return FileOutputSetupJobArguments(self.config.mark_successful_jobs, self.protocol)

    def _setup_task_arguments(self, task: TaskAttempt) -> FileOutputSetupTaskArguments:
        return FileOutputSetupTaskArguments(task.task_id, task.attempt_id)

    def _commit_task_arguments(
        self, task: TaskAttempt, outputs: Mapping[str, str] | None
    ) -> FileOutputCommitTaskArguments:
        """Move the attempt's files (v1: to the committed task directory; v2: into the destination); the
        manifest returned names their final destinations. With ``outputs`` only the declared files move."""
        return FileOutputCommitTaskArguments(task.task_id, task.attempt_id, self.algorithm, outputs)

    def _abort_task_arguments(self, task: TaskAttempt) -> FileOutputAbortTaskArguments:
        """Delete the attempt's working directory; what a committed attempt moved stays."""
        return FileOutputAbortTaskArguments(task.attempt_id)

    def _commit_job_arguments(
        self, accepted_attempts: Mapping[str, str] | None, progress: Callable[[int, int], None] | None
    ) -> FileOutputCommitJobArguments:
        """v1: merge every committed task into the destination; v2: nothing left to move. Write ``_SUCCESS``."""
        return FileOutputCommitJobArguments(self.algorithm, self.committer_name, accepted_attempts)

    def _abort_job_arguments(self) -> FileOutputAbortJobArguments:
        """Undo an interrupted job commit (unless it passed its commit point) and delete the job's temporary
        state; v2's committed tasks' files stay (see the module)."""
        return FileOutputAbortJobArguments()


class FileOutputCommitterV1(FileOutputCommitter):
    """The ``v1`` protocol: task commit moves the attempt to ``_temporary/<appAttempt>/<taskId>``, job commit
    merges every committed task into the destination. Nothing is visible before job commit."""

    protocol = ProtocolName.V1
    committer_name = "v1"
    algorithm = 1


class FileOutputCommitterV2(FileOutputCommitter):
    """The ``v2`` protocol: task commit merges straight into the destination; job commit writes ``_SUCCESS``.

    Committed tasks' files are visible before job commit, and ``abort_job`` leaves them: Hadoop's v2 flaw, kept.
    """

    protocol = ProtocolName.V2
    committer_name = "v2"
    algorithm = 2
    task_commit_publishes = True
