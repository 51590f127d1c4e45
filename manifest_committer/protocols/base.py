"""``CommitterBase``: the seam every commit protocol shares, and ``TaskAttempt``.

A protocol is a small set of stages (``stages/<protocol>/``) that a subclass of ``CommitterBase`` declares, with
the arguments each stage takes. The base runs them and owns everything that must not differ between protocols:
id checks, opening the store (with the test hook ``store_wrapper``), the ``io.rate`` limit, the one thread pool
of a job call, the ``StageContext`` of each call (statistics, retry policies, the store gate), the failure and
summary reports of ``summary.report.directory``, the log lines, and the ``close()`` / context-manager life
cycle. ``registry.py`` names the protocols and builds their committers (``create_committer``).
"""

from __future__ import annotations

import copy
import functools
import logging
import pickle
import posixpath
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self

from typing_extensions import TypeVar

from ..background import BackgroundWork
from ..config import MANIFEST_PREFIX, CommitterConfig
from ..errors import CommitterError, ConfigError
from ..iostatistics import StatisticsStore
from ..manifest import TaskManifest
from ..paths import JobPaths, check_id
from ..retry import RetryPolicy
from ..stages.base import Stage, StageContext
from ..statistic_names import COMMITTER_WORKER_PROCESS_START, JOB_STAGE_ABORT, OP_DELETE, STORE_IO_RATE_LIMITED
from ..store import OpenedStore, StoreOperations, open_store, store_bindings
from ..store.operations import use_client_calls_only
from ..store.rate_limit import RateLimitedStore, TokenBucket
from ..store.workers import WorkerDispatchStore, WorkerPool, WorkerSetup
from ..store.workers.setup import effective_storage_options
from ..success_data import SuccessData
from .names import ProtocolName

log = logging.getLogger(__name__)

SUMMARY_FILENAME_FORMAT = "summary-{job_id}.json"

R = TypeVar("R")
CommitT_co = TypeVar("CommitT_co", bound="JobCommitOutcome", default="JobCommitOutcome", covariant=True)
"""What the protocol's job commit stage returns."""
AbortT_co = TypeVar("AbortT_co", default=object, covariant=True)
"""What the protocol's job abort stage returns."""


@dataclass(frozen=True, slots=True)
class TaskAttempt:
    """One task attempt's identity and private working directory.

    ``work_path`` is a path usable with ``fs`` as it is (not percent-encoded); ``fs`` creates missing parent
    directories when a file is opened for writing.
    """

    task_id: str
    attempt_id: str
    work_path: str
    fs: Any
    work_url: str


class JobCommitOutcome(Protocol):
    """What every protocol's job commit stage returns: the summary and the figures of the log line."""

    @property
    def success(self) -> SuccessData: ...

    @property
    def already_committed(self) -> bool:
        """The commit point had passed before this call: it only finished the cleanup."""
        ...

    @property
    def files_committed(self) -> int: ...

    @property
    def tasks_committed(self) -> int: ...

    @property
    def details(self) -> str:
        """What the protocol's log line adds (``""``, or ``"; 3 uploads of other attempts aborted"``)."""
        ...


class TaskCommitOutcome(Protocol):
    """What every protocol's task commit stage returns: the manifest of what the attempt committed."""

    @property
    def manifest(self) -> TaskManifest: ...


@dataclass(frozen=True, slots=True)
class ReplacingCommit:
    """The outcome of ``commit_job_replacing``: the job's summary and how many replaced files left sight."""

    success: SuccessData
    replaced: int
    """Replaced files this call deleted (rename protocols) or listed as ``removed`` (transactional)."""


@dataclass(frozen=True, slots=True)
class _JobCall(Generic[R]):
    result: R
    context: StageContext


