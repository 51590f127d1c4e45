"""AbortJob: undo a job: revert what an interrupted job commit moved, then delete the job's state."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..entry_file import FileToCommit
from ..errors import ManifestError
from ..manifest import EntryStatus
from ..parallel import run_bounded
from ..statistic_names import JOB_STAGE_ABORT
from ..success_data import SuccessData
from .base import Stage
from .cleanup import CleanupArguments, CleanupResult, CleanupStage
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


class AbortJobStage(Stage[AbortJobArguments, AbortJobResult]):
    """Remove the files an interrupted ``commit_job`` had moved, the directories it made, then this job's
    temporary directory.

    A file counts as moved by this job when its source is gone and the destination holds a file of the
    manifest's size (and etag): on an atomic-rename store only this job's rename can have done that. A job
    whose commit finished (its ``commit-finished`` marker or its ``_SUCCESS`` is in place) is not reverted.
    Cleanup errors are logged, not raised, as in Hadoop, so an abort never hides the failure that caused it.
    Repeatable: a second abort finds nothing and succeeds.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: AbortJobArguments) -> AbortJobResult:
        reverted = removed = 0
        if self.info(self.paths.commit_started_path) is not None and not self._committed():
            reverted, removed = self._revert(arguments)
        cleanup = CleanupStage(self.context).apply(CleanupArguments.from_config(self.config, suppress_errors=True))
        self.context.active_stage = self.name
        return AbortJobResult(reverted, removed, cleanup)

    def _committed(self) -> bool:
        if self.info(self.paths.commit_finished_path) is not None:
            return True
        if self.info(self.paths.success_path) is None:
            return False
        try:
            success = SuccessData.from_json(
                self.read_bytes(self.paths.success_path), self.to_url(self.paths.success_path)
            )
        except ManifestError:
            return False
        return success.success and success.job_id == self.paths.job_id

    def _revert(self, arguments: AbortJobArguments) -> tuple[int, int]:
        try:
            loaded = LoadManifestsStage(self.context).apply(LoadManifestsArguments(arguments.spill_directory))
        except ManifestError as error:
            # Job commit checks every manifest before its first rename, so with a bad manifest it moved nothing.
            log.warning("Not reverting job %s: its manifests are unusable (%s)", self.paths.job_id, error)
            return 0, 0
        reverted = 0

        def absorb(count: int) -> None:
            nonlocal reverted
            reverted += count

        with loaded.entry_file:
            run_bounded(
                self.context.pool,
                loaded.entry_file.batches(self.config.rename_batch_size),
                self._revert_batch,
                max_in_flight=self.context.max_in_flight,
                on_result=absorb,
            )
        removed = 0
        made_by_job = [d for d in loaded.directories if d.status != EntryStatus.DIR]
        for directory in sorted(made_by_job, key=lambda d: -d.level):
            if self.remove_empty_dir(directory.path):
                removed += 1
        log.info(
            "%s: reverted %d files and %d directories of job %s",
            self.name,
            reverted,
            removed,
            self.paths.job_id,
        )
        return reverted, removed

    def _revert_batch(self, rows: list[FileToCommit]) -> int:
        count = 0
        for source, dest, size, etag, dest_url in rows:
            if self.info(source) is not None:
                continue  # never moved
            if self.holds_entry(self.info(dest), size, etag):
                self.delete_file(dest)
                log.debug("Reverted %s", dest_url)
                count += 1
        return count
