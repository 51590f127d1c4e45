"""What every stage shares: the runtime context, run-once, timing, statistics and wrapped store calls."""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ..background import BackgroundWork
from ..config import CommitterConfig
from ..errors import CommitterError, JobStateError, UnsupportedStoreError
from ..iostatistics import StatisticsStore, elapsed_ms
from ..parallel import CALLS_A_BATCH, CallSlots, run_bounded, slices
from ..paths import JobPaths
from ..retry import DEFINITE_ERRORS, RetryPolicy
from ..statistic_names import (
    COMMIT_FILE_RENAME,
    OP_ABORT_UPLOAD,
    OP_COMPLETE_UPLOAD,
    OP_DELETE,
    OP_DELETE_DIR,
    OP_GET_FILE_STATUS,
    OP_LIST_STATUS,
    OP_LIST_UPLOADS,
    OP_LOAD_FILE,
    OP_MKDIRS,
    OP_PUT_IF_ABSENT,
    OP_RENAME,
    OP_SAVE_FILE,
)
from ..store import FileStatus, StoreCapabilities, StoreOperations
from ..store.operations import NO_HINTS, RenameHint
from ..store.pending_upload import PendingUpload
from ..store.s3 import IncompleteUpload, UploadStore

log = logging.getLogger(__name__)

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
T = TypeVar("T")


@dataclass
class StageContext:
    """Runtime state shared by the stages of one committer call; never pickled (the config is what travels).

    ``store`` is handed to the stage base only: stages reach the store through the base's gated calls.
    """

    config: CommitterConfig
    store: StoreOperations
    paths: JobPaths
    stats: StatisticsStore = field(default_factory=StatisticsStore)
    pool: Executor | None = None
    job_id_source: str = "JobID"
    task_attempt_id: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    """The destination's options, for the few stores a stage opens beside it (diagnostics copies)."""
    active_stage: str = ""
    background: BackgroundWork | None = None
    """Where a job commit's cleanup starts its background delete (the committer's); ``None``: delete in place."""
    store_retry: RetryPolicy = field(init=False)
    save_retry: RetryPolicy = field(init=False)
    call_slots: CallSlots | None = field(init=False, default=None)
    """Where one thread may put several calls in flight (``concurrent_calls``), what bounds all of them at
    ``io.threads``; ``None`` elsewhere, where the pool's threads bound them."""
    _checked_store: StoreOperations | None = field(init=False, default=None, repr=False)
    _upload_store: UploadStore | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        capabilities = self.store.capabilities
        if capabilities.concurrent_calls and not capabilities.microsecond_calls:
            self.call_slots = CallSlots(self.config.io_threads)
        self.store_retry = RetryPolicy(
            attempts=self.config.store_retry_attempts,
            initial_wait=self.config.store_retry_interval,
            is_retryable=self.store.is_transient,
            stats=self.stats,
            max_wait=self.config.store_retry_max_wait,
            max_time=self.config.store_retry_max_time,
        )
        # A save is retried as a whole (write the temp file, rename it into place) up to manifest.save.attempts
        # times; the calls inside are tried once each, so the attempts do not multiply.
        self.save_retry = RetryPolicy(
            attempts=self.config.manifest_save_attempts,
            initial_wait=self.config.save_retry_interval,
            is_retryable=self._save_may_succeed_later,
            stats=self.stats,
        )

    @property
    def upload_store(self) -> UploadStore | None:
        """``store`` if it has multipart uploads (S3), else ``None``; decided once per store, because
        ``UploadStore`` is a runtime-checkable protocol and ``isinstance`` probes each of its methods, too
        slow to pay on every upload call."""
        store = self.store
        if store is not self._checked_store:
            self._upload_store = store if isinstance(store, UploadStore) else None
            self._checked_store = store
        return self._upload_store

    def _save_may_succeed_later(self, error: BaseException) -> bool:
        if self.store.is_transient(error):
            return True
        return isinstance(error, OSError) and not isinstance(error, DEFINITE_ERRORS)

    @property
    def max_in_flight(self) -> int:
        """Units of work queued on the pool at once: enough to keep every thread busy, never the whole job.

        On stores whose calls take microseconds the GIL is the bottleneck, so two units per core are in flight:
        more threads only contend for the GIL and make a local commit slower.
        """
        if self.store.capabilities.microsecond_calls:
            return min(self.config.io_threads, 2 * (os.cpu_count() or 1))
        return self.config.io_threads + self.config.writer_queue_capacity


