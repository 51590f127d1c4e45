"""FileOutputAbortJob: Hadoop FileOutputCommitter's job abort (v1, v2): delete the job's temporary state."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..statistic_names import JOB_STAGE_ABORT
from .file_output_base import FileOutputStage
from .file_output_cleanup import FileOutputCleanupArguments, FileOutputCleanupResult, FileOutputCleanupStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileOutputAbortJobArguments:
    pass


@dataclass(frozen=True, slots=True)
class FileOutputAbortJobResult:
    cleanup: FileOutputCleanupResult


class FileOutputAbortJobStage(FileOutputStage[FileOutputAbortJobArguments, FileOutputAbortJobResult]):
    """Delete ``_temporary/<appAttempt>`` if this job holds it; nothing in the destination is reverted.

    As in Hadoop, abort only deletes temporary state. Before job commit that is all v1 ever wrote; v2's
    committed tasks' files are already in the destination and stay there (its known flaw); after an interrupted
    v1 job commit, the files it moved stay too. Cleanup errors are logged, not raised. Repeatable.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: FileOutputAbortJobArguments) -> FileOutputAbortJobResult:
        holder = self.job_holding_the_layout()
        if holder is not None and holder != self.paths.job_id:
            log.warning(
                "%s: %s is held by job %s; job %s has nothing there to abort",
                self.name,
                self.to_url(self.layout.job_attempt_dir),
                holder,
                self.paths.job_id,
            )
        cleanup = FileOutputCleanupStage(self.context).apply(FileOutputCleanupArguments(suppress_errors=True))
        self.context.active_stage = self.name
        return FileOutputAbortJobResult(cleanup)
