"""SetupJob: create the job attempt's directories."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import JobStateError
from ...statistic_names import JOB_STAGE_SETUP
from ..base import Stage
from ..destination_probe import destination_directory
from ..success_aside import set_aside


@dataclass(frozen=True, slots=True)
class SetupJobArguments:
    delete_success_marker: bool
    """Take an older ``_SUCCESS`` out of the destination so it cannot be mistaken for this job's (Hadoop deletes
    it); it is set aside in the job attempt directory, for an abort to put back (``success_aside``)."""


@dataclass(frozen=True, slots=True)
class SetupJobResult:
    job_attempt_dir: str


class SetupJobStage(Stage[SetupJobArguments, SetupJobResult]):
    """Create ``manifests/`` and ``tasks/`` under a new job attempt directory.

    Precondition: the job attempt directory does not exist (a new attempt number gets a new one) and the
    destination is not a file. Postcondition: both directories exist; if asked, ``_SUCCESS`` is gone from the
    destination, kept as ``previous-_SUCCESS`` in the job attempt directory.
    """

    name = JOB_STAGE_SETUP

    def execute(self, arguments: SetupJobArguments) -> SetupJobResult:
        destination_directory(self)
        attempt_dir = self.paths.job_attempt_dir
        if self.info(attempt_dir) is not None:
            raise JobStateError(
                f"{self.to_url(attempt_dir)}: job {self.paths.job_id} attempt {self.paths.job_attempt} "
                "was already set up; use a new job id or attempt number"
            )
        self.mkdirs(self.paths.manifest_dir)
        self.mkdirs(self.paths.task_attempts_dir)
        if arguments.delete_success_marker:
            set_aside(self, self.paths.success_path, self.paths.previous_success_path)
        return SetupJobResult(attempt_dir)
