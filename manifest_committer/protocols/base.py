"""The committers: ``CommitterBase``, the seam every commit protocol shares, and ``ManifestCommitter``, the
``manifest`` protocol (Hadoop's manifest committer).

A protocol is a small set of stages (``stages/``) driven by a subclass of ``CommitterBase``. The base owns what
must not differ between protocols: id checks, opening the store (with the test hook ``store_wrapper``), the
``io.rate`` limit, the one thread pool of a job call, the ``StageContext`` of each call (statistics, retry
policies, the store gate), the failure and summary reports of ``summary.report.directory``, and ``close()``.
``protocols/registry.py`` names the protocols and builds their committers (``create_committer``).
"""

from __future__ import annotations

import copy
import functools
import logging
import posixpath
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from ..config import MANIFEST_PREFIX, CommitterConfig
from ..errors import CommitterError, ConfigError
from ..iostatistics import StatisticsStore
from ..manifest import TaskManifest
from ..paths import JobPaths, check_id
from ..retry import RetryPolicy
from ..stages.base import StageContext
from ..stages.cleanup import wait_for_background_cleanup
from ..stages.manifest.abort_job import AbortJobArguments, AbortJobResult, AbortJobStage
from ..stages.manifest.abort_task import AbortTaskArguments, AbortTaskStage
from ..stages.manifest.commit_job import CommitJobArguments, CommitJobStage
from ..stages.manifest.commit_task import CommitTaskArguments, CommitTaskStage
from ..stages.manifest.plan_abort import AbortPlan, PlanAbortArguments, PlanAbortStage
from ..stages.manifest.setup_job import SetupJobArguments, SetupJobStage
from ..stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from ..statistic_names import JOB_STAGE_ABORT, OP_DELETE, STORE_IO_RATE_LIMITED
from ..store import StoreOperations, open_store
from ..store.rate_limit import RateLimitedStore, TokenBucket
from ..success_data import COMMITTER_NAME, SuccessData

log = logging.getLogger(__name__)

SUMMARY_FILENAME_FORMAT = "summary-{job_id}.json"

R = TypeVar("R")


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


