"""One write job of any framework: the driver's set-up and commit, and the task attempts in between.

Every adapter (``manifest_committer.arrow``, ``.polars``, ``.dask``, ``.ray``) is this module plus the way its
framework runs tasks and carries their results back:

* driver: ``WriteJob.create`` checks the arguments, ``begin`` applies the save mode and sets up the job;
* each framework task: ``run_task`` is one task attempt with ids unique to it (a retried or duplicated task is
  another attempt), writes its rows with a task writer (``batch_writer``: pyarrow's ``write_dataset``, or
  ``TaskOutput`` for JSON lines; Polars brings its own) and commits the attempt, returning a ``TaskResult``
  (picklable: the framework's own result channel carries it);
* driver: ``commit_write`` commits exactly the attempts whose results the framework delivered
  (``commit_job(accepted_attempts=...)``), replacing old output for overwrite; ``abort_write`` undoes a failed job.

Under ``v2`` a task commit publishes into the destination, so a duplicate attempt would publish its rows too:
there the task commits of the delivered attempts run in ``commit_write`` instead, and the other attempts' files
stay in ``_temporary`` and go with it.

Write markers (transactional, upload) are direct unless the options ask for ``batched`` and the framework's driver
outlives its tasks (Ray, Dask: ``driver_address``): then the committer that ``begin`` sets the job up with stays
open in the driver, hosting the marker server on the driver's address, until ``commit_write`` or ``abort_write``
(or ``release_driver``) ends it. The job itself holds it (``DriverSlot``), in the driver's copy only: a copy that
travels to a task or a worker by pickle holds none, and a commit there sets up a committer of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import posixpath
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import FILE_OUTPUT_PREFIX, MANIFEST_PREFIX, SPARK_HADOOP_PREFIX, CommitterConfig, MarkerType
from ..errors import CommitterError, ConfigError, JobStateError
from ..protocols.base import CommitterBase, TaskAttempt
from ..protocols.registry import create_committer, hosts_marker_server, resolve_protocol
from ..store import open_destination_store, store_bindings
from ..success_data import SuccessData
from .dataset_output import DATASET_FORMATS, is_local, schema_groups, write_dataset_task
from .formats import PARQUET_BLOCK_SIZE, PARQUET_PAGE_SIZE, OutputFormat, output_format
from .modes import OldOutput, PartitionOverwriteMode, SaveMode, commit_replacing, destination_has_data, list_old_output
from .options import check_options
from .task_output import TaskOutput, file_prefix

log = logging.getLogger(__name__)

DEFAULT_MAX_OPEN_FILES = 64
"""Files one task keeps open at once (Spark's counterpart: ``spark.sql.maxConcurrentOutputFileWriters``): on an
object store each open file buffers what it has not uploaded yet, up to a block of megabytes, and a streamed task
could fill thousands of them."""
WIDE_MAX_OPEN_FILES = 1024
"""pyarrow's own default for its dataset writer, ours where an open file costs little: on local disk, and where
the task's rows are in memory anyway (a Ray block, a Dask partition, a ``pyarrow.Table``), so the upload buffers
of all its open files together hold at most those rows once more. pyarrow finishes the file it closes at the
limit before it goes on, but closes the rest together at the end: with a low limit a block of many partitions
closes a file at nearly every row group, and on a store with round-trip latency the committed write falls far
behind Ray's own."""
_OPTIONS = (
    "maxrecordsperfile",
    "maxopenfiles",
    "compression",
    "header",
    "partitionoverwritemode",
    PARQUET_BLOCK_SIZE,
    PARQUET_PAGE_SIZE,
)
"""Writer options, as ``manifest_committer.spark.write`` names them (case-insensitive)."""
_DEFERRED_TASK_COMMIT = frozenset({"v2"})
MARKERS_TYPE_KEY = MANIFEST_PREFIX + "markers.type"
"""Protocols whose task commit publishes into the destination: the driver commits the delivered attempts."""


class DestinationExistsError(CommitterError):
    """Save mode ``errorifexists`` and the destination already holds data."""


class TaskResultError(CommitterError):
    """What a framework delivered as a task's result is not a result of this job's tasks."""


def is_committer_key(key: str) -> bool:
    """A key of the committer's families (``mapreduce.manifest.committer.*``, ``mapreduce.fileoutputcommitter.*``),
    with or without Spark's ``spark.hadoop.`` prefix: what writer options pass on to ``CommitterConfig``."""
    return key.lower().removeprefix(SPARK_HADOOP_PREFIX).startswith((MANIFEST_PREFIX, FILE_OUTPUT_PREFIX))


def int_option(options: Mapping[str, str], key: str, name: str, default: int, minimum: int | None = None) -> int:
    """The integer writer option ``key`` (lower-cased; ``name`` as users spell it in errors), at least ``minimum``."""
    text = options.get(key, str(default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}: must be at least {minimum}, got {text!r}")
    return value


class DriverSlot:
    """Where the driver keeps the committer that set a job up and hosts its marker server, until the job ends.

    A pickled slot arrives empty: the committer (its server thread, its sockets) stays in the driver's process,
    and a commit elsewhere builds its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committer: CommitterBase | None = None

    def keep(self, committer: CommitterBase) -> None:
        with self._lock:
            self._committer = committer

    def take(self) -> CommitterBase | None:
        """The kept committer, now the caller's to close; ``None`` if none was kept (or it was taken)."""
        with self._lock:
            committer, self._committer = self._committer, None
        return committer

    def __reduce__(self) -> tuple[type[DriverSlot], tuple[()]]:
        return (DriverSlot, ())


@dataclass(frozen=True)
class WriteJob:
    """Everything about one write that the driver decides and every task needs; picklable."""

    destination: str
    job_id: str
    output_format: OutputFormat
    mode: SaveMode = SaveMode.ERROR_IF_EXISTS
    partition_by: tuple[str, ...] = ()
    max_records_per_file: int = 0
    """Most rows in one file; 0 means no limit (Spark's ``maxRecordsPerFile``)."""
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    """Files one task keeps open (``maxOpenFiles``); past it the least recently written one is finished."""
    max_open_files_set: bool = False
    """Whether the writer options set ``maxOpenFiles``; if not, pyarrow's writer may keep
    ``WIDE_MAX_OPEN_FILES`` open (``TaskTarget.dataset_open_files``)."""
    partition_overwrite_mode: PartitionOverwriteMode = PartitionOverwriteMode.STATIC
    storage_options: dict[str, Any] = field(default_factory=dict)
    config: CommitterConfig = field(default_factory=CommitterConfig)
    protocol: str = "manifest"
    """Resolved on the driver (never ``auto``), so every task uses the same protocol."""
    driver_hosts_markers: bool = False
    """The driver keeps the committer that set the job up, with its marker server, until the job ends."""
    driver: DriverSlot = field(default_factory=DriverSlot, compare=False, repr=False)
    """That committer, in the driver's copy of the job."""

    @classmethod
    def create(
        cls,
        url: str,
        *,
        framework: str,
        format: str = "parquet",
        partition_by: Sequence[str] = (),
        mode: str = "errorifexists",
        protocol: str = "auto",
        storage_options: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        driver_address: str | None = None,
    ) -> WriteJob:
        """Check a ``write()``'s arguments; ``ConfigError`` names the first bad one. The job id is new.

        ``driver_address``: given by a framework whose driver process outlives its tasks, the address its workers
        reach the driver on; with ``markers.type=batched`` asked for in ``options``, the driver then hosts the
        marker server there (unless ``markers.server.address`` is set)."""
        store_bindings().check(url, "url")
        if isinstance(partition_by, str):
            raise ConfigError(f"partition_by: expected a sequence of column names, got the string {partition_by!r}")
        columns = tuple(partition_by)
        if any(not isinstance(column, str) or not column for column in columns):
            raise ConfigError(f"partition_by: every column name must be a non-empty string, got {list(columns)!r}")
        if len(set(columns)) != len(columns):
            raise ConfigError(f"partition_by: a column is named twice in {list(columns)!r}")
        merged = {str(key).lower(): str(value) for key, value in (options or {}).items()}
        hadoop = {key: value for key, value in merged.items() if is_committer_key(key)}
        check_options(merged.keys() - hadoop.keys(), _OPTIONS, "writer option", f"for {url}")
        config = CommitterConfig.from_hadoop_conf(hadoop)
        protocol = resolve_protocol(url, protocol)
        batched_asked = config.markers_type is MarkerType.BATCHED and any(
            key.removeprefix(SPARK_HADOOP_PREFIX) == MARKERS_TYPE_KEY for key in hadoop
        )
        driver_hosts = False
        if hosts_marker_server(protocol) and config.markers_type is not MarkerType.DIRECT:
            if driver_address is not None and batched_asked:
                driver_hosts = True
                if config.markers_server_address is None:
                    config = dataclasses.replace(config, markers_server_address=driver_address)
            else:
                # Unless the driver outlives the tasks and batched markers are asked for: the driver's committer
                # lives only while it sets the job up and while it commits, and a marker server in it would be gone
                # while the tasks write. Direct markers need no server (and cost a task writing many files in
                # sequence no batch interval each); the running tasks beat the job's heartbeat (keep_alive).
                log.debug("%s: direct write markers (no driver process hosts a marker server here)", url)
                config = dataclasses.replace(config, markers_type=MarkerType.DIRECT)
        return cls(
            destination=url,
            job_id=f"{framework}-{uuid.uuid4()}",
            output_format=output_format(format, merged),
            mode=SaveMode.parse(mode),
            partition_by=columns,
            max_records_per_file=int_option(merged, "maxrecordsperfile", "maxRecordsPerFile", 0, 0),
            max_open_files=int_option(merged, "maxopenfiles", "maxOpenFiles", DEFAULT_MAX_OPEN_FILES, 1),
            max_open_files_set="maxopenfiles" in merged,
            partition_overwrite_mode=PartitionOverwriteMode.parse(
                merged.get("partitionoverwritemode", PartitionOverwriteMode.STATIC.value)
            ),
            storage_options=dict(storage_options or {}),
            config=config,
            protocol=protocol,
            driver_hosts_markers=driver_hosts,
        )

    @property
    def overwrite(self) -> bool:
        return self.mode is SaveMode.OVERWRITE

    @property
    def dynamic_overwrite(self) -> bool:
        """Replace only the partitions this job writes (needs partition columns, like Spark)."""
        return (
            self.overwrite
            and bool(self.partition_by)
            and self.partition_overwrite_mode is PartitionOverwriteMode.DYNAMIC
        )

    def committer(self) -> CommitterBase:
        """A committer of this job and protocol; any process builds the same one."""
        return create_committer(
            self.destination, self.job_id, self.protocol, config=self.config, storage_options=self.storage_options
        )

    def check_columns(self, columns: Sequence[str]) -> None:
        """The partition columns are columns of the data, and at least one data column remains."""
        names = list(columns)
        missing = [column for column in self.partition_by if column not in names]
        if missing:
            raise ConfigError(
                f"{self.destination}: partition column {missing[0]!r} is not a column of the data: {', '.join(names)}"
            )
        if self.partition_by and len(self.partition_by) == len(names):
            raise ConfigError(f"{self.destination}: every column is a partition column: one data column must remain")


def destination_holds_data(job: WriteJob) -> bool:
    """Whether the destination holds anything but a ``_temporary`` tree (Spark's "path exists")."""
    opened = open_destination_store(job.destination, job.storage_options)
    try:
        return destination_has_data(opened.store.fs, opened.path)
    finally:
        opened.store.close()


def begin(job: WriteJob) -> bool:
    """On the driver, before any task: apply the save mode and set the job up; ``False`` means write nothing.

    ``errorifexists`` raises ``DestinationExistsError`` and ``ignore`` returns ``False`` when the destination
    holds data (anything but a ``_temporary`` tree).
    """
    if job.mode in (SaveMode.ERROR_IF_EXISTS, SaveMode.IGNORE) and destination_holds_data(job):
        if job.mode is SaveMode.IGNORE:
            log.info("%s holds data: nothing written (save mode ignore)", job.destination)
            return False
        raise DestinationExistsError(f"{job.destination}: the destination already holds data (save mode errorifexists)")
    committer = job.committer()
    try:
        committer.setup_job()
    except BaseException:
        committer.close()
        raise
    if job.driver_hosts_markers:
        job.driver.keep(committer)  # its marker server serves the tasks until the job ends
    else:
        committer.close()
    log.info("Set up job %s writing %s into %s", job.job_id, job.output_format.name, job.destination)
    return True


def _driver_committer(job: WriteJob) -> CommitterBase:
    """The committer of the job's driver side: the one ``begin`` kept (taken: the caller closes it), else new."""
    kept = job.driver.take()
    return kept if kept is not None else job.committer()


def release_driver(job: WriteJob) -> None:
    """Close the committer ``begin`` kept for the job, if it is still open (its job commit ran elsewhere)."""
    kept = job.driver.take()
    if kept is not None:
        kept.close()


@dataclass(frozen=True)
class TaskResult:
    """What one task attempt hands back through the framework: its identity and what it wrote."""

    job_id: str
    task_index: int
    task_id: str
    task_attempt_id: str
    rows: int
    outputs: dict[str, str]
    """Attempt-relative path -> destination-relative path of each file (the task commit's ``outputs``)."""
    partitions: tuple[str, ...]
    """Destination-relative partition directories the attempt wrote into."""
    committed: bool
    """Whether the attempt committed itself; ``False`` under a protocol whose task commit the driver runs."""


@dataclass(frozen=True)
class TaskTarget:
    """Where one task attempt writes: what a task writer needs to know."""

    job: WriteJob
    task: TaskAttempt
    task_index: int
    attempt: int
    """A number unique to the attempt: in its ids and in its file names."""
    in_place: bool
    """The committer's ``task_writes_in_place``: files at their destination-relative paths under ``work_path``."""

    def dataset_open_files(self, held_in_memory: bool) -> int:
        """Files pyarrow's dataset writer keeps open: ``maxOpenFiles`` if set; else ``WIDE_MAX_OPEN_FILES`` on
        local disk or when the task's rows are ``held_in_memory``, ``DEFAULT_MAX_OPEN_FILES`` otherwise."""
        job = self.job
        if job.max_open_files_set or not (held_in_memory or is_local(self.task.fs)):
            return job.max_open_files
        return WIDE_MAX_OPEN_FILES

    @property
    def file_prefix(self) -> str:
        """``part-<task>-<job>-a<attempt>``: every file name of the attempt starts with it (unique in the job)."""
        return file_prefix(self.job.job_id, self.task_index, self.attempt)


@dataclass(frozen=True)
class TaskFiles:
    """What a task writer wrote: its rows, the task commit's ``outputs`` and the partition directories."""

    rows: int
    outputs: dict[str, str]
    partitions: frozenset[str]


TaskWrite = Callable[[TaskTarget], TaskFiles]
"""Writes one task attempt's rows under ``TaskTarget.task.work_path``; a failure leaves the files to the abort."""


def batch_writer(batches: Iterable[Any], schema: Any | None = None, *, held_in_memory: bool = False) -> TaskWrite:
    """The task writer of record batches: ``pyarrow.dataset.write_dataset`` for Parquet and CSV, ``TaskOutput``
    for JSON lines. ``schema`` (a ``pyarrow.Schema``) defaults to the first batch's; ``held_in_memory``: the
    batches are in memory already, not streamed (more files may stay open, ``TaskTarget.dataset_open_files``)."""

    def write(target: TaskTarget) -> TaskFiles:
        job = target.job
        if job.output_format.name in DATASET_FORMATS:
            iterator = iter(batches)
            first = None
            if schema is None:
                first = next(iterator, None)
                if first is None:
                    return TaskFiles(0, {}, frozenset())
            written = write_dataset_task(
                job,
                schema if first is None else first.schema,
                iterator if first is None else itertools.chain([first], iterator),
                task_fs=target.task.fs,
                work_path=target.task.work_path,
                file_prefix=target.file_prefix,
                in_place=target.in_place,
                max_open_files=target.dataset_open_files(held_in_memory),
            )
            return TaskFiles(written.rows, written.outputs, frozenset(written.partitions))
        output = TaskOutput(target.task, job, target.task_index, target.attempt, in_place=target.in_place)
        try:
            for batch in batches:
                if batch.num_rows:
                    output.write(batch)
        finally:
            output.close()
        return TaskFiles(output.rows, dict(output.outputs), frozenset(output.partitions))

    return write


def tables_writer(tables: Iterable[Any]) -> TaskWrite:
    """The task writer of whole ``pyarrow.Table`` s whose schemas may differ (a Ray write task's blocks).

    The tables are grouped by ``dataset_output.schema_groups`` (their schemas unified where pyarrow can) before a
    byte is written, so it holds them all, as Ray's own sinks do. Each group is one ``write_dataset`` call; the
    files of group ``n > 0`` are named ``<file prefix>-s<n>-c<i>``, so no call overwrites another's files.
    """

    def write(target: TaskTarget) -> TaskFiles:
        job = target.job
        where = f"{job.destination}: task attempt {target.task.attempt_id}"
        groups = schema_groups(tables)
        if job.output_format.name not in DATASET_FORMATS:  # JSON lines: one schema-less writer for every group
            return batch_writer(batch for group in groups for batch in group.batches(where))(target)
        rows = 0
        outputs: dict[str, str] = {}
        partitions: set[str] = set()
        for number, group in enumerate(groups):
            written = write_dataset_task(
                job,
                group.schema,
                group.batches(where),
                task_fs=target.task.fs,
                work_path=target.task.work_path,
                file_prefix=target.file_prefix if number == 0 else f"{target.file_prefix}-s{number}",
                in_place=target.in_place,
                max_open_files=target.dataset_open_files(held_in_memory=True),
            )
            rows += written.rows
            outputs.update(written.outputs)
            partitions.update(written.partitions)
        if len(groups) > 1:
            log.info("%s: %d groups of blocks whose schemas do not unify, written apart", where, len(groups))
        return TaskFiles(rows, outputs, frozenset(partitions))

    return write


def run_task(
    job: WriteJob, task_index: int, batches: Iterable[Any] = (), *, write: TaskWrite | None = None
) -> TaskResult:
    """One task attempt, in whatever process the framework runs it: write ``batches`` (``pyarrow.RecordBatch``),
    or whatever ``write`` writes, and commit the attempt. A failure discards the attempt's files before it is
    raised."""
    attempt = secrets.randbits(48)  # a retry or a duplicate of the same task is another attempt
    task_id, attempt_id = f"task_{task_index:05d}_{attempt}", f"attempt_{task_index:05d}_{attempt}"
    writer = write if write is not None else batch_writer(batches)
    with job.committer() as committer, committer.keep_alive(attempt_id):
        commit_here = committer.protocol not in _DEFERRED_TASK_COMMIT
        task = committer.setup_task(task_id, attempt_id)
        try:
            written = writer(TaskTarget(job, task, task_index, attempt, committer.task_writes_in_place))
            if not committer.job_is_live():
                raise JobStateError(
                    f"{committer.destination_url}: job {job.job_id} ended before task attempt {attempt_id} could commit"
                )
            if commit_here:
                committer.commit_task(task, written.outputs)
        except BaseException:
            with contextlib.suppress(Exception):
                committer.abort_task(task)
            raise
    log.debug("Task attempt %s of job %s wrote %d rows", attempt_id, job.job_id, written.rows)
    return TaskResult(
        job_id=job.job_id,
        task_index=task_index,
        task_id=task_id,
        task_attempt_id=attempt_id,
        rows=written.rows,
        outputs=dict(written.outputs),
        partitions=tuple(sorted(written.partitions)),
        committed=commit_here,
    )


def accepted_results(job: WriteJob, results: Iterable[object]) -> list[TaskResult]:
    """The results the framework delivered, checked: each a ``TaskResult`` of this job, one per task."""
    accepted: list[TaskResult] = []
    seen: set[int] = set()
    for index, result in enumerate(results):
        if not isinstance(result, TaskResult):
            raise TaskResultError(f"job {job.job_id}: task result {index} is a {type(result).__name__}")
        if result.job_id != job.job_id:
            raise TaskResultError(f"job {job.job_id}: the result of task {result.task_id} is of job {result.job_id}")
        if result.task_index in seen:
            raise TaskResultError(f"job {job.job_id}: two results of task {result.task_index}")
        seen.add(result.task_index)
        accepted.append(result)
    return accepted


def commit_write(job: WriteJob, results: Iterable[object]) -> SuccessData:
    """Commit the job from exactly the delivered attempts, replacing old output for overwrite; its summary."""
    accepted = accepted_results(job, results)
    with _driver_committer(job) as committer:
        for result in accepted:
            if not result.committed:
                committer.commit_task(committer.task_attempt(result.task_id, result.task_attempt_id), result.outputs)
        old = None
        if job.overwrite:
            written = {d for result in accepted for d in result.partitions} if job.dynamic_overwrite else None
            old = list_old_output(committer.store.fs, committer.paths.dest, written)
            # Files a task wrote in place (or v2 published) are in the destination already: new, not old.
            new = {posixpath.join(committer.paths.dest, f) for result in accepted for f in result.outputs.values()}
            old = OldOutput(tuple(f for f in old.files if f not in new), old.directories)
        attempts = {result.task_id: result.task_attempt_id for result in accepted}
        committed = commit_replacing(committer, old, attempts)
        summary, replaced = committed.success, committed.replaced
    log.info(
        "Job %s committed %d tasks, %d rows into %s; %d old files replaced",
        job.job_id,
        len(accepted),
        sum(result.rows for result in accepted),
        job.destination,
        replaced,
    )
    return summary


def abort_write(job: WriteJob) -> None:
    """Abort the job after a failure; the destination is left as it was before the job. Never raises."""
    try:
        with _driver_committer(job) as committer:
            committer.abort_job()
    except Exception:
        log.exception("Abort of job %s into %s failed", job.job_id, job.destination)


def write_in_process(job: WriteJob, write: TaskWrite) -> SuccessData | None:
    """A whole job as one task in the calling process (pyarrow, Polars): ``None`` when ``ignore`` skipped it."""
    if not begin(job):
        return None
    try:
        result = run_task(job, 0, write=write)
        return commit_write(job, [result])
    except BaseException:
        abort_write(job)
        raise
