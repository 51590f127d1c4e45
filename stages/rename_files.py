"""RenameFiles: move every file of every committed task into the destination, in parallel batches."""

from __future__ import annotations

import enum
import heapq
import logging
import posixpath
import time
from dataclasses import dataclass, field

from ..entry_file import EntryFile, FileToCommit
from ..errors import CommitterError, OutputConflictError
from ..iostatistics import DurationAccumulator
from ..parallel import run_bounded
from ..retry import describe_error
from ..statistic_names import (
    COMMIT_FILE_RENAME,
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    JOB_STAGE_RENAME_FILES,
    OP_RENAME,
    STORE_IO_RETRY,
)
from ..success_data import SUCCESS_FILENAME_LIMIT
from .base import Stage

log = logging.getLogger(__name__)


class RenameOutcome(enum.Enum):
    """How one file reached its destination."""

    RENAMED = "renamed"
    """This call moved it."""
    ALREADY_COMMITTED = "already committed"
    """An earlier, interrupted job commit had moved it."""
    RECOVERED = "recovered"
    """A rename that failed (or half-finished) had in fact taken effect; settled from evidence."""


@dataclass(frozen=True, slots=True)
class RenameFilesArguments:
    entry_file: EntryFile


@dataclass(slots=True)
class RenameFilesResult:
    files_committed: int = 0
    bytes_committed: int = 0
    already_committed: int = 0
    recovered: int = 0
    first_filenames: list[str] = field(default_factory=list)
    """The sorted first ``SUCCESS_FILENAME_LIMIT`` destination URLs, for ``_SUCCESS``."""


@dataclass(slots=True)
class _BatchResult:
    files: int = 0
    bytes: int = 0
    already_committed: int = 0
    recovered: int = 0
    filenames: list[str] = field(default_factory=list)
    durations: DurationAccumulator = field(default_factory=lambda: DurationAccumulator(COMMIT_FILE_RENAME))


