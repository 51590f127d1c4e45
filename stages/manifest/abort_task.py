"""AbortTask: delete a task attempt's working directory."""

from __future__ import annotations

from dataclasses import dataclass

from ...statistic_names import TASK_STAGE_ABORT_TASK
from ..base import Stage


@dataclass(frozen=True, slots=True)
class AbortTaskArguments:
    task_attempt_id: str


@dataclass(frozen=True, slots=True)
class AbortTaskResult:
    deleted: bool
    """False when there was nothing to delete (the attempt never wrote or was aborted before)."""


class AbortTaskStage(Stage[AbortTaskArguments, AbortTaskResult]):
    """Recursively delete ``tasks/$taskAttemptId``. Postcondition: nothing of the attempt is left to commit.

    An attempt's manifest, if it already committed, stays: aborting a committed task does not un-commit it.
    """

    name = TASK_STAGE_ABORT_TASK

    def execute(self, arguments: AbortTaskArguments) -> AbortTaskResult:
        return AbortTaskResult(self.delete_dir(self.paths.task_attempt_dir(arguments.task_attempt_id)))
