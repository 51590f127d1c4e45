"""PlanAbort: what ``abort_job`` would revert and delete, found the way it finds them, changing nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ...errors import JobStateError, ManifestError
from ...statistic_names import JOB_STAGE_ABORT
from ..base import Stage
from ..journal import Journal, JournalRun, committed_summary, read_commit_record
from ..success_aside import would_restore
from .abort_job import rows_to_revert
from .load_manifests import LoadManifestsArguments, LoadManifestsStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PlanAbortArguments:
    spill_directory: str | None = None


@dataclass(frozen=True, slots=True)
class AbortPlan:
    """What an abort of the job attempt would do now (URLs, percent-encoded as in manifests)."""

    committed: bool
    """The commit point has passed: an abort keeps the output and deletes only the job's state."""
    commit_started: bool
    """A job commit began (``commit-started``): an abort reverts what it moved."""
    files: list[str] = field(default_factory=list)
    """Destination files this job's commit moved there, which an abort deletes."""
    directories: list[str] = field(default_factory=list)
    """Directories the commit created, which an abort removes if they are empty then (stores with real
    directories only: on object stores they are implied by the files and go with them)."""
    restore_success: bool = False
    """The ``_SUCCESS`` that setup or the commit set aside would be put back (``success_aside``)."""
    job_directory: str | None = None
    """The job's directory under ``_temporary``, which the cleanup deletes (``None``: none, or cleanup skipped)."""
    manifests_unusable: str | None = None
    """Why the files cannot be reverted (a manifest damaged since the commit began); an abort only logs it."""


class PlanAbortStage(Stage[PlanAbortArguments, AbortPlan]):
    """The dry run of ``AbortJobStage``: the same records and the same ownership decision
    (``abort_job.rows_to_revert``), read only.

    Precondition: none. Postcondition: nothing in the store has changed (the manifests are spilled to a local
    temporary file, removed before returning).
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: PlanAbortArguments) -> AbortPlan:
        record = read_commit_record(self)
        committed = committed_summary(self) is not None
        job_directory = None
        if not self.config.cleanup_skipped and self.info(self.paths.job_dir) is not None:
            job_directory = self.to_url(self.paths.job_dir)
        if committed:
            return AbortPlan(committed, record is not None, job_directory=job_directory)
        restore = would_restore(self, self.paths.success_path, self.paths.job_dir) is not None
        if record is None:
            return AbortPlan(False, False, restore_success=restore, job_directory=job_directory)
        journal = Journal(self, JournalRun.abort(self, record.unit_size))
        files: list[str] = []
        unusable = None
        try:
            loaded = LoadManifestsStage(self.context).apply(
                LoadManifestsArguments(arguments.spill_directory, record.accepted)
            )
        except (ManifestError, JobStateError) as error:
            unusable = str(error)
        else:
            with loaded.entry_file:
                for unit in loaded.entry_file.units(journal.unit_size):
                    files.extend(
                        row.dest_url for row in rows_to_revert(self, journal, unit) if self.info(row.dest) is not None
                    )
        directories = []
        if self.capabilities.real_directories:  # elsewhere a directory is implied by its files and goes with them
            directories = [self.to_url(path) for path in journal.created_directories() if self.info(path) is not None]
        self.context.active_stage = self.name
        return AbortPlan(False, True, sorted(files), directories, restore, job_directory, unusable)
