"""UploadSetupJob: leave the sign of an upload job in its state; nothing in the destination."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import JobStateError, OutputConflictError
from ..statistic_names import JOB_STAGE_SETUP
from ..uploads import UPLOAD_PROTOCOL, UploadPaths
from .base import Stage


@dataclass(frozen=True, slots=True)
class UploadSetupJobArguments:
    pass


class UploadSetupJobStage(Stage[UploadSetupJobArguments, None]):
    """Create the job attempt's ``protocol`` file (``upload``), with ``put_if_absent``.

    Precondition: the destination is not a file, and this job attempt was never set up. Postcondition: tasks
    may write (markers under ``markers/``, records under ``pending/``); ``protocol`` tells status, the command
    line and rollback that this is an upload job, and a task commit that its job is live (object stores have no
    empty directories to say so).
    """

    name = JOB_STAGE_SETUP

    def execute(self, arguments: UploadSetupJobArguments) -> None:
        layout = UploadPaths(self.paths)
        dest = self.info(self.paths.dest)
        if dest is not None and not dest.is_dir:
            raise OutputConflictError(f"{self.to_url(self.paths.dest)}: destination is a file, not a directory")
        try:
            self.put_if_absent(layout.protocol_file, UPLOAD_PROTOCOL.encode() + b"\n")
        except FileExistsError:
            raise JobStateError(
                f"{self.to_url(self.paths.job_attempt_dir)}: job {self.paths.job_id} attempt "
                f"{self.paths.job_attempt} was already set up; use a new job id or attempt number"
            ) from None
