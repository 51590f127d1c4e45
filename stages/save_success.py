"""SaveSuccess: write the ``_SUCCESS`` summary by temp file and rename, the job's visible commit point."""

from __future__ import annotations

from dataclasses import dataclass

from ..statistic_names import JOB_STAGE_SAVE_SUCCESS_MARKER, TASK_STAGE_SAVE_SUMMARY_FILE
from ..success_data import SuccessData
from .base import Stage


@dataclass(frozen=True, slots=True)
class SaveSuccessArguments:
    success: SuccessData


@dataclass(frozen=True, slots=True)
class SaveSuccessResult:
    path: str


class SaveSuccessStage(Stage[SaveSuccessArguments, SaveSuccessResult]):
    """Save to ``<job attempt dir>/_SUCCESS.tmp``, then rename over ``$dest/_SUCCESS`` (retried).

    Precondition: every file is committed (and validated, if asked). Postcondition: ``_SUCCESS`` is this
    job's complete summary; readers never see a half-written one.
    """

    name = JOB_STAGE_SAVE_SUCCESS_MARKER

    def execute(self, arguments: SaveSuccessArguments) -> SaveSuccessResult:
        self.save_file_atomically(
            arguments.success.to_json,
            self.paths.temp_success_path,
            self.paths.success_path,
            TASK_STAGE_SAVE_SUMMARY_FILE,
        )
        return SaveSuccessResult(self.paths.success_path)
