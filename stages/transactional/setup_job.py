"""TransactionalSetupJob: declare the transaction in the destination and create the job's state."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import JobStateError
from ...markers.heartbeat import lease_document
from ...protocols.transactional.records import TransactionPaths
from ...statistic_names import JOB_STAGE_SETUP
from ..base import Stage
from ..destination_probe import destination_directory


@dataclass(frozen=True, slots=True)
class TransactionalSetupJobArguments:
    pass


class TransactionalSetupJobStage(Stage[TransactionalSetupJobArguments, None]):
    """Create ``manifests/`` and ``tasks/`` of a new job attempt and the empty ``_started_<tid>`` beside the data.

    Precondition: the destination is not a file; the job attempt is new; the transaction was not committed (a job
    id is used once: its tid names its files). Postcondition: tasks may write (their markers go under the job
    attempt's ``markers/``); ``_started_<tid>`` tells readers and ``vacuum`` a transaction is under way. The job's
    lease (``markers/heartbeat``) is its first write, so that no rollback ever takes the job for dead while it is
    being set up (the committer renews it from then on).
    """

    name = JOB_STAGE_SETUP

    def execute(self, arguments: TransactionalSetupJobArguments) -> None:
        transaction = TransactionPaths(self.paths)
        destination_directory(self)
        if self.info(self.paths.job_attempt_dir) is not None:
            raise JobStateError(
                f"{self.to_url(self.paths.job_attempt_dir)}: job {self.paths.job_id} attempt "
                f"{self.paths.job_attempt} was already set up; use a new job id or attempt number"
            )
        if self.info(transaction.committed) is not None:
            raise JobStateError(
                f"{self.to_url(transaction.committed)}: transaction {transaction.tid} of job {self.paths.job_id} "
                "is already committed; use a new job id"
            )
        lease = lease_document(self.paths.job_id, self.config.heartbeat_expiry_seconds)
        self.write_bytes(transaction.markers.heartbeat, lease)
        self.mkdirs(self.paths.manifest_dir)
        self.mkdirs(self.paths.task_attempts_dir)  # stays empty: a task commit's "has my job ended?" probe
        self.write_bytes(transaction.started, b"")
