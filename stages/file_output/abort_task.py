"""FileOutputAbortTask: delete a task attempt's directory in Hadoop FileOutputCommitter's layout (v1, v2)."""

from __future__ import annotations

from dataclasses import dataclass

from ...statistic_names import TASK_STAGE_ABORT_TASK
from .base import FileOutputStage


@dataclass(frozen=True, slots=True)
class FileOutputAbortTaskArguments:
    task_attempt_id: str


@dataclass(frozen=True, slots=True)
class FileOutputAbortTaskResult:
    deleted: bool


class FileOutputAbortTaskStage(FileOutputStage[FileOutputAbortTaskArguments, FileOutputAbortTaskResult]):
    """Delete ``_temporary/<appAttempt>/_temporary/<taskAttemptId>``.

    Postcondition: nothing of the attempt is left to commit. What a committed attempt already moved stays: in
    v1 its committed task directory (the job commit merges it), in v2 its files in the destination.
    """

    name = TASK_STAGE_ABORT_TASK

    def execute(self, arguments: FileOutputAbortTaskArguments) -> FileOutputAbortTaskResult:
        return FileOutputAbortTaskResult(self.delete_dir(self.layout.task_attempt_dir(arguments.task_attempt_id)))
