"""FileOutputSetupTask: create a task attempt's directory in Hadoop FileOutputCommitter's layout (v1, v2)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import JobStateError
from ...statistic_names import TASK_STAGE_SETUP
from .base import FileOutputStage


@dataclass(frozen=True, slots=True)
class FileOutputSetupTaskArguments:
    task_id: str
    task_attempt_id: str


@dataclass(frozen=True, slots=True)
class FileOutputSetupTaskResult:
    work_path: str


class FileOutputSetupTaskStage(FileOutputStage[FileOutputSetupTaskArguments, FileOutputSetupTaskResult]):
    """Create ``_temporary/<appAttempt>/_temporary/<taskAttemptId>``.

    Precondition: this job holds the layout; the attempt directory does not exist yet. Postcondition: it exists.
    """

    name = TASK_STAGE_SETUP

    def execute(self, arguments: FileOutputSetupTaskArguments) -> FileOutputSetupTaskResult:
        self.check_job_holds_the_layout(f"set up task attempt {arguments.task_attempt_id}")
        work_path = self.layout.task_attempt_dir(arguments.task_attempt_id)
        if self.info(work_path) is not None:
            raise JobStateError(
                f"{self.to_url(work_path)}: task attempt {arguments.task_attempt_id} was already set up"
            )
        self.mkdirs(work_path)
        return FileOutputSetupTaskResult(work_path)