class CommitterBase(ABC, Generic[CommitT_co, AbortT_co]):
    """The machinery every protocol's committer shares; a subclass declares the protocol's stages and hooks.

    Any call may run in another process or machine on a committer built with the same destination, job id and
    attempt: nothing but the store links them. A committer holds a cloud client: ``close()`` it, or use it as a
    context manager, when done.

    A protocol declares a stage class for each call (``setup_job_stage`` ... ``abort_job_stage``) and the
    arguments each is applied to (``_setup_job_arguments`` ...); the hooks ``_job_started``, ``_commit_starting``
    and ``_job_ending`` run around the job's life (the marker protocols start and stop their marker server and
    lease there).
    """

    protocol: ClassVar[ProtocolName]
    """The protocol's name, as ``create_committer`` takes it."""
    committer_name: ClassVar[str]
    """What ``_SUCCESS`` and the summary reports hold in their ``committer`` field."""
    task_writes_in_place: ClassVar[bool] = False
    """True where a task's files go straight to their final place (transactional, upload): a writer must then
    open each file at ``task.work_path + "/" + <its destination-relative path>``, and ``commit_task``'s
    ``outputs`` can select files but not rename them. Opening files that way works under every protocol."""
    job_hosts_marker_server: ClassVar[bool] = False
    """True where ``setup_job`` starts a marker server (batched write markers: transactional, upload) that lives in
    the committer's process until the job ends: an engine whose driver-side code runs in a short-lived worker
    (Spark's Python data source) must then use direct markers, or set the job up in a process that stays."""
    job_commit_makes_batches: ClassVar[bool] = False
    """True where the job commit makes its per-file store calls in batches (``rename_files``,
    ``complete_uploads``): those are what ``io.processes`` worker processes make."""
    task_commit_publishes: ClassVar[bool] = False
    """True where ``commit_task`` makes the task's files visible in the destination (``v2``): an engine whose
    commit coordinator decides after the task ran (Spark's data source) must then run the task commit itself,
    for the accepted attempt only, or a speculative duplicate publishes too."""

    setup_job_stage: ClassVar[type[Stage[Any, Any]]]
    setup_task_stage: ClassVar[type[Stage[Any, Any]] | None] = None
    """``None`` where a task attempt has nothing to create (its files go to their final names)."""
    commit_task_stage: ClassVar[type[Stage[Any, Any]]]
    abort_task_stage: ClassVar[type[Stage[Any, Any]]]
    commit_job_stage: ClassVar[type[Stage[Any, Any]]]
    abort_job_stage: ClassVar[type[Stage[Any, Any]]]

    def __init__(
        self,
        destination: str,
        job_id: str,
        job_attempt: int = 0,
        config: CommitterConfig | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        job_id_source: str = "JobID",
        store_wrapper: Callable[[StoreOperations], StoreOperations] | None = None,
    ) -> None:
        check_id("job id", job_id)
        if isinstance(job_attempt, bool) or not isinstance(job_attempt, int) or not 0 <= job_attempt <= 99:
            raise ConfigError(f"job attempt {job_attempt!r} of job {job_id}: must be an integer from 0 to 99")
        self.config = config or CommitterConfig()
        self.storage_options = dict(storage_options or {})
        self.destination = destination
        self.job_id_source = job_id_source
        opened = self._open_store(destination, self.storage_options)
        if not self.config.store_direct_requests:
            use_client_calls_only(opened.store)
        # A wrapper sees every store call of every stage: the way tests inject faults and latency.
        self._store = store_wrapper(opened.store) if store_wrapper is not None else opened.store
        self._store_wrapper = store_wrapper
        self.paths = JobPaths(opened.path, job_id, job_attempt)
        self._job_stats = StatisticsStore()
        self._background = BackgroundWork()
        self._rate_limit: TokenBucket | None = None
        if self.config.io_rate_limit > 0:
            # A burst of one second's operations; beyond it, calls are paced at the rate.
            rate = self.config.io_rate_limit
            self._rate_limit = TokenBucket(rate, burst=max(1, int(rate)))
        self._init_protocol()

    def _init_protocol(self) -> None:
        """The protocol's own state, after the shared state exists: a subclass sets it up here rather than
        repeating the constructor's signature."""
        return None

    @classmethod
    def _open_store(cls, destination: str, storage_options: dict[str, Any]) -> OpenedStore:
        """The store and path of the destination: ``open_store``, which refuses S3; the ``upload`` protocol
        opens S3 through its own door."""
        return open_store(destination, storage_options)

    @property
    def job_id(self) -> str:
        return self.paths.job_id

    def close(self) -> None:
        """Close the store this committer opened (its cloud client and connections); idempotent.

        Task attempts' ``fs`` is fsspec's shared filesystem, not the committer's, and stays usable. Waits first
        for the background delete of the job's state that ``commit_job`` started (``stages/cleanup.py``).
        """
        self._background.wait()
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    @property
    def store(self) -> StoreOperations:
        return self._store

    @property
    def destination_url(self) -> str:
        return self._store.to_url(self.paths.dest)

    # --- what a protocol declares ---------------------------------------------------------------------------------

    @abstractmethod
    def job_is_live(self) -> bool:
        """Whether the job still accepts task commits (set up, not yet committed or aborted); one store call.

        An engine asks before a late task attempt commits: one that ends after its job must not publish.
        """

    @abstractmethod
    def job_state_directories(self) -> list[str]:
        """The job's temporary directories, deepest first: what a late task attempt's writes may have recreated
        after the job ended, for the engine to remove if empty."""

    @abstractmethod
    def task_work_path(self, attempt_id: str) -> str:
        """The store path of an attempt's private working directory, in the protocol's layout."""

    @abstractmethod
    def _setup_job_arguments(self) -> object:
        """What ``setup_job_stage`` is applied to."""

    def _setup_task_arguments(self, task: TaskAttempt) -> object:
        """What ``setup_task_stage`` is applied to, where the protocol has one."""
        raise NotImplementedError(f"the {self.protocol} protocol has no task setup stage")

    @abstractmethod
    def _commit_task_arguments(self, task: TaskAttempt, outputs: Mapping[str, str] | None) -> object:
        """What ``commit_task_stage`` is applied to."""

    @abstractmethod
    def _abort_task_arguments(self, task: TaskAttempt) -> object:
        """What ``abort_task_stage`` is applied to."""

    @abstractmethod
    def _commit_job_arguments(
        self, accepted_attempts: Mapping[str, str] | None, progress: Callable[[int, int], None] | None
    ) -> object:
        """What ``commit_job_stage`` is applied to."""

    @abstractmethod
    def _abort_job_arguments(self) -> object:
        """What ``abort_job_stage`` is applied to."""

    def _job_started(self) -> None:
        """After ``setup_job``: what the driver runs while the job lives (the marker protocols' server)."""
        return None

    def _job_ending(self) -> None:
        """Before ``abort_job``, and when ``commit_job`` returns or fails: stop what ``_job_started`` started."""
        return None

    def _commit_starting(self) -> None:
        """Before ``commit_job``'s stage: what the job's liveness needs for the commit (the marker protocols keep
        the job's lease renewed through it); nothing here."""
        return None

    def _task_aborted(self, task: TaskAttempt) -> None:
        """After ``abort_task``: forget what this process kept of the attempt."""
        return None

    def keep_alive(self, attempt_id: str) -> AbstractContextManager[object]:
        """Entered while a task attempt runs: what keeps its job looking alive where no driver process hosts the
        job's side of it. Nothing here; the transactional protocol with direct markers beats a heartbeat."""
        return nullcontext()

    # --- the calls of a job and its tasks (``registry.Committer``) ----------------------------------------------

    def setup_job(self) -> None:
        """Prepare the job's state; the first call of a job."""
        self.setup_job_stage(self._context(self._job_stats)).apply(self._setup_job_arguments())
        self._job_started()

    def task_attempt(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """The ``TaskAttempt`` of ids set up elsewhere (no store call)."""
        check_id("task id", task_id)
        check_id("task attempt id", attempt_id)
        work_path = self.task_work_path(attempt_id)
        return TaskAttempt(task_id, attempt_id, work_path, self._task_fs(attempt_id, work_path), self._url(work_path))

    def _task_fs(self, attempt_id: str, work_path: str) -> Any:
        """The filesystem a task attempt writes with: the store's own, unless the protocol writes in place."""
        return self._store.data_fs

    def _url(self, path: str) -> str:
        return self._store.to_url(path)

    def setup_task(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """Prepare a task attempt; its files go under ``work_path``."""
        task = self.task_attempt(task_id, attempt_id)
        if self.setup_task_stage is not None:
            self.setup_task_stage(self._task_context(attempt_id)).apply(self._setup_task_arguments(task))
        return task

    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest:
        """Commit one task attempt's output, as the protocol does; returns the manifest of what it committed.

        ``outputs``: a writer that knows what it wrote may say so, as paths relative to ``work_path`` mapped to
        paths relative to the destination; then exactly those files are committed. Protocols that write in place
        can select files this way but not rename them.
        """
        try:
            result: TaskCommitOutcome = self.commit_task_stage(self._task_context(task.attempt_id)).apply(
                self._commit_task_arguments(task, outputs)
            )
        except BaseException:
            # No manifest is saved, so no statistic of this failure could reach the job: the log says it.
            log.error("Commit of task attempt %s of job %s (%s) failed", task.attempt_id, self.job_id, self.protocol)
            raise
        return result.manifest

    def abort_task(self, task: TaskAttempt) -> None:
        """Discard a task attempt's output; it will never be committed."""
        self.abort_task_stage(self._task_context(task.attempt_id)).apply(self._abort_task_arguments(task))
        self._task_aborted(task)

    def commit_job(
        self,
        accepted_attempts: Mapping[str, str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> SuccessData:
        """Publish the job's output and return its ``_SUCCESS`` summary; repeatable after a crash at any point.

        ``accepted_attempts`` (task id -> task attempt id) commits exactly those attempts, as an engine's commit
        coordinator accepted them, and ignores the rest; a missing one, or one of another attempt, is an error
        and nothing in the destination changes. ``progress`` is called with (files done, files in all) where the
        protocol moves files (a progress bar's hook; the library itself only logs).
        """
        return self._commit(self._commit_job_arguments(accepted_attempts, progress)).success

    def _commit(self, arguments: object) -> CommitT_co:
        """Run the job commit stage on ``arguments``: its report and log line are the same for every protocol."""
        start = time.perf_counter()
        self._commit_starting()
        try:
            call: _JobCall[CommitT_co] = self._run_job_call(
                lambda context: self.commit_job_stage(context).apply(arguments),
                overwrite_report=True,
                worker_processes=self.job_commit_makes_batches,
            )
        finally:
            self._job_ending()
        result = call.result
        if not result.already_committed:
            report = copy.copy(result.success)
            report.diagnostics = dict(result.success.diagnostics)
            report.iostatistics = call.context.stats.snapshot()
            self._save_report(report, overwrite=True)
        log.info(
            "Job %s (%s) committed %d files of %d tasks into %s in %.3f s%s",
            self.job_id,
            self.protocol,
            result.files_committed,
            result.tasks_committed,
            self.destination_url,
            time.perf_counter() - start,
            result.details,
        )
        return result

    def abort_job(self) -> AbortT_co:
        """Discard the job: undo what an interrupted ``commit_job`` published and delete the job's state.

        Safe to call any number of times; the output of a committed job (past its commit point) stays.
        """
        self._job_ending()
        arguments = self._abort_job_arguments()
        call: _JobCall[AbortT_co] = self._run_job_call(
            lambda context: self.abort_job_stage(context).apply(arguments), overwrite_report=False
        )
        report = self._new_summary(JOB_STAGE_ABORT)
        report.success = False
        report.diagnostics.update(getattr(call.result, "diagnostics", {}))  # what the abort skipped, and why
        report.iostatistics = call.context.stats.snapshot()
        self._save_report(report, overwrite=False)
        return call.result

    def commit_job_replacing(
        self, replaced: Sequence[str], accepted_attempts: Mapping[str, str] | None = None
    ) -> ReplacingCommit:
        """Commit the job as the new output of the destination, replacing ``replaced`` (overwrite).

        ``replaced`` are store paths of files below the destination that the job's output supersedes (what
        Spark's and the adapters' overwrite found before the commit). The rename-based protocols delete them once
        the job is committed (never before: a failed commit must leave the old output); the transactional
        protocol lists them as ``removed`` in its commit record instead, for ``vacuum`` to delete later.
        """
        summary = self.commit_job(accepted_attempts)
        return ReplacingCommit(summary, self.delete_destination_files(replaced))

    def delete_destination_files(self, paths: Iterable[str]) -> int:
        """Delete files below the destination that a committed job replaces (Spark's overwrite); returns how many
        were there.

        Each delete runs under the store retry policy and ``io.rate``, timed as ``op_delete`` in the job's
        statistics: the committer's own cloud client does not retry, and one lost delete would leave old and new
        rows side by side. ``paths`` are store paths; one outside the destination is refused before anything goes.
        """
        root = self.paths.dest.rstrip("/") + "/"
        targets = list(paths)
        outside = [path for path in targets if not path.startswith(root) or "/../" in f"/{path}/"]
        if outside:
            raise CommitterError(f"{self._store.to_url(outside[0])}: not below the destination {self.destination_url}")
        context = self._context(self._job_stats)
        deleted = 0
        for path in targets:
            with context.stats.track(OP_DELETE):
                deleted += context.store_retry.call(functools.partial(context.store.delete_file, path))
        return deleted

    # --- the runtime of one call ----------------------------------------------------------------------------------

    def _context(
        self,
        stats: StatisticsStore,
        pool: ThreadPoolExecutor | None = None,
        task_attempt_id: str | None = None,
        workers: WorkerPool | None = None,
    ) -> StageContext:
        store = self._store if workers is None else WorkerDispatchStore(self._store, workers)
        return StageContext(
            config=self.config,
            store=self._limited_store(stats, store),
            paths=self.paths,
            stats=stats,
            pool=pool,
            job_id_source=self.job_id_source,
            task_attempt_id=task_attempt_id,
            storage_options=self.storage_options,
            background=self._background,
        )

    def _retry_for(self, attempt_id: str | None) -> RetryPolicy:
        """The store retry policy of a call made beside the stages (markers): the job's (``None``) or a task's."""
        if attempt_id is None:
            return self._context(StatisticsStore()).store_retry
        return self._task_context(attempt_id).store_retry

    def _task_context(self, attempt_id: str) -> StageContext:
        """A task call's context: statistics of its own, which reach the job only through what the task saves."""
        return self._context(StatisticsStore(), task_attempt_id=attempt_id)

    def _limited_store(self, stats: StatisticsStore, store: StoreOperations | None = None) -> StoreOperations:
        """The store of one committer call: under ``io.rate``, every call first takes a token of the one bucket.

        All calls of this committer (every thread of a job commit, and any task call made through it) share
        the bucket, so the limit holds for the committer as a whole; it is per committer object, hence per
        process, not per cluster. Each call's wait is recorded as ``store_io_rate_limited`` in the statistics
        of the call it served: a job call's waits go to the job's statistics; a task call's go to that task's
        own statistics, which reach the job through what the task saves. Recording a task's waits straight
        into the job's statistics would be wrong: a task usually runs in another process, and where it does
        not, its waits would then be counted twice once its statistics are loaded.
        """
        store = self._store if store is None else store
        bucket = self._rate_limit
        if bucket is None:
            return store

        def record(seconds: float) -> None:
            stats.add_duration(STORE_IO_RATE_LIMITED, round(seconds * 1000))

        return RateLimitedStore(store, bucket, record)

    @contextmanager
    def _job_pool(self) -> Iterator[ThreadPoolExecutor | None]:
        """The one pool of a job commit or abort, created and shut down here."""
        if self.config.io_threads <= 1:
            yield None
            return
        with ThreadPoolExecutor(self.config.io_threads, thread_name_prefix=f"manifest-committer-{self.job_id}") as pool:
            yield pool

    @contextmanager
    def _worker_processes(self) -> Iterator[WorkerPool | None]:
        """The worker processes of a job commit (``io.processes`` > 1), started and stopped here; ``None`` where
        the calls stay in this process (see ``_worker_setup``)."""
        setup = self._worker_setup() if self.config.io_processes > 1 else None
        if setup is None:
            yield None
            return

        def record(seconds: float) -> None:
            self._job_stats.add_duration(COMMITTER_WORKER_PROCESS_START, round(seconds * 1000))

        workers = WorkerPool(setup, self.config.io_processes, self.job_id, record)
        try:
            yield workers
        finally:
            workers.close()

    def _worker_setup(self) -> WorkerSetup | None:
        """How a worker opens the destination's store, or ``None`` (logged) where no worker can: a store that
        lives in this process alone (``memory://``), or options, a binding or a ``store_wrapper`` that do not
        pickle (a credential object, a closure)."""
        key = MANIFEST_PREFIX + "io.processes"
        if self._store.capabilities.process_local:
            log.warning("%s: the store exists in this process only; %s is ignored", self.destination_url, key)
            return None
        setup = WorkerSetup(
            self.destination,
            effective_storage_options(self.destination, self.storage_options),
            store_bindings().binding_for(self.destination),
            self._store_wrapper,
            1 if self._store.capabilities.microsecond_calls else self.config.io_threads,
            self.config.store_direct_requests,
        )
        try:
            pickle.dumps(setup)
        except Exception as error:
            log.warning(
                "%s: %s is ignored: the store's options, binding or wrapper cannot travel to a worker process (%s)",
                self.destination_url,
                key,
                error,
            )
            return None
        return setup

    def _run_job_call(
        self, run: Callable[[StageContext], R], *, overwrite_report: bool, worker_processes: bool = False
    ) -> _JobCall[R]:
        """Run a job call (commit or abort) in its pool and context; on failure save the failure report, re-raise.

        ``overwrite_report=False`` (abort) keeps a report already there: the failure that led to the abort.
        ``worker_processes``: the call's batches of store calls may go to ``io.processes`` worker processes.
        """
        workers_wanted = worker_processes and self.config.io_processes > 1
        with self._job_pool() as pool, self._worker_processes() if workers_wanted else nullcontext() as workers:
            context = self._context(self._job_stats, pool, workers=workers)
            try:
                return _JobCall(run(context), context)
            except BaseException as error:
                self._save_report(self._failure_report(context, error), overwrite=overwrite_report)
                raise

    # --- reports --------------------------------------------------------------------------------------------------

    def _new_summary(self, stage: str) -> SuccessData:
        """A ``SuccessData`` of this job and protocol, ``stage`` its diagnostics' stage."""
        summary = SuccessData.create(self.job_id, self.job_id_source, stage)
        summary.committer = self.committer_name
        return summary

    def _failure_report(self, context: StageContext, error: BaseException) -> SuccessData:
        report = self._new_summary(context.active_stage)
        report.record_failure(error)
        report.iostatistics = context.stats.snapshot()
        return report

    def _save_report(self, report: SuccessData, *, overwrite: bool) -> None:
        """Write ``summary-<jobId>.json`` to ``summary.report.directory``; a failure here is logged, never raised."""
        directory = self.config.summary_report_directory
        if not directory:
            return
        report.diagnostics[MANIFEST_PREFIX + "io.threads"] = str(self.config.io_threads)
        try:
            opened = open_store(directory, self.storage_options)
            store, root = opened.store, opened.path
        except Exception as error:
            log.warning("Could not save the summary report of job %s to %s: %s", self.job_id, directory, error)
            return
        try:
            path = posixpath.join(root, SUMMARY_FILENAME_FORMAT.format(job_id=self.job_id))
            if not overwrite and store.info(path) is not None:
                log.info("Keeping the existing summary report %s", store.to_url(path))
                return
            store.write_bytes(path, report.to_json())
            log.info("Saved summary report %s", store.to_url(path))
        except Exception as error:
            log.warning("Could not save the summary report of job %s to %s: %s", self.job_id, directory, error)
        finally:
            try:
                store.close()
            except Exception as error:
                log.warning("Could not close the store of summary report directory %s: %s", directory, error)
