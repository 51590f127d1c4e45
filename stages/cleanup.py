"""Cleanup: delete this job's temporary directory, and nothing of any other job."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from ..config import CommitterConfig
from ..parallel import run_bounded
from ..statistic_names import JOB_STAGE_CLEANUP
from .base import Stage

log = logging.getLogger(__name__)


class CleanupOutcome(enum.Enum):
    DISABLED = "disabled"
    NOTHING_TO_CLEAN_UP = "nothing to clean up"
    DELETED = "deleted"
    PARALLEL_DELETE = "parallel delete"
    FAILURE = "failure"


@dataclass(frozen=True, slots=True)
class CleanupArguments:
    enabled: bool = True
    parallel: bool = True
    base_first: bool = False
    suppress_errors: bool = False

    @classmethod
    def from_config(cls, config: CommitterConfig, *, suppress_errors: bool) -> CleanupArguments:
        """Hadoop's ``cleanup.*`` keys, and whether a failure is only logged."""
        return cls(
            enabled=not config.cleanup_skipped,
            parallel=config.cleanup_parallel_delete,
            base_first=config.cleanup_parallel_delete_base_first,
            suppress_errors=suppress_errors,
        )


@dataclass(frozen=True, slots=True)
class CleanupResult:
    outcome: CleanupOutcome
    delete_calls: int
    error: BaseException | None = None


class CleanupStage(Stage[CleanupArguments, CleanupResult]):
    """Delete ``_temporary/$jobId`` (task attempt directories first, in parallel, where asked), then
    ``_temporary`` itself only if no other job uses it.

    The ``commit-finished`` record goes last: when the job attempt holds one, everything else in it (task
    attempts, manifests, the journal, ``commit-started``) is deleted first, one call each, and the record only
    with the job directory itself. So a kill at any point leaves the record while anything it protects is left,
    and a rerun of ``commit_job`` that finds it finishes the cleanup instead of committing again.
    Hadoop deletes all of ``_temporary`` (its defect D10), which breaks concurrent jobs into one destination.
    Postcondition: no state of this job is left, unless the outcome is ``FAILURE``.
    """

    name = JOB_STAGE_CLEANUP

    def execute(self, arguments: CleanupArguments) -> CleanupResult:
        if not arguments.enabled:
            return CleanupResult(CleanupOutcome.DISABLED, 0)
        job_dir = self.paths.job_dir
        if self.info(job_dir) is None:
            return CleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP, 0)
        calls = 0
        outcome = CleanupOutcome.DELETED
        error: BaseException | None = None
        job_dir_deleted = False
        try:
            if self.info(self.paths.commit_finished_path) is not None:
                calls += self._delete_all_but_the_commit_record(arguments.parallel)
                if arguments.parallel:
                    outcome = CleanupOutcome.PARALLEL_DELETE
            elif arguments.parallel:
                if arguments.base_first:
                    calls += 1
                    try:
                        self.delete_dir(job_dir)
                        job_dir_deleted = True
                    except OSError as base_error:
                        log.info("Base-first delete of %s failed, deleting in parallel: %s", job_dir, base_error)
                if not job_dir_deleted:
                    calls += self._delete_task_attempts_in_parallel()
                    outcome = CleanupOutcome.PARALLEL_DELETE
            if not job_dir_deleted:
                calls += 1
                self.delete_dir(job_dir)
            # Last job out turns off the light: remove _temporary only if nothing else is in it.
            self.remove_empty_dir(self.paths.temporary_dir)
        except Exception as failure:
            outcome, error = CleanupOutcome.FAILURE, failure
            log.warning("%s: cleanup of %s failed: %s", self.name, self.to_url(job_dir), failure)
            if not arguments.suppress_errors:
                raise
        return CleanupResult(outcome, calls, error)

    def _delete_all_but_the_commit_record(self, parallel: bool) -> int:
        calls = self._delete_task_attempts_in_parallel() if parallel else 0
        attempt_dir = self.paths.job_attempt_dir
        record = self.paths.commit_finished_path.rstrip("/")
        for status in sorted(self.list_dir(attempt_dir), key=lambda s: s.path):
            if status.path.rstrip("/") != record:
                calls += 1
                self.delete_dir(status.path)
        return calls

    def _delete_task_attempts_in_parallel(self) -> int:
        try:
            attempts = self.list_dir(self.paths.task_attempts_dir)
        except FileNotFoundError:
            return 0
        directories = [status.path for status in attempts if status.is_dir]
        try:
            run_bounded(self.context.pool, directories, self.delete_dir, max_in_flight=self.context.max_in_flight)
        except OSError as error:
            # As in Hadoop: the delete of the whole job directory that follows decides the outcome.
            log.info("%s: parallel delete of task attempt directories failed: %s", self.name, error)
        return len(directories)
