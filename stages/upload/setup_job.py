"""UploadSetupJob: leave the sign of an upload job in its state; nothing in the destination."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ...errors import JobStateError
from ...markers.heartbeat import lease_document
from ...markers.layout import MarkerPaths
from ...protocols.upload.records import UPLOAD_PROTOCOL, UploadPaths
from ...statistic_names import JOB_STAGE_SETUP
from ..base import Stage
from ..destination_probe import destination_directory


@dataclass(frozen=True, slots=True)
class UploadSetupJobArguments:
    pass


class UploadSetupJobStage(Stage[UploadSetupJobArguments, None]):
    """Create the job attempt's ``protocol`` file (``upload``), with ``put_if_absent``.

    Precondition: the destination is not a file, and this job attempt was never set up. Postcondition: tasks
    may write (markers under ``markers/``, records under ``pending/``); ``protocol`` tells status, the command
    line and rollback that this is an upload job, and a task commit that its job is live (object stores have no
    empty directories to say so). Its second line is a token of this call: a conditional PUT that took effect but
    whose answer was lost is retried and finds the file, and only the token tells "ours" from "set up before".
    The job's lease (``markers/heartbeat``) is written before the sign, so that no rollback ever sees an upload job
    without one and takes it for dead while it is being set up.
    """

    name = JOB_STAGE_SETUP

    def execute(self, arguments: UploadSetupJobArguments) -> None:
        layout = UploadPaths(self.paths)
        destination_directory(self)
        sign = f"{UPLOAD_PROTOCOL}\n{uuid.uuid4().hex}\n".encode()
        if self.info(layout.protocol_file) is None:
            lease = lease_document(self.paths.job_id, self.config.heartbeat_expiry_seconds)
            self.write_bytes(MarkerPaths(self.paths).heartbeat, lease)
        try:
            self.put_if_absent(layout.protocol_file, sign)
        except FileExistsError:
            if self.read_bytes_if_present(layout.protocol_file) == sign:
                return  # our own write, whose answer was lost: the retry found it
            raise JobStateError(
                f"{self.to_url(self.paths.job_attempt_dir)}: job {self.paths.job_id} attempt "
                f"{self.paths.job_attempt} was already set up; use a new job id or attempt number"
            ) from None
