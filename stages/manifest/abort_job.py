"""AbortJob: undo a job: revert what an interrupted job commit moved, then delete the job's state."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...entry_file import FileToCommit, RenameUnit, remove_dead_spill_files
from ...errors import JobStateError, ManifestError
from ...parallel import run_bounded
from ...statistic_names import JOB_STAGE_ABORT
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job
from ..journal import (
    CommitRecord,
    Evidence,
    Gate,
    Journal,
    JournalRun,
    committed_summary,
    evidence,
    read_commit_record,
)
from ..success_aside import restore
from .load_manifests import LoadManifestsArguments, LoadManifestsStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AbortJobArguments:
    spill_directory: str | None = None


@dataclass(frozen=True, slots=True)
class AbortJobResult:
    files_reverted: int
    directories_removed: int
    cleanup: CleanupResult


def rows_to_revert(gate: Gate, journal: Journal, unit: RenameUnit) -> list[FileToCommit]:
    """The rows of ``unit`` that this job's commit moved, as its journal (and, for rows in doubt, the evidence)
    shows: what an abort deletes, and what a dry run lists."""
    history = journal.history(unit)
    if not history.touched:
        return []  # no run ever began this unit
    return [
        row
        for index, row in enumerate(unit.rows)
        if history.recorded_ours(index) or (history.in_doubt(index) and evidence(gate, row) is not Evidence.NONE)
    ]


class AbortJobStage(Stage[AbortJobArguments, AbortJobResult]):
    """Undo an interrupted ``commit_job`` from its own records, then delete this job's temporary directory.

    What to undo comes from the journal (``stages/journal.py``), never from sizes: the attempts recorded in
    ``commit-started`` (an extra manifest in ``manifests/`` changes nothing), the files the journal shows this
    job moved (deleted again), the directories it recorded creating (removed if empty, deepest first), and the
    ``_SUCCESS`` that setup or the commit set aside (put back, unless one is in place or set aside since:
    ``success_aside``). A user's file, even one of the same size at a destination of the
    job, is never touched. Files deleted under ``delete.target.files`` ("replace") cannot come back.
    A job past its commit point (``commit-finished``, or its ``_SUCCESS`` in place) is not reverted.
    Cleanup errors are logged, not raised, as in Hadoop, so an abort never hides the failure that caused it.
    Repeatable, and safe to kill: ``commit-started`` goes only once the destination is as before the job;
    a second abort then finds nothing to undo and succeeds.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: AbortJobArguments) -> AbortJobResult:
        remove_dead_spill_files(arguments.spill_directory, self.paths.job_id)
        reverted = removed = 0
        record = read_commit_record(self)
        if committed_summary(self) is None:
            if record is not None:
                reverted, removed = self._revert(arguments, record)
            restore(self, self.paths.success_path, self.paths.job_dir)
            if record is not None:
                self.delete_file(self.paths.commit_started_path)  # nothing of this commit is left to undo
        cleanup = clean_up_job(self, suppress_errors=True)
        return AbortJobResult(reverted, removed, cleanup)

    def _revert(self, arguments: AbortJobArguments, record: CommitRecord) -> tuple[int, int]:
        journal = Journal(self, JournalRun.abort(self, record.unit_size))
        reverted = 0

        def absorb(count: int) -> None:
            nonlocal reverted
            reverted += count

        try:
            loaded = LoadManifestsStage(self.context).apply(
                LoadManifestsArguments(arguments.spill_directory, record.accepted)
            )
        except (ManifestError, JobStateError) as error:
            # Job commit checked every manifest before its first rename; one damaged since cannot be reverted.
            log.warning("Not reverting the files of job %s: its manifests are unusable (%s)", self.paths.job_id, error)
        else:
            with loaded.entry_file:
                run_bounded(
                    self.context.pool,
                    loaded.entry_file.units(journal.unit_size),
                    lambda unit: self._revert_unit(journal, unit),
                    max_in_flight=self.context.max_in_flight,
                    on_result=absorb,
                )
        removed = 0
        for directory in sorted(journal.created_directories(), key=lambda path: (-path.count("/"), path)):
            if self.remove_empty_dir(directory):
                removed += 1
        log.info(
            "%s: reverted %d files and %d directories of job %s",
            self.name,
            reverted,
            removed,
            self.paths.job_id,
        )
        return reverted, removed

    def _revert_unit(self, journal: Journal, unit: RenameUnit) -> int:
        count = 0
        for row in rows_to_revert(self, journal, unit):
            if self.delete_file(row.dest):
                log.debug("Reverted %s", row.dest_url)
                count += 1
        return count
