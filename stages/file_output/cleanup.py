"""FileOutputCleanup: delete this job's ``_temporary/<appAttempt>`` (v1, v2), the job's claim last."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...statistic_names import JOB_STAGE_CLEANUP
from ..cleanup import CleanupOutcome
from .base import FileOutputStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileOutputCleanupArguments:
    enabled: bool = True
    suppress_errors: bool = False


@dataclass(frozen=True, slots=True)
class FileOutputCleanupResult:
    outcome: CleanupOutcome
    error: BaseException | None = None


class FileOutputCleanupStage(FileOutputStage[FileOutputCleanupArguments, FileOutputCleanupResult]):
    """Delete the commit record, everything else in ``_temporary/<appAttempt>`` but ``_COMMIT_FINISHED.json``
    and ``_JOB``, then those two, then the empty directories.

    Hadoop deletes all of ``_temporary``, other jobs' and attempts' state too; here only this job's app attempt
    directory goes, and ``_temporary`` only if nothing else is in it. ``_JOB`` goes last so that a cleanup
    killed half-way leaves the directory held: no other job can set up there and merge this one's leftovers.
    Only the job that holds the directory deletes it. Postcondition: no state of this job is left, unless the
    outcome is ``FAILURE``.
    """

    name = JOB_STAGE_CLEANUP

    def execute(self, arguments: FileOutputCleanupArguments) -> FileOutputCleanupResult:
        if not arguments.enabled:
            return FileOutputCleanupResult(CleanupOutcome.DISABLED)
        layout = self.layout
        holder = self.job_holding_the_layout()
        if holder != self.paths.job_id:
            if holder is None:
                # A cleanup killed after deleting _JOB leaves the emptied directories; an empty directory holds
                # no job's state (a job's setup makes its subdirectory before it writes _JOB).
                self.remove_empty_dir(layout.job_attempt_dir)
                self.remove_empty_dir(layout.pending_dir)
            return FileOutputCleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP)
        last = {layout.owner_path, layout.commit_finished_path}
        try:
            # The commit record first: once the committed task directories start to go, "source gone" is no
            # evidence any more, and without the record nothing in the destination counts as this job's.
            self.delete_file(layout.commit_started_path)
            for child in self.list_dir(layout.job_attempt_dir):
                if child.path.rstrip("/") not in last:
                    self.delete_dir(child.path)
            self.delete_file(layout.commit_finished_path)  # the commit point without _SUCCESS: kept to the end
            self.delete_file(layout.owner_path)
            self.remove_empty_dir(layout.job_attempt_dir)
            self.remove_empty_dir(layout.pending_dir)
        except Exception as failure:
            log.warning("%s: cleanup of %s failed: %s", self.name, self.to_url(layout.job_attempt_dir), failure)
            if not arguments.suppress_errors:
                raise
            return FileOutputCleanupResult(CleanupOutcome.FAILURE, failure)
        return FileOutputCleanupResult(CleanupOutcome.DELETED)
