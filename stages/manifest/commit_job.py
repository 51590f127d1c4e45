"""CommitJob: the job commit, composed of the other stages in the order of the protocol."""

from __future__ import annotations

import contextlib
import logging
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import fsspec

from ...entry_file import remove_dead_spill_files
from ...parallel import Outcome, run_bounded, start
from ...statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    OP_COPY_FILE,
    OP_SAVE_FILE,
)
from ...store import open_store
from ...success_data import DIAGNOSTIC_MANIFESTS, SuccessData
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job, summary_in_trash
from ..journal import (
    CommitRecord,
    JournalRun,
    check_accepted,
    read_job_records,
    write_commit_record,
)
from ..save_success import SaveSuccessArguments, SaveSuccessStage
from .create_directories import CreateDirectoriesArguments, CreateDirectoriesStage
from .directory_moves import movable_directories
from .load_manifests import LoadManifestsArguments, LoadManifestsResult, LoadManifestsStage
from .rename_files import RenameFilesArguments, RenameFilesResult, RenameFilesStage, unit_size
from .validate_output import ValidateOutputArguments, ValidateOutputStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommitJobArguments:
    spill_directory: str | None = None
    accepted_attempts: Mapping[str, str] | None = None
    """Task id -> attempt id to commit; ``None`` commits every manifest (see ``LoadManifestsArguments``)."""
    progress: Callable[[int, int], None] | None = None
    """(files done, files in all) during the renames: see ``RenameFilesArguments.progress``."""
    background_cleanup: bool = True
    """Delete the job's state after returning, where the store can move it away in one call (``CleanupStage``)."""


@dataclass(frozen=True, slots=True)
class CommitJobResult:
    success: SuccessData
    manifests_loaded: int
    files_committed: int
    cleanup: CleanupResult | None
    already_committed: bool = False

    @property
    def tasks_committed(self) -> int:
        return self.manifests_loaded

    @property
    def details(self) -> str:
        return ""