class CommitterBase(ABC):
    """The machinery every protocol's committer shares; a subclass adds the protocol's calls as stages.

    Any call may run in another process or machine on a committer built with the same destination, job id and
    attempt: nothing but the store links them. A committer holds a cloud client: ``close()`` it, or use it as a
    context manager, when done.
    """

    protocol: ClassVar[str]
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
    task_commit_publishes: ClassVar[bool] = False
    """True where ``commit_task`` makes the task's files visible in the destination (``v2``): an engine whose
    commit coordinator decides after the task ran (Spark's data source) must then run the task commit itself,
    for the accepted attempt only, or a speculative duplicate publishes too."""

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
        store, dest_path = self._open_store(destination, self.storage_options)
        # A wrapper sees every store call of every stage: the way tests inject faults and latency.
        self._store = store_wrapper(store) if store_wrapper is not None else store
        self.paths = JobPaths(dest_path, job_id, job_attempt)
        self._job_stats = StatisticsStore()
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
    def _open_store(cls, destination: str, storage_options: dict[str, Any]) -> tuple[StoreOperations, str]:
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
        wait_for_background_cleanup(self.paths)
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

    # --- the protocol's own calls (``protocols.Committer``) ---------------------------------------------------

    @abstractmethod
    def setup_job(self) -> None:
        """Prepare the job's state; the first call of a job."""

    @abstractmethod
    def setup_task(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """Prepare a task attempt's private working directory."""

    @abstractmethod
    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest:
        """Commit one task attempt's output, as the protocol does; returns what it committed."""

    @abstractmethod
    def abort_task(self, task: TaskAttempt) -> None:
        """Discard a task attempt's output."""

    @abstractmethod
    def commit_job(self, accepted_attempts: Mapping[str, str] | None = None) -> SuccessData:
        """Publish the job's output and return its ``_SUCCESS`` summary."""

    @abstractmethod
    def abort_job(self) -> object:
        """Discard the job's temporary state (and, where the protocol can, what it had published)."""

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

    def keep_alive(self, attempt_id: str) -> AbstractContextManager[object]:
        """Entered while a task attempt runs: what keeps its job looking alive where no driver process hosts the
        job's side of it. Nothing here; the transactional protocol with direct markers beats a heartbeat."""
        return nullcontext()

    # --- tasks ----------------------------------------------------------------------------------------------------

    def task_attempt(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """The ``TaskAttempt`` of ids set up elsewhere (no store call)."""
        check_id("task id", task_id)
        check_id("task attempt id", attempt_id)
        work_path = self.task_work_path(attempt_id)
        return TaskAttempt(task_id, attempt_id, work_path, self._store.data_fs, self._store.to_url(work_path))

    # --- the runtime of one call ----------------------------------------------------------------------------------

    def _context(
        self,
        stats: StatisticsStore,
        pool: ThreadPoolExecutor | None = None,
        task_attempt_id: str | None = None,
    ) -> StageContext:
        return StageContext(
            config=self.config,
            store=self._limited_store(stats),
            paths=self.paths,
            stats=stats,
            pool=pool,
            job_id_source=self.job_id_source,
            task_attempt_id=task_attempt_id,
            storage_options=self.storage_options,
        )

    def _retry_for(self, attempt_id: str | None) -> RetryPolicy:
        """The store retry policy of a call made beside the stages (markers): the job's (``None``) or a task's."""
        if attempt_id is None:
            return self._context(StatisticsStore()).store_retry
        return self._task_context(attempt_id).store_retry

    def _task_context(self, attempt_id: str) -> StageContext:
        """A task call's context: statistics of its own, which reach the job only through what the task saves."""
        return self._context(StatisticsStore(), task_attempt_id=attempt_id)

    def _limited_store(self, stats: StatisticsStore) -> StoreOperations:
        """The store of one committer call: under ``io.rate``, every call first takes a token of the one bucket.

        All calls of this committer (every thread of a job commit, and any task call made through it) share
        the bucket, so the limit holds for the committer as a whole; it is per committer object, hence per
        process, not per cluster. Each call's wait is recorded as ``store_io_rate_limited`` in the statistics
        of the call it served: a job call's waits go to the job's statistics; a task call's go to that task's
        own statistics, which reach the job through what the task saves. Recording a task's waits straight
        into the job's statistics would be wrong: a task usually runs in another process, and where it does
        not, its waits would then be counted twice once its statistics are loaded.
        """
        bucket = self._rate_limit
        if bucket is None:
            return self._store

        def record(seconds: float) -> None:
            stats.add_duration(STORE_IO_RATE_LIMITED, round(seconds * 1000))

        return RateLimitedStore(self._store, bucket, record)

    @contextmanager
    def _job_pool(self) -> Iterator[ThreadPoolExecutor | None]:
        """The one pool of a job commit or abort, created and shut down here."""
        if self.config.io_threads <= 1:
            yield None
            return
        with ThreadPoolExecutor(self.config.io_threads, thread_name_prefix=f"manifest-committer-{self.job_id}") as pool:
            yield pool

    def _run_job_call(self, run: Callable[[StageContext], R], *, overwrite_report: bool) -> tuple[R, StageContext]:
        """Run a job call (commit or abort) in its pool and context; on failure save the failure report, re-raise.

        ``overwrite_report=False`` (abort) keeps a report already there: the failure that led to the abort.
        """
        with self._job_pool() as pool:
            context = self._context(self._job_stats, pool)
            try:
                return run(context), context
            except BaseException as error:
                self._save_report(self._failure_report(context, error), overwrite=overwrite_report)
                raise

    def _new_summary(self, stage: str) -> SuccessData:
        """A ``SuccessData`` of this job and protocol, ``stage`` its diagnostics' stage."""
        summary = SuccessData.create(self.job_id, self.job_id_source, stage)
        summary.committer = self.committer_name
        return summary

    def _save_abort_report(self, context: StageContext, stage: str) -> None:
        report = self._new_summary(stage)
        report.success = False
        report.iostatistics = context.stats.snapshot()
        self._save_report(report, overwrite=False)

    # --- shared job calls -------------------------------------------------------------------------------------

    def commit_job_replacing(
        self, replaced: Sequence[str], accepted_attempts: Mapping[str, str] | None = None
    ) -> tuple[SuccessData, int]:
        """Commit the job as the new output of the destination, replacing ``replaced`` (overwrite); returns the
        summary and how many replaced files this call removed from sight.

        ``replaced`` are store paths of files below the destination that the job's output supersedes (what
        Spark's and the adapters' overwrite found before the commit). The rename-based protocols delete them once
        the job is committed (never before: a failed commit must leave the old output); the transactional
        protocol lists them as ``removed`` in its commit record instead, for ``vacuum`` to delete later.
        """
        summary = self.commit_job(accepted_attempts)
        return summary, self.delete_destination_files(replaced)

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

    # --- reports --------------------------------------------------------------------------------------------------

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
            store, root = open_store(directory, self.storage_options)
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


class ManifestCommitter(CommitterBase):
    """Commits the output of many task attempts into one destination, compatible with Hadoop 3.5's files.

    Any of the calls may run in another process or machine on a committer built with the same destination,
    job id and attempt: nothing but the store links them. Each job commit has its own thread pool of
    ``io.threads``. A committer holds a cloud client: ``close()`` it, or use it as a context manager
    (``with ManifestCommitter(...) as committer:``), when done. The shared machinery is ``CommitterBase``'s.
    """

    protocol = "manifest"
    committer_name = COMMITTER_NAME

    def task_work_path(self, attempt_id: str) -> str:
        return self.paths.task_attempt_dir(attempt_id)

    def job_is_live(self) -> bool:
        """The manifest directory exists from job setup until commit or abort."""
        status = self._store.info(self.paths.manifest_dir)
        return status is not None and status.is_dir

    def job_state_directories(self) -> list[str]:
        return [self.paths.task_attempts_dir, self.paths.job_attempt_dir, self.paths.job_dir]

    # --- job ------------------------------------------------------------------------------------------------------

    def setup_job(self) -> None:
        """Create the job attempt directory; remove an older ``_SUCCESS`` if the marker is on."""
        SetupJobStage(self._context(self._job_stats)).apply(SetupJobArguments(self.config.mark_successful_jobs))

    def commit_job(
        self,
        accepted_attempts: Mapping[str, str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> SuccessData:
        """Commit every committed task's files into the destination and return the ``_SUCCESS`` summary.

        ``accepted_attempts`` (task id -> task attempt id) commits exactly those manifests, as an engine's
        commit coordinator accepted them, and ignores the rest; a missing one, or one of another attempt, is a
        ``ManifestError`` and nothing in the destination changes. ``progress`` is called with (files done,
        files in all) once the manifests are loaded and after each unit of renames (a progress bar's hook; the
        library itself only logs); a callback that raises is logged and dropped.
        """
        start = time.perf_counter()
        arguments = CommitJobArguments(accepted_attempts=accepted_attempts, progress=progress)
        result, context = self._run_job_call(
            lambda context: CommitJobStage(context).apply(arguments), overwrite_report=True
        )
        success = result.success
        if not result.already_committed:
            report = copy.copy(success)
            report.diagnostics = dict(success.diagnostics)
            report.iostatistics = context.stats.snapshot()
            self._save_report(report, overwrite=True)
        log.info(
            "Job %s committed %d files from %d task manifests into %s in %.3f s",
            self.job_id,
            result.files_committed,
            result.manifests_loaded,
            self.destination_url,
            time.perf_counter() - start,
        )
        return success

    def abort_job(self) -> AbortJobResult:
        """Undo the job: revert what an interrupted ``commit_job`` moved and delete the job's state.

        Safe to call any number of times; the output of a committed job (its ``_SUCCESS`` in place) stays.
        """
        result, context = self._run_job_call(
            lambda context: AbortJobStage(context).apply(AbortJobArguments()), overwrite_report=False
        )
        self._save_abort_report(context, JOB_STAGE_ABORT)
        return result

    def plan_abort(self) -> AbortPlan:
        """What ``abort_job`` would revert and delete now, decided as it decides; changes nothing (a dry run)."""
        return PlanAbortStage(self._context(StatisticsStore())).apply(PlanAbortArguments())

    # --- tasks ----------------------------------------------------------------------------------------------------

    def setup_task(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """Create the attempt's working directory; write the task's files under ``work_path``."""
        task = self.task_attempt(task_id, attempt_id)
        SetupTaskStage(self._task_context(attempt_id)).apply(SetupTaskArguments(task_id, attempt_id))
        return task

    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest:
        """Scan the attempt's files into a manifest and publish it; the files move only at job commit.

        ``outputs``: a writer that knows what it wrote may say so, as paths relative to ``work_path`` mapped to
        paths relative to the destination. Then exactly those files are committed, from wherever they are in
        the attempt directory; a flat attempt directory makes both the task and the job commit cheaper.
        """
        try:
            result = CommitTaskStage(self._task_context(task.attempt_id)).apply(
                CommitTaskArguments(task.task_id, task.attempt_id, outputs)
            )
        except BaseException:
            # No manifest is saved, so no statistic of this failure could reach the job: the log says it.
            log.error("Commit of task attempt %s of job %s failed", task.attempt_id, self.job_id)
            raise
        return result.manifest

    def abort_task(self, task: TaskAttempt) -> None:
        """Delete the attempt's working directory; its files will never be committed."""
        AbortTaskStage(self._task_context(task.attempt_id)).apply(AbortTaskArguments(task.attempt_id))
