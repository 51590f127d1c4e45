"""RenameFiles: move every file of every committed task into the destination, in parallel batches."""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, field

from ..entry_file import EntryFile, Row
from ..errors import CommitterError, OutputConflictError
from ..iostatistics import DurationAccumulator
from ..parallel import run_bounded
from ..statistic_names import (
    COMMIT_FILE_RENAME,
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    JOB_STAGE_RENAME_FILES,
    OP_DELETE,
    OP_DELETE_DIR,
    OP_MKDIRS,
    STORE_IO_RETRY,
)
from ..success_data import SUCCESS_FILENAME_LIMIT
from .base import Stage

log = logging.getLogger(__name__)


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

    def _rename_batch(self, rows: list[Row]) -> _BatchResult:
        batch = _BatchResult()
        rename = self.store.rename_file
        durations = batch.durations
        clock = time.perf_counter
        for row in rows:
            source, dest = row[0], row[1]
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
                if outcome == "already":
                    batch.already_committed += 1
                elif outcome == "recovered":
                    batch.recovered += 1
            else:
                durations.record(int((clock() - start) * 1000))
            batch.files += 1
            batch.bytes += row[2]
            batch.filenames.append(row[4])
        batch.filenames = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, batch.filenames)
        return batch

    def _rename_slow_path(self, row: Row, error: Exception) -> str:
        """Settle a rename that raised; returns ``renamed``, ``already`` or ``recovered``, or raises."""
        source, dest, size, etag, dest_url = row
        store = self.store
        if isinstance(error, FileExistsError):
            return self._resolve_existing(row)
        if isinstance(error, FileNotFoundError):
            if store.info(source) is None:
                if self.holds_entry(store.info(dest), size, etag):
                    log.debug("%s: already committed by an earlier job commit", dest_url)
                    return "already"
                raise CommitterError(
                    f"{dest_url}: cannot commit: source {store.to_url(source)} is missing and the destination "
                    "does not hold the file (was the task attempt directory deleted?)"
                ) from error
            # The source is there, so the destination's parent is not: a directory that vanished after task
            # commit (Hadoop trusts the task's view and fails here).
            self.call(OP_MKDIRS, lambda: store.mkdirs(store.parent(dest)))
            self.context.store_retry.call(lambda: store.rename_file(source, dest))
            return "renamed"
        if store.is_transient(error):
            return self._retry_transient(row, error)
        raise error

    def _retry_transient(self, row: Row, error: Exception) -> str:
        source, dest, size, etag, _ = row
        store = self.store
        outcome = "renamed"

        def attempt() -> None:
            nonlocal outcome
            if store.info(source) is None and self.holds_entry(store.info(dest), size, etag):
                outcome = "recovered"  # the failed call had moved the file
                return
            store.rename_file(source, dest)

        log.info("Rename of %s failed with a transient error, retrying: %s", row[4], error)
        self.stats.increment(STORE_IO_RETRY)  # the retry policy counts only the retries after this one
        try:
            self.context.store_retry.call(attempt)
        except FileExistsError:
            return self._resolve_existing(row)
        return outcome

    def _resolve_existing(self, row: Row) -> str:
        source, dest, size, etag, dest_url = row
        store = self.store
        found = store.info(dest)
        if found is None:  # gone in between; try again once
            self.context.store_retry.call(lambda: store.rename_file(source, dest))
            return "renamed"
        source_status = store.info(source)
        if source_status is None:
            if self.holds_entry(found, size, etag):
                return "already"
        elif (
            not store.capabilities.atomic_rename
            and self.holds_entry(found, size, etag)
            and store.same_content(source_status, found)
        ):
            # A copy-then-delete rename that copied but did not delete: finish it.
            store.delete_file(source)
            return "recovered"
        if not self.config.delete_target_files:
            what = "a directory" if found.is_dir else f"a file of {found.size} bytes"
            raise OutputConflictError(
                f"{dest_url}: destination already holds {what} that this job did not write; "
                "nothing was overwritten (set mapreduce.manifest.committer.delete.target.files=true to replace it)"
            )
        if source_status is None:
            raise CommitterError(f"{dest_url}: cannot commit: source {store.to_url(source)} is missing")
        if found.is_dir:
            self.call(OP_DELETE_DIR, lambda: store.delete_dir(dest))
        else:
            self.call(OP_DELETE, lambda: store.delete_file(dest))
        self.context.store_retry.call(lambda: store.rename_file(source, dest))
        return "renamed"