class CommitJobStage(Stage[CommitJobArguments, CommitJobResult]):
    """Load and check the manifests; record what is accepted; create directories; rename files (or, where the
    store renames directories, move a task's directory of one file in whole: ``directory_moves``); validate;
    save ``_SUCCESS``; record the finish; clean up.

    Nothing in the destination changes until every manifest has been loaded and checked and ``commit-started``
    records the accepted attempts. Every change after that is journaled (``stages/journal.py``), so the
    commit is repeatable: after a crash at any point, running it again commits exactly the same attempts,
    counting the files the journal shows in place as done; and once the commit point has passed (this job's
    ``_SUCCESS``, or its ``commit-finished`` record, in place), a rerun only finishes the cleanup and returns
    the recorded summary. After the commit point, a failing cleanup never makes an abort revert the output.
    """

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: CommitJobArguments) -> CommitJobResult:
        remove_dead_spill_files(arguments.spill_directory, self.paths.job_id)
        # Not needed by a job already committed (whose state may be gone): an error listing it counts only after.
        listing = Outcome(lambda: self.list_dir_if_present(self.paths.manifest_dir))
        records = read_job_records(self, listing)
        # The commit point passed: the record of the finish, this job's _SUCCESS (a kill between the two, or
        # the job's state already gone) or the record in the trash (the state moved there, not yet deleted).
        finished = records.finished or summary_in_trash(self)
        if finished is not None:
            log.info("%s: job %s was already committed; finishing its cleanup", self.name, self.paths.job_id)
            cleanup = self._cleanup(arguments)
            return CommitJobResult(finished, 0, 0, cleanup, already_committed=True)

        started = records.started
        accepted = arguments.accepted_attempts
        if started is not None:
            check_accepted(self, started, accepted)
            accepted = started.accepted
        loaded = LoadManifestsStage(self.context).apply(
            LoadManifestsArguments(arguments.spill_directory, accepted, listing.get())
        )
        with loaded.entry_file:
            if started is None:
                record = CommitRecord(
                    self.paths.job_id,
                    dict(zip(loaded.task_ids, loaded.task_attempt_ids, strict=True)),
                    unit_size(
                        self.config,
                        loaded.file_count,
                        microsecond_calls=self.capabilities.microsecond_calls,
                        concurrent_calls=self.capabilities.concurrent_calls,
                    ),
                )
                # Before the destination first changes; written while the directories are probed.
                record_written = start(self.context.pool, lambda: write_commit_record(self, record))
                journal = JournalRun.first(record.unit_size)
            else:
                record_written = _nothing
                journal = JournalRun.rerun(self, started.unit_size)
            try:
                directories = CreateDirectoriesStage(self.context).apply(
                    CreateDirectoriesArguments(loaded.directories, journal, self._movable(loaded), record_written)
                )
            except BaseException:
                with contextlib.suppress(Exception):  # never left in flight; the stage's error is the one raised
                    record_written()
                raise
            record_written()  # in place before the first rename, whatever the stage did
            renamed = RenameFilesStage(self.context).apply(
                RenameFilesArguments(
                    loaded.entry_file,
                    journal,
                    arguments.progress,
                    clear_directories=directories.clear,
                    job_directories=frozenset(directory.path for directory in loaded.directories),
                    moved_in=directories.moved_in,
                )
            )
            self._set_job_counters(loaded, renamed)
            if self.config.validate_output:
                ValidateOutputStage(self.context).apply(ValidateOutputArguments(loaded.entry_file))

        success = SuccessData.create(self.paths.job_id, self.context.job_id_source, COMMITTER_COMMIT_JOB)
        success.filenames = renamed.first_filenames
        if self.config.diagnostics_manifest_directory:
            kept = self._keep_manifests(self.config.diagnostics_manifest_directory)
            if kept is not None:
                success.diagnostics[DIAGNOSTIC_MANIFESTS] = kept
        success.iostatistics = self.stats.snapshot()
        if self.config.mark_successful_jobs:
            SaveSuccessStage(self.context).apply(SaveSuccessArguments(success))  # the commit point
        # The record of the finish, holding the summary: the commit point without _SUCCESS, and what a rerun
        # returns. Deleted last by cleanup.
        self.write_bytes(self.paths.commit_finished_path, success.to_json())

        cleanup = self._cleanup(arguments)
        return CommitJobResult(success, loaded.manifest_count, renamed.files_committed, cleanup)

    def _movable(self, loaded: LoadManifestsResult) -> frozenset[str]:
        """Where the store moves real directories atomically and renames one call at a time, the destination
        directories whose one file may arrive with its source directory (``directory_moves``)."""
        capabilities = self.capabilities
        if not (capabilities.directory_rename and capabilities.real_directories and capabilities.atomic_rename):
            return frozenset()
        if capabilities.concurrent_calls:  # its renames go out in batches, where a move has no place
            return frozenset()
        return movable_directories(loaded.entry_file.chunks(), loaded.file_count, loaded.directories, self.paths)

    def _cleanup(self, arguments: CommitJobArguments) -> CleanupResult:
        """After the commit point: a failure is raised unless ``cleanup-failures.ignored``, but the record of
        the finish outlives everything else, so neither a rerun nor an abort can undo the output. Where the
        store can, the job's state moves into the trash in one call and is deleted after this returns."""
        return clean_up_job(
            self, suppress_errors=self.config.cleanup_failures_ignored, background=arguments.background_cleanup
        )

    def _set_job_counters(self, loaded: LoadManifestsResult, renamed: RenameFilesResult) -> None:
        # Set, not summed: the task statistics merged from the manifests count the same files already.
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, renamed.files_committed)
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, renamed.bytes_committed)
        self.stats.set_counter(COMMITTER_TASKS_COMPLETED, loaded.manifest_count)

    def _keep_manifests(self, directory: str) -> str | None:
        """Copy the manifests to ``<directory>/<jobId>/`` for later diagnosis.

        Copied, not moved as Hadoop does, so a crash right after still leaves a repeatable job commit.
        A failure is logged and ignored: diagnostics must never fail a job.
        """
        try:
            dest_scheme = self.to_url(self.paths.dest).split(":", 1)[0]
            same_store = (fsspec.core.split_protocol(directory)[0] or "file") == dest_scheme
            opened = open_store(directory, self.context.storage_options if same_store else None)
            target_store = opened.store
            target = posixpath.join(opened.path, self.paths.job_id)
            manifests = [s.path for s in self.list_dir(self.paths.manifest_dir) if not s.is_dir]

            def copy(path: str) -> None:
                data = self.read_bytes(path, OP_COPY_FILE)
                # Another store, outside the job's gate: its own call, timed, retried by the job's policy.
                self.call(
                    OP_SAVE_FILE,
                    lambda: target_store.write_bytes(posixpath.join(target, posixpath.basename(path)), data),
                    path,
                )

            try:
                run_bounded(self.context.pool, manifests, copy, max_in_flight=self.context.max_in_flight)
            finally:
                target_store.close()
            return target_store.to_url(target)
        except Exception as error:
            log.warning("Could not keep the manifests of job %s in %s: %s", self.paths.job_id, directory, error)
            return None


def _nothing() -> None:
    return None
