"""RenameFiles: move every file of every committed task into the destination, in parallel batches."""

from __future__ import annotations

import enum
import heapq
import logging
import os
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...config import CommitterConfig
from ...entry_file import EntryFile, FileToCommit, RenameUnit
from ...errors import CommitterError, OutputConflictError
from ...iostatistics import DurationAccumulator
from ...parallel import CONCURRENT_DEMAND, run_bounded
from ...retry import describe_error
from ...statistic_names import (
    COMMIT_FILE_RENAME,
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_DIRECTORIES_MOVED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    JOB_STAGE_RENAME_FILES,
    OP_RENAME,
    STORE_IO_RETRY,
)
from ...store.operations import RenameHint
from ...success_data import SUCCESS_FILENAME_LIMIT
from ..base import Stage
from ..journal import Evidence, Journal, JournalRun, UnitHistory, evidence

log = logging.getLogger(__name__)


class RenameOutcome(enum.Enum):
    """How one file reached its destination."""

    RENAMED = "renamed"
    """This call moved it."""
    ALREADY_COMMITTED = "already committed"
    """An earlier, interrupted run of this job commit had moved it (as its journal shows)."""
    RECOVERED = "recovered"
    """A rename that failed (or half-finished) had in fact taken effect; settled from evidence."""


@dataclass(frozen=True, slots=True)
class RenameFilesArguments:
    entry_file: EntryFile
    journal: JournalRun
    """Which run of the job commit this is: where each unit's renames are recorded, and what to read of the
    runs before."""
    progress: Callable[[int, int], None] | None = None
    """Called with (files done, files in all) once before the first rename and after each unit, in the thread
    that runs the stage: per unit, never per file, so the hot rename loop pays nothing for it."""
    clear_directories: frozenset[str] = frozenset()
    """Directories the job found missing before its renames (``CreateDirectoriesResult.clear``): a file going
    directly into one is renamed with ``RenameHint.dest_clear``."""
    job_directories: frozenset[str] = frozenset()
    """Every directory of the job's output: a file at one of these paths has a directory of the job in its way,
    so it is never hinted clear."""
    moved_in: frozenset[str] = frozenset()
    """Destination directories left missing for their one file's source directory to be moved to, where the
    store renames directories (``CreateDirectoriesResult.moved_in``, ``directory_moves``)."""


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
    directories_moved: int = 0
    filenames: list[str] = field(default_factory=list)
    durations: DurationAccumulator = field(default_factory=lambda: DurationAccumulator(COMMIT_FILE_RENAME))


class _NotMovableError(Exception):
    """A row this job certainly did not move (a conflict, a missing source): the unit's record says so."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _ProgressReport:
    """Hands progress to the caller's callback; a callback that fails is logged once and dropped, never allowed
    to fail the job commit it only watches."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int) -> None:
        self.callback = callback
        self.total = total

    def __call__(self, done: int) -> None:
        if self.callback is None:
            return
        try:
            self.callback(done, self.total)
        except Exception as error:
            log.warning("Progress callback failed; no more progress is reported: %s", describe_error(error))
            self.callback = None


CONCURRENT_UNIT_SPREAD = 64
"""Where a unit's renames go out together, units are cut as if for at most this many threads."""
MICROSECOND_UNIT_FACTOR = 8
"""Where store calls take microseconds, units may be this many times ``rename_batch_size``."""


def unit_size(
    config: CommitterConfig, file_count: int, *, microsecond_calls: bool = False, concurrent_calls: bool = False
) -> int:
    """Rows per unit of renames: several per thread, large enough to amortise the pool and the journal.

    Each unit costs two journal records. Where a store call takes microseconds (local disk), two records cost
    as much as dozens of renames, and only two units per core run at once (``StageContext.max_in_flight``), so
    units are cut for those workers and may grow to ``MICROSECOND_UNIT_FACTOR`` times ``rename_batch_size``:
    a 10,000-file local commit writes 32 records instead of 254. A rerun after a crash probes the rows of the
    unit in doubt (two ``stat`` calls each there), so larger units cost it nothing that matters.

    Where one thread puts a unit's renames in flight together (``concurrent_calls``), ``io.threads`` bounds the
    calls, not the units: one unit per thread's worth of files keeps every slot busy with a quarter of the
    records, counting at most ``CONCURRENT_UNIT_SPREAD`` threads, so that hundreds of calls in flight make full
    units (two records and two latencies each) rather than hundreds of small ones, each holding a thread.
    """
    if microsecond_calls:
        workers = min(config.io_threads, 2 * (os.cpu_count() or 1))
        per_worker = file_count // (workers * 4) + 1
        return max(1, min(config.rename_batch_size * MICROSECOND_UNIT_FACTOR, per_worker))
    if concurrent_calls:
        per_thread = file_count // min(config.io_threads, CONCURRENT_UNIT_SPREAD) + 1
    else:
        per_thread = file_count // (config.io_threads * 4) + 1
    return max(1, min(config.rename_batch_size, per_thread))