class Stage(ABC, Generic[ArgT, ResultT]):
    """One step of the protocol, applied once; subclasses implement ``execute`` only."""

    name: ClassVar[str]
    """The statistic and diagnostic name of the stage, as Hadoop names it."""

    def __init__(self, context: StageContext) -> None:
        self.context = context
        self._store = context.store  # private: every call goes through the gated methods below (docs/architecture.md)
        self.paths = context.paths
        self.config = context.config
        self.stats = context.stats
        self._applied = False

    def apply(self, arguments: ArgT) -> ResultT:
        """Run the stage: once only, timed into the statistic ``name``, logged at INFO."""
        if self._applied:
            raise JobStateError(f"stage {self.name} of job {self.paths.job_id} attempted twice")
        self._applied = True
        self.context.active_stage = self.name
        stage_log = logging.getLogger(type(self).__module__)
        stage_log.info("%s: starting (job %s)", self.name, self.paths.job_id)
        start = time.perf_counter()
        with self.stats.track(self.name):
            result = self.execute(arguments)
        stage_log.info("%s: finished in %.3f s", self.name, time.perf_counter() - start)
        return result

    @abstractmethod
    def execute(self, arguments: ArgT) -> ResultT:
        """The stage's own work."""

    # --- what the store says about paths, without calling it ---------------------------------------------------

    @property
    def capabilities(self) -> StoreCapabilities:
        return self._store.capabilities

    def to_url(self, path: str) -> str:
        """The percent-encoded URL of a store path, as manifests, ``_SUCCESS`` and error messages give it."""
        return self._store.to_url(path)

    def from_url(self, url: str) -> str:
        """The store path of a URL; ``ValueError`` for a URL of another store."""
        return self._store.from_url(url)

    def is_transient(self, error: BaseException) -> bool:
        return self._store.is_transient(error)

    def is_auth_error(self, error: BaseException) -> bool:
        return self._store.is_auth_error(error)

    @property
    def credential_sources(self) -> str:
        """Where the store's credentials come from (options, environment variables), for error messages."""
        return self._store.credential_sources

    def same_content(self, first: FileStatus, second: FileStatus) -> bool:
        return self._store.same_content(first, second)

    # --- the gate: every store call, timed under Hadoop's op_* names and retried when transient -----------------

    def call(self, statistic: str, function: Callable[[], T], path: str = "", *, retry: bool = True) -> T:
        """A store call timed as ``statistic``; transient errors are retried inside the timing.

        ``retry=False`` for a call inside a unit that is itself retried as a whole (a save, a rename settled
        from evidence), so that one policy governs each call. ``path`` names it in retry warnings.
        """
        stats = self.stats
        slots = self.context.call_slots
        if slots is not None:
            slots.take(1)
        start = time.perf_counter()  # as ``stats.track``, without a generator per call (the gate is hot)
        try:
            result = (
                function() if not retry else self.context.store_retry.call(function, f"{statistic} {path}".rstrip())
            )
        except BaseException:
            stats.add_duration(statistic, elapsed_ms(start), failed=True)
            raise
        finally:
            if slots is not None:
                slots.give(1)
        stats.add_duration(statistic, elapsed_ms(start))
        return result

    def info(self, path: str, *, retry: bool = True) -> FileStatus | None:
        return self.call(OP_GET_FILE_STATUS, lambda: self._store.info(path), path, retry=retry)

    def list_dir(self, path: str) -> list[FileStatus]:
        return self.call(OP_LIST_STATUS, lambda: self._store.list_dir(path), path)

    def is_failed_copy(self, source: str, dest: str, *, retry: bool = True) -> bool:
        return self.call(OP_GET_FILE_STATUS, lambda: self._store.is_failed_copy(source, dest), dest, retry=retry)

    def mkdirs(self, path: str) -> None:
        self.call(OP_MKDIRS, lambda: self._store.mkdirs(path), path)

    def read_bytes(self, path: str, statistic: str = OP_LOAD_FILE) -> bytes:
        return self.call(statistic, lambda: self._store.read_bytes(path), path)

    def read_files(self, paths: Sequence[str], statistic: str = OP_LOAD_FILE) -> list[bytes]:
        """Whole files in order, as many reads in flight at once as ``call_slots`` has free (one call, where the
        store has ``concurrent_calls``), each timed as ``statistic``. A read that failed is made again through
        ``read_bytes``: the retry policy decides, and a second failure is raised."""
        return self._each_in_slots(
            paths, self._store.read_files, statistic, lambda path: self.read_bytes(path, statistic), "reads"
        )

    def read_each(
        self, items: Sequence[T], path_of: Callable[[T], str], statistic: str, on_read: Callable[[T, bytes], None]
    ) -> None:
        """Read the file of every item: on the job's pool, or in this thread where calls take microseconds; a call
        (and a thread) for every ``CALLS_A_BATCH`` where the store puts a batch in flight at once
        (``concurrent_calls``). ``on_read(item, data)`` runs in this thread as each read comes back: parsing is
        under the GIL, where the pool's threads would only contend."""
        pool = None if self.capabilities.microsecond_calls else self.context.pool
        in_flight = self.context.max_in_flight
        if pool is not None and self.capabilities.concurrent_calls:

            def read_batch(batch: Sequence[T]) -> list[tuple[T, bytes]]:
                return list(zip(batch, self.read_files([path_of(item) for item in batch], statistic), strict=True))

            def take_batch(reads: list[tuple[T, bytes]]) -> None:
                for item, data in reads:
                    on_read(item, data)

            run_bounded(pool, slices(items, CALLS_A_BATCH), read_batch, max_in_flight=in_flight, on_result=take_batch)
        else:
            run_bounded(
                pool,
                items,
                lambda item: (item, self.read_bytes(path_of(item), statistic)),
                max_in_flight=in_flight,
                on_result=lambda read: on_read(*read),
            )

    def _each_in_slots(
        self,
        paths: Sequence[str],
        send: Callable[[Sequence[str]], Sequence[T | Exception]],
        statistic: str,
        again: Callable[[str], T],
        what: str,
    ) -> list[T]:
        """The answers of a batch call over ``paths`` made in rounds of free slots (``_in_slots``), each call timed
        as ``statistic``; ``again(path)`` for each that failed, through the gate and its retry policy."""
        elapsed: list[int] = []
        answers: list[T | Exception] = []
        for answered in self._in_slots(
            len(paths),
            lambda start, end: send(paths[start:end]),
            lambda start: f"{self.to_url(paths[start])}: the store answered",
            what,
            elapsed.append,
        ):
            answers += answered
        results: list[T] = []
        for path, answer, milliseconds in zip(paths, answers, elapsed, strict=True):
            if isinstance(answer, Exception):
                self.stats.add_duration(statistic, milliseconds, failed=True)
                results.append(again(path))
            else:
                self.stats.add_duration(statistic, milliseconds)
                results.append(answer)
        return results

    def list_dir_if_present(self, path: str) -> list[FileStatus] | None:
        """A listing where absence is an answer: ``None``, timed without counting a failure (as
        ``read_bytes_if_present``)."""

        def listing() -> list[FileStatus] | None:
            try:
                return self._store.list_dir(path)
            except (FileNotFoundError, NotADirectoryError):
                return None

        return self.call(OP_LIST_STATUS, listing, path)

    def read_bytes_if_present(self, path: str, statistic: str = OP_LOAD_FILE) -> bytes | None:
        """A read where absence is an answer (a record not written yet), not a failure: ``None``, and the call
        is timed without counting ``<statistic>.failures``, which on-call people read as errors."""

        def read() -> bytes | None:
            try:
                return self._store.read_bytes(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                return None

        return self.call(statistic, read, path)

    def write_bytes(self, path: str, data: bytes, *, retry: bool = True) -> None:
        self.call(OP_SAVE_FILE, lambda: self._store.write_bytes(path, data), path, retry=retry)

    def rename_file(self, source: str, dest: str, *, retry: bool = True) -> None:
        """Rename that never overwrites (the store's promise); ``FileExistsError`` if ``dest`` is taken."""
        self.call(OP_RENAME, lambda: self._store.rename_file(source, dest), dest, retry=retry)

    def rename_file_fast(self, source: str, dest: str) -> None:
        """One untimed, unretried rename attempt: the hot loop of a job commit, which times its renames in a
        per-batch accumulator and settles any error in its slow path through the calls above."""
        self._store.rename_file(source, dest)

    def move_dir_holding_fast(self, source: str, name: str, dest: str) -> bool:
        """One untimed, unretried ``StoreOperations.move_dir_holding``: the hot loop's move of a directory in place
        of its one file, settled as that file's rename."""
        return self._store.move_dir_holding(source, name, dest)

    def info_fast(self, path: str) -> FileStatus | None:
        """One untimed, unretried probe, for the hot loop beside ``rename_file_fast``."""
        return self._store.info(path)

    def rename_files_fast(
        self,
        pairs: Sequence[tuple[str, str]],
        record: Callable[[int], None],
        hints: Sequence[RenameHint | None] = NO_HINTS,
    ) -> list[Exception | None]:
        """Unretried rename attempts, as many in flight at once as ``call_slots`` has free (the whole batch if no
        slots bound it); an outcome per pair tried: ``None`` moved, else the error to settle. After a round of
        calls with an error no more are started, so the list may be shorter than ``pairs``. ``record`` gets each
        call's milliseconds (a batch's calls take as long as the batch), not the wait for slots. ``hints``
        (empty, or one per pair) tell the store what the job knows of each rename (``RenameHint``)."""
        outcomes: list[Exception | None] = []
        rounds = self._in_slots(
            len(pairs),
            lambda start, end: self._store.rename_files(pairs[start:end], hints[start:end]),
            lambda start: f"{self.to_url(pairs[start][1])}: the store answered",
            "renames",
            record,
        )
        for answered in rounds:
            outcomes += answered
            if any(outcome is not None for outcome in answered):
                break
        return outcomes

    def _in_slots(
        self,
        total: int,
        send: Callable[[int, int], Sequence[T]],
        who: Callable[[int], str],
        what: str,
        record: Callable[[int], None],
    ) -> Iterator[Sequence[T]]:
        """The rounds of a fast batch call over ``total`` items: each round ``send(start, end)`` gets as many as
        ``call_slots`` has free (all that are left if no slots bound the calls), and its slots are given back
        before its answers (one per item, else a ``CommitterError`` starting with ``who(start)``) are yielded.
        ``record`` gets each item's milliseconds (a round's items take as long as the round)."""
        slots = self.context.call_slots
        done = 0
        while done < total:
            taken = total - done if slots is None else slots.take(total - done)
            start = time.perf_counter()
            try:
                answered = send(done, done + taken)
            finally:
                if slots is not None:
                    slots.give(taken)
            if len(answered) != taken:
                raise CommitterError(f"{who(done)} {len(answered)} of {taken} {what}")
            elapsed = elapsed_ms(start)
            for _ in range(taken):
                record(elapsed)
            done += taken
            yield answered

    def rename_dir(self, source: str, dest: str) -> None:
        """Move a tree in one call, never onto anything (only where ``capabilities.directory_rename``)."""
        self.call(OP_RENAME, lambda: self._store.rename_dir(source, dest), dest)

    def delete_file(self, path: str, *, retry: bool = True) -> bool:
        return self.call(OP_DELETE, lambda: self._store.delete_file(path), path, retry=retry)

    def delete_file_below(self, path: str, *, retry: bool = True) -> bool:
        """``delete_file`` of a path below the destination named by untrusted state (a marker, a record), never
        through a symbolic link out of it (``StoreOperations.delete_file_below``: ``LinkInPathError``)."""
        root = self.paths.dest
        return self.call(OP_DELETE, lambda: self._store.delete_file_below(root, path), path, retry=retry)

    def delete_dir(self, path: str, *, retry: bool = True) -> bool:
        return self.call(OP_DELETE_DIR, lambda: self._store.delete_dir(path), path, retry=retry)

    def delete_dirs(self, paths: Sequence[str]) -> list[bool]:
        """``delete_dir`` of each path, as many in flight at once as ``call_slots`` has free (one call, where the
        store has ``concurrent_calls``); a delete that failed is made again through ``delete_dir``, whose error,
        if it fails again, is raised."""
        return self._each_in_slots(paths, self._store.delete_dirs, OP_DELETE_DIR, self.delete_dir, "deletes")

    def remove_empty_dir(self, path: str) -> bool:
        return self.call(OP_DELETE_DIR, lambda: self._store.remove_empty_dir(path), path)

    # --- the upload protocol's S3 calls (``store/s3.py``), gated as every other call --------------------------

    def _uploads(self, path: str) -> UploadStore:
        store = self.context.upload_store
        if store is None:
            raise UnsupportedStoreError(f"{self.to_url(path)}: this store has no multipart uploads (S3 only)")
        return store

    def put_if_absent(self, path: str, data: bytes, *, retry: bool = True) -> str:
        """Create ``path`` holding ``data``, never replacing an object (``FileExistsError``); returns its ETag."""
        return self.call(OP_PUT_IF_ABSENT, lambda: self._uploads(path).put_if_absent(path, data), path, retry=retry)

    def complete_upload(self, pending: PendingUpload) -> str:
        """Publish a pending upload at its key, never replacing an object; repeatable (``S3Store.complete_upload``)."""
        store = self._uploads(pending.path)
        return self.call(OP_COMPLETE_UPLOAD, lambda: store.complete_upload(pending), pending.path)

    def complete_uploads_fast(
        self, uploads: Sequence[PendingUpload], record: Callable[[int], None]
    ) -> list[str | Exception]:
        """Unretried completions in flight together (as many as ``call_slots`` has free, where slots bound the calls;
        else the whole batch, which the caller sizes); an outcome per upload: its ETag, or the error for
        ``complete_upload`` to settle. ``record`` gets each call's milliseconds (a batch's calls take as long as
        the batch), not the wait for slots."""
        if not uploads:
            return []
        store = self._uploads(uploads[0].path)
        rounds = self._in_slots(
            len(uploads),
            lambda start, end: store.complete_uploads(uploads[start:end]),
            lambda start: f"s3://{uploads[start].path}: the store answered",
            "completions",
            record,
        )
        return [outcome for answered in rounds for outcome in answered]

    def holds(self, pending: PendingUpload) -> str | None:
        """The ETag of the object at ``pending``'s key if it is provably that upload's, ``None`` if provably not."""
        store = self._uploads(pending.path)
        return self.call(OP_GET_FILE_STATUS, lambda: store.holds(pending), pending.path)

    def abort_upload(self, path: str, upload_id: str) -> bool:
        """Abort one multipart upload; ``False`` if it was gone already."""
        return self.call(OP_ABORT_UPLOAD, lambda: self._uploads(path).abort_upload(path, upload_id), path)

    def list_uploads(self, prefix: str) -> list[IncompleteUpload]:
        """The incomplete multipart uploads whose key starts with ``prefix``, every page."""
        return self.call(OP_LIST_UPLOADS, lambda: self._uploads(prefix).list_uploads(prefix), prefix)

    def save_file_atomically(self, make_bytes: Callable[[], bytes], temp: str, final: str, statistic: str) -> None:
        """Write ``temp``, then rename it over ``final``, retried as a whole up to ``manifest.save.attempts`` times.

        ``make_bytes`` is called on every attempt so the saved document counts earlier failed attempts.
        Any file at ``final`` is replaced: the last attempt to save wins, as in Hadoop.
        """

        def attempt() -> None:
            with self.stats.track(statistic):
                data = make_bytes()
                self.delete_dir(temp, retry=False)  # a leftover file or even a directory at temp
                self.write_bytes(temp, data, retry=False)
                with self.stats.track(COMMIT_FILE_RENAME):
                    self.delete_file(final, retry=False)
                    self.rename_file(temp, final, retry=False)

        self.context.save_retry.call(attempt, f"{statistic} {final}")