class RenameFilesStage(Stage[RenameFilesArguments, RenameFilesResult]):
    """Rename each file from its task attempt directory to its destination.

    A rename never replaces what it finds (the store's ``rename_file`` refuses), so the slow path handles the
    exceptions: a file already at its destination with the manifest's size (and etag) while the source is gone
    is this job's own, from an earlier interrupted commit, and counts as done; anything else there is a
    conflict, unless ``delete.target.files`` says to replace it. A vanished parent directory is recreated.
    Transient store errors are retried inside the unit of work, and a rename that took effect before its
    error is recognised as ``commit_file_rename_recovered``. Postcondition: every listed file is at its
    destination and no longer at its source.
    """

    name = JOB_STAGE_RENAME_FILES

    def execute(self, arguments: RenameFilesArguments) -> RenameFilesResult:
        result = RenameFilesResult()
        smallest: list[str] = []

        def absorb(batch: _BatchResult) -> None:
            nonlocal smallest
            result.files_committed += batch.files
            result.bytes_committed += batch.bytes
            result.already_committed += batch.already_committed
            result.recovered += batch.recovered
            self.stats.add_accumulator(batch.durations)
            smallest = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, smallest + batch.filenames)

        batch_size = self._batch_size(arguments.entry_file.file_count)
        try:
            run_bounded(
                self.context.pool,
                arguments.entry_file.batches(batch_size),
                self._rename_batch,
                max_in_flight=self.context.max_in_flight,
                on_result=absorb,
            )
        finally:
            if result.recovered:
                self.stats.increment(COMMIT_FILE_RENAME_RECOVERED, result.recovered)
            if result.already_committed:
                self.stats.increment(COMMITTER_FILES_ALREADY_COMMITTED, result.already_committed)
        result.first_filenames = smallest
        if result.recovered:
            log.warning("%s: %d renames failed but had taken effect; recovered", self.name, result.recovered)
        return result

    def _batch_size(self, file_count: int) -> int:
        # Small enough that every thread gets several batches, large enough to amortise the pool's overhead.
        per_thread = file_count // (self.config.io_threads * 4) + 1
        return max(1, min(self.config.rename_batch_size, per_thread))

    def _rename_batch(self, rows: list[FileToCommit]) -> _BatchResult:
        batch = _BatchResult()
        rename = self.rename_file_fast
        durations = batch.durations
        clock = time.perf_counter
        for row in rows:
            source, dest = row.source, row.dest
            start = clock()
            try:
                rename(source, dest)
            except Exception as error:
                try:
                    outcome = self._rename_slow_path(row, error)
                except BaseException:
                    durations.failures += 1
                    self.stats.add_accumulator(durations)  # the batch's result is lost with the error
                    raise
                durations.record(int((clock() - start) * 1000))
                if outcome is RenameOutcome.ALREADY_COMMITTED:
                    batch.already_committed += 1
                elif outcome is RenameOutcome.RECOVERED:
                    batch.recovered += 1
            else:
                durations.record(int((clock() - start) * 1000))
            batch.files += 1
            batch.bytes += row.size
            batch.filenames.append(row.dest_url)
        batch.filenames = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, batch.filenames)
        return batch

    def _rename_slow_path(self, row: FileToCommit, error: Exception) -> RenameOutcome:
        """Settle a rename that raised, or raise."""
        source, dest = row.source, row.dest
        if isinstance(error, FileExistsError):
            return self._resolve_existing(row)
        if isinstance(error, FileNotFoundError):
            if self.info(source) is None:
                if self.holds_entry(self.info(dest), row.size, row.etag):
                    log.debug("%s: already committed by an earlier job commit", row.dest_url)
                    return RenameOutcome.ALREADY_COMMITTED
                raise CommitterError(
                    f"{row.dest_url}: cannot commit: source {self.to_url(source)} is missing and the destination "
                    "does not hold the file (was the task attempt directory deleted?)"
                ) from error
            # The source is there, so the destination's parent is not: a directory that vanished after task
            # commit (Hadoop trusts the task's view and fails here).
            self.mkdirs(posixpath.dirname(dest))
            self.rename_file(source, dest)
            return RenameOutcome.RENAMED
        if self.is_transient(error):
            return self._retry_transient(row, error)
        raise error

    def _retry_transient(self, row: FileToCommit, error: Exception) -> RenameOutcome:
        source, dest = row.source, row.dest
        outcome = RenameOutcome.RENAMED

        def attempt() -> None:
            # One unit, retried as a whole: the calls inside are tried once each.
            nonlocal outcome
            if self.info(source, retry=False) is None and self.holds_entry(
                self.info(dest, retry=False), row.size, row.etag
            ):
                outcome = RenameOutcome.RECOVERED  # the failed call had moved the file
                return
            self.rename_file(source, dest, retry=False)

        log.info("Rename of %s failed with a transient error, retrying: %s", row.dest_url, describe_error(error))
        self.stats.increment(STORE_IO_RETRY)  # the retry policy counts only the retries after this one
        try:
            self.context.store_retry.call(attempt, f"{OP_RENAME} {dest}")
        except FileExistsError:
            return self._resolve_existing(row)
        return outcome

    def _resolve_existing(self, row: FileToCommit) -> RenameOutcome:
        source, dest = row.source, row.dest
        found = self.info(dest)
        if found is None:  # gone in between; try again once
            self.rename_file(source, dest)
            return RenameOutcome.RENAMED
        source_status = self.info(source)
        if source_status is None:
            if self.holds_entry(found, row.size, row.etag):
                return RenameOutcome.ALREADY_COMMITTED
        elif (
            not self.capabilities.atomic_rename
            and self.holds_entry(found, row.size, row.etag)
            and self.same_content(source_status, found)
        ):
            # A copy-then-delete rename that copied but did not delete: finish it.
            self.delete_file(source)
            return RenameOutcome.RECOVERED
        if not self.config.delete_target_files:
            what = "a directory" if found.is_dir else f"a file of {found.size} bytes"
            raise OutputConflictError(
                f"{row.dest_url}: destination already holds {what} that this job did not write; "
                "nothing was overwritten (set mapreduce.manifest.committer.delete.target.files=true to replace it)"
            )
        if source_status is None:
            raise CommitterError(f"{row.dest_url}: cannot commit: source {self.to_url(source)} is missing")
        if found.is_dir:
            self.delete_dir(dest)
        else:
            self.delete_file(dest)
        self.rename_file(source, dest)
        return RenameOutcome.RENAMED
