"""FileOutputSetupJob: claim Hadoop FileOutputCommitter's ``_temporary/<appAttempt>`` for this job (v1, v2)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import JobStateError
from ...protocols.file_output.layout import LayoutHolder
from ...protocols.names import ProtocolName
from ...statistic_names import JOB_STAGE_SETUP
from ..destination_probe import destination_directory
from ..success_aside import set_aside
from .base import FileOutputStage


@dataclass(frozen=True, slots=True)
class FileOutputSetupJobArguments:
    delete_success_marker: bool
    """Set an older ``_SUCCESS`` aside so it cannot be mistaken for this job's, as the manifest protocol does."""
    protocol: ProtocolName
    """``v1`` or ``v2``: recorded in ``_JOB`` beside the job id, for ``status`` and the on-call commands."""


@dataclass(frozen=True, slots=True)
class FileOutputSetupJobResult:
    job_attempt_dir: str


class FileOutputSetupJobStage(FileOutputStage[FileOutputSetupJobArguments, FileOutputSetupJobResult]):
    """Create ``_temporary/<appAttempt>/_temporary`` and record this job (and its protocol) as its holder in ``_JOB``.

    Hadoop shares that directory between every job into the destination: a second job's commit merges the
    first one's committed tasks and its cleanup deletes them. Here a second job's setup is refused instead
    (``JobStateError`` naming the job that holds it; ``abort_job`` of a dead one frees it).
    Precondition: the destination is not a file; no other job holds the directory, and it is empty if it
    exists. Postcondition: the task attempts' parent directory exists, ``_JOB`` names this job, and if asked,
    ``_SUCCESS`` is gone from the destination, kept as ``_PREVIOUS_SUCCESS`` for an abort to put back.
    """

    name = JOB_STAGE_SETUP

    def execute(self, arguments: FileOutputSetupJobArguments) -> FileOutputSetupJobResult:
        destination_directory(self)
        layout = self.layout
        holder = self.job_holding_the_layout()
        if holder is not None:
            raise JobStateError(
                f"{self.to_url(layout.job_attempt_dir)}: held by job {holder}; job {self.paths.job_id} "
                f"attempt {self.paths.job_attempt} cannot be set up there (Hadoop's v1/v2 layout has one job per "
                "destination and attempt at a time; abort the other job if it is dead)"
            )
        if self.info(layout.job_attempt_dir) is not None and self.list_dir(layout.job_attempt_dir):
            # No holder but content: a Hadoop job's (which writes no _JOB), or a crash between cleanup's deletes.
            raise JobStateError(
                f"{self.to_url(layout.job_attempt_dir)}: holds another writer's state and no job id; job "
                f"{self.paths.job_id} cannot be set up there (delete it if no job is writing to the destination)"
            )
        self.mkdirs(layout.task_attempts_dir)
        self.write_bytes(layout.owner_path, LayoutHolder(self.paths.job_id, arguments.protocol).to_bytes())
        if arguments.delete_success_marker:
            set_aside(self, layout.success_path, layout.previous_success_path)
        return FileOutputSetupJobResult(layout.job_attempt_dir)