class RenameFilesStage(Stage[RenameFilesArguments, RenameFilesResult]):
    """Rename each file from its task attempt directory to its destination, one journaled unit at a time.

    A rename never replaces what it finds (the store's ``rename_file`` refuses). Whether a file already at a
    destination is this job's is decided by the journal (``stages/journal.py``), never by its size: rows that an
    earlier run recorded as moved count as done without a store call; rows in doubt (that run died mid-unit)
    count as done if the evidence shows this job's rename took effect; anything else at a destination is a
    conflict, unless ``delete.target.files`` says to replace it, and a missing source is an error. A vanished
    parent directory is recreated. Transient store errors are retried inside the unit of work, and a rename
    that took effect before its error is recognised as ``commit_file_rename_recovered``.
    Postcondition: every listed file is at its destination, no longer at its source, and recorded as this
    job's; on failure, each unit's record says which of its rows moved.
    """

    name = JOB_STAGE_RENAME_FILES

    def execute(self, arguments: RenameFilesArguments) -> RenameFilesResult:
        self._arguments = arguments
        result = RenameFilesResult()
        smallest: list[str] = []
        moved = 0
        journal = Journal(self, arguments.journal)
        report = _ProgressReport(arguments.progress, arguments.entry_file.file_count)
        report(0)

        def absorb(batch: _BatchResult) -> None:
            nonlocal smallest, moved
            moved += batch.directories_moved
            result.files_committed += batch.files
            result.bytes_committed += batch.bytes
            result.already_committed += batch.already_committed
            result.recovered += batch.recovered
            self.stats.add_accumulator(batch.durations)
            smallest = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, smallest + batch.filenames)
            report(result.files_committed)

        try:
            run_bounded(
                self.context.pool,
                arguments.entry_file.units(journal.unit_size),
                lambda unit: self._rename_unit(journal, unit),
                max_in_flight=self._units_in_flight(journal.unit_size),
                on_result=absorb,
            )
        finally:
            if result.recovered:
                self.stats.increment(COMMIT_FILE_RENAME_RECOVERED, result.recovered)
            if result.already_committed:
                self.stats.increment(COMMITTER_FILES_ALREADY_COMMITTED, result.already_committed)
            if moved:
                self.stats.increment(COMMITTER_DIRECTORIES_MOVED, moved)
        result.first_filenames = smallest
        if result.recovered:
            log.warning("%s: %d renames failed but had taken effect; recovered", self.name, result.recovered)
        return result

    def _units_in_flight(self, size: int) -> int:
        """Units queued at once. Where a unit's renames go out together under ``call_slots``, a unit a thread
        would leave hundreds of threads waiting on the slots, each wake-up costing CPU: units asking for
        ``CONCURRENT_DEMAND`` times the slots keep them all busy through the units' journal writes with a few
        dozen threads, at half the CPU a call and as fast a commit. Where directories are
        moved in on local disk, one unit at a time: moves across directories take one lock of the file system in
        the kernel, and more threads only contend for it and the GIL: they take longer than one."""
        if self._arguments.moved_in and self.capabilities.microsecond_calls:
            return 1
        if self.context.call_slots is None:
            return self.context.max_in_flight
        wanted = -(-CONCURRENT_DEMAND * self.config.io_threads // max(1, size))
        return max(2, min(self.context.max_in_flight, wanted))

    def _rename_unit(self, journal: Journal, unit: RenameUnit) -> _BatchResult:
        batch = _BatchResult()
        rows = unit.rows
        history = journal.history(unit)
        if history.ours_below >= len(rows):  # all moved by an earlier run: nothing to do, nothing to record
            for row in rows:
                batch.files += 1
                batch.bytes += row.size
                batch.filenames.append(row.dest_url)
            batch.already_committed = len(rows)
            batch.filenames = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, batch.filenames)
            return batch
        journal.begin(unit)
        if self.capabilities.concurrent_calls:
            return self._rename_at_once(journal, unit, history, batch)
        rename = self.rename_file_fast
        moved_in = self._arguments.moved_in
        durations = batch.durations
        record = durations.record
        clock = time.perf_counter
        ours_below = history.ours_below  # rows below it were moved by an earlier run (``recorded_ours``)
        index = 0
        try:
            for index, row in enumerate(rows):
                if index < ours_below:
                    batch.already_committed += 1
                    continue
                start = clock()
                try:
                    if moved_in and row.dest.rpartition("/")[0] in moved_in and self._move_parent(row):
                        batch.directories_moved += 1
                    else:
                        rename(row.source, row.dest)
                except Exception as error:
                    try:
                        outcome = self._rename_slow_path(row, error, history.in_doubt(index))
                    except BaseException:
                        durations.failures += 1
                        self.stats.add_accumulator(durations)  # the batch's result is lost with the error
                        raise
                    if outcome is RenameOutcome.ALREADY_COMMITTED:
                        batch.already_committed += 1
                    elif outcome is RenameOutcome.RECOVERED:
                        batch.recovered += 1
                record(int((clock() - start) * 1000))
        except _NotMovableError as failure:
            self._finish_after_failure(journal, unit, index, not_movable=True)
            raise failure.error from failure.__cause__
        except BaseException:
            self._finish_after_failure(journal, unit, index, not_movable=False)
            raise
        journal.finish(unit, len(rows))
        batch.files = len(rows)
        batch.bytes = sum(row.size for row in rows)
        batch.filenames = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, [row.dest_url for row in rows])
        return batch

    def _rename_at_once(
        self, journal: Journal, unit: RenameUnit, history: UnitHistory, batch: _BatchResult
    ) -> _BatchResult:
        """The unit's renames in flight together (a store with ``concurrent_calls``); the failed ones are then
        settled one by one, in row order, on the slow path.

        Rows after the first that could not be settled may have moved too, so the ``done`` record lists them
        (``alsoOurs``, ``alsoInDoubt``). An interrupt while the batch is in flight writes no record: the unit
        stays in doubt from its intent, and evidence decides each row.
        """
        rows = unit.rows
        pending = [index for index in range(len(rows)) if not history.recorded_ours(index)]
        batch.already_committed = len(rows) - len(pending)
        durations = batch.durations
        stopped_at: int | None = None
        stopping_error: BaseException | None = None
        not_movable = False
        also_ours: list[int] = []
        also_in_doubt: list[int] = []
        while pending and stopped_at is None:
            outcomes = self.rename_files_fast(
                [(rows[index].source, rows[index].dest) for index in pending],
                durations.record,
                [self._hint(rows[index]) for index in pending],
            )
            for index, error in zip(pending, outcomes, strict=False):
                if error is not None:
                    try:
                        outcome = self._rename_slow_path(rows[index], error, history.in_doubt(index))
                    except _NotMovableError as failure:
                        durations.failures += 1
                        if stopped_at is None:
                            stopped_at, stopping_error, not_movable = index, failure, True
                        continue
                    except Exception as failure:
                        durations.failures += 1
                        if stopped_at is None:
                            stopped_at, stopping_error = index, failure
                        else:
                            also_in_doubt.append(index)
                        continue
                    if outcome is RenameOutcome.ALREADY_COMMITTED:
                        batch.already_committed += 1
                    elif outcome is RenameOutcome.RECOVERED:
                        batch.recovered += 1
                if stopped_at is not None:
                    also_ours.append(index)
            pending = pending[len(outcomes) :]
        if stopped_at is None:
            journal.finish(unit, len(rows))
            batch.files = len(rows)
            batch.bytes = sum(row.size for row in rows)
            batch.filenames = heapq.nsmallest(SUCCESS_FILENAME_LIMIT, [row.dest_url for row in rows])
            return batch
        self.stats.add_accumulator(durations)  # the batch's result is lost with the error
        self._finish_after_failure(
            journal, unit, stopped_at, not_movable=not_movable, also_ours=also_ours, also_in_doubt=also_in_doubt
        )
        assert stopping_error is not None
        if isinstance(stopping_error, _NotMovableError):
            raise stopping_error.error from stopping_error.__cause__
        raise stopping_error

    def _move_parent(self, row: FileToCommit) -> bool:
        """Move ``row``'s source directory to its destination directory, if the source holds that file alone
        (``directory_moves``); ``False``: it holds something else too, and the file is renamed as any other.
        Errors are those of a rename of the file: ``FileNotFoundError`` when the source is gone,
        ``FileExistsError`` when something took the destination's directory after the probe."""
        source_dir, _, name = row.source.rpartition("/")
        return self.move_dir_holding_fast(source_dir, name, row.dest.rpartition("/")[0])

    def _hint(self, row: FileToCommit) -> RenameHint:
        """What the job knows of a row's rename: the etag its task listed, and whether its destination is clear."""
        arguments = self._arguments
        parent = row.dest.rpartition("/")[0]
        clear = parent in arguments.clear_directories and row.dest not in arguments.job_directories
        return RenameHint(row.etag, clear)

    def _finish_after_failure(
        self,
        journal: Journal,
        unit: RenameUnit,
        index: int,
        *,
        not_movable: bool,
        also_ours: list[int] | None = None,
        also_in_doubt: list[int] | None = None,
    ) -> None:
        """Record how far a failed unit got; a failure to record is logged, so the original error is raised."""
        try:
            journal.finish(
                unit, index, not_movable=not_movable, also_ours=also_ours or (), also_in_doubt=also_in_doubt or ()
            )
        except Exception as error:
            log.warning(
                "Could not record the renames of unit %s of job %s (they stay in doubt): %s",
                unit.key,
                self.paths.job_id,
                error,
            )

    def _rename_slow_path(self, row: FileToCommit, error: Exception, in_doubt: bool) -> RenameOutcome:
        """Settle a rename that raised, or raise (``_NotMovableError`` when the row was certainly not moved)."""
        source, dest = row.source, row.dest
        if isinstance(error, FileExistsError):
            return self._resolve_existing(row, in_doubt)
        if isinstance(error, FileNotFoundError):
            if self.info(source) is None:
                if in_doubt and evidence(self, row) is Evidence.MOVED:
                    log.debug("%s: already committed by an earlier run of this job commit", row.dest_url)
                    return RenameOutcome.ALREADY_COMMITTED
                found = self.info(dest)
                held = "nothing" if found is None else ("a directory" if found.is_dir else "a file it did not put")
                raise _NotMovableError(
                    CommitterError(
                        f"{row.dest_url}: cannot commit: source {self.to_url(source)} is missing and the "
                        f"destination holds {held} (was the task attempt directory deleted?)"
                    )
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
            # One unit, retried as a whole: the calls inside are tried once each. This process issued the
            # failed rename, so the row is in doubt and the evidence decides.
            nonlocal outcome
            if evidence(self, row, retry=False) is Evidence.MOVED:
                outcome = RenameOutcome.RECOVERED  # the failed call had moved the file
                return
            try:
                self.rename_file(source, dest, retry=False)
            except FileNotFoundError:
                if self.info(source, retry=False) is None:
                    raise
                # The destination's directory is missing: one left for a directory to be moved in, whose move
                # failed, or one that vanished. Made, and the file renamed into it.
                self.mkdirs(posixpath.dirname(dest))
                self.rename_file(source, dest, retry=False)

        log.info("Rename of %s failed with a transient error, retrying: %s", row.dest_url, describe_error(error))
        self.stats.increment(STORE_IO_RETRY)  # the retry policy counts only the retries after this one
        try:
            self.context.store_retry.call(attempt, f"{OP_RENAME} {dest}")
        except FileExistsError:
            return self._resolve_existing(row, in_doubt=True)
        return outcome

    def _resolve_existing(self, row: FileToCommit, in_doubt: bool) -> RenameOutcome:
        source, dest = row.source, row.dest
        found = self.info(dest)
        if found is None:  # gone in between; try again once
            self.rename_file(source, dest)
            return RenameOutcome.RENAMED
        if in_doubt:
            proof = evidence(self, row)
            if proof is Evidence.MOVED:
                return RenameOutcome.ALREADY_COMMITTED
            if proof is Evidence.COPIED:
                # A copy-then-delete rename of this job that copied but did not delete: finish it.
                self.delete_file(source)
                return RenameOutcome.RECOVERED
            if proof is Evidence.FAILED_COPY:
                # What a failed copy of this job's rename left (no file of use): deleted, and the file renamed.
                self.delete_file(dest)
                self.rename_file(source, dest)
                return RenameOutcome.RENAMED
        if not self.config.delete_target_files:
            what = "a directory" if found.is_dir else f"a file of {found.size} bytes"
            raise _NotMovableError(
                OutputConflictError(
                    f"{row.dest_url}: destination already holds {what} that this job did not write; "
                    "nothing was overwritten (set mapreduce.manifest.committer.delete.target.files=true to "
                    "replace it)"
                )
            )
        if self.info(source) is None:
            missing = f"{row.dest_url}: cannot commit: source {self.to_url(source)} is missing"
            raise _NotMovableError(CommitterError(missing))
        # delete.target.files means "replace": the file found is deleted for good, even if the job aborts.
        log.info("Replacing %s (delete.target.files)", row.dest_url)
        if found.is_dir:
            self.delete_dir(dest)
        else:
            self.delete_file(dest)
        self.rename_file(source, dest)
        return RenameOutcome.RENAMED
