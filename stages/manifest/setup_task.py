"""SetupTask: create a task attempt's private working directory."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import JobStateError
from ...statistic_names import TASK_STAGE_SETUP
from ..base import Stage


@dataclass(frozen=True, slots=True)
class SetupTaskArguments:
    task_id: str
    task_attempt_id: str


@dataclass(frozen=True, slots=True)
class SetupTaskResult:
    work_path: str


class SetupTaskStage(Stage[SetupTaskArguments, SetupTaskResult]):
    """Create ``tasks/$taskAttemptId``.

    Precondition: the job was set up (its manifest directory exists), which Hadoop's javadoc promises and its
    code does not check; the attempt directory does not exist yet. Postcondition: it exists and is empty.
    """

    name = TASK_STAGE_SETUP

    def execute(self, arguments: SetupTaskArguments) -> SetupTaskResult:
        manifest_dir = self.info(self.paths.manifest_dir)
        if manifest_dir is None or not manifest_dir.is_dir:
            raise JobStateError(
                f"{self.to_url(self.paths.manifest_dir)}: job {self.paths.job_id} is not set up "
                f"(or was cleaned up), so task attempt {arguments.task_attempt_id} cannot start"
            )
        work_path = self.paths.task_attempt_dir(arguments.task_attempt_id)
        if self.info(work_path) is not None:
            raise JobStateError(
                f"{self.to_url(work_path)}: task attempt {arguments.task_attempt_id} was already set up"
            )
        self.mkdirs(work_path)
        return SetupTaskResult(work_path)
