"""The ``manifest`` Python data source: Spark tasks write with pyarrow, the manifest committer publishes.

PySpark's commit coordinator decides only which attempt's commit message reaches the driver, after ``write`` has run
to its end, so it cannot gate a task commit done inside ``write``. Every task attempt therefore commits its own
manifest under a task id unique to the attempt (``task_<partition>_<taskAttemptId>``), and the driver's job commit
loads exactly the manifests the accepted messages name, failing before it touches the destination when one is
missing or of another attempt. Where the task commit publishes (``v2``), ``write`` does all but the task commit and
the driver runs the task commits of the accepted attempts only. So under every protocol exactly one attempt's rows
are left. The facts of PySpark's write path this rests on: docs/writers.md, "How the Spark writer plugs in".
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from ..config import MANIFEST_PREFIX, SPARK_HADOOP_PREFIX, CommitterConfig, MarkerType, check_key
from ..errors import CommitterError, ConfigError, JobStateError
from ..protocols.base import CommitterBase
from ..protocols.registry import create_committer, hosts_marker_server, resolve_protocol
from ..writing.formats import (
    PARQUET,
    PARQUET_BLOCK_SIZE,
    PARQUET_PAGE_SIZE,
    TIMESTAMP_TYPES,
    OutputFormat,
    output_format,
)
from ..writing.job import int_option, is_committer_key
from ..writing.modes import OldOutput, PartitionOverwriteMode, commit_replacing, list_old_output
from ..writing.options import check_options
from ..writing.task_output import TaskOutput as _TaskOutput

try:
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
except ImportError as error:  # pragma: no cover - the spark extra is missing
    raise ImportError(
        "manifest_committer.spark needs pyspark>=4.0 and pyarrow: pip install 'manifest-committer[spark]'"
    ) from error

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

SHORT_NAME = "manifest"
"""The name ``df.write.format(...)`` uses."""
JOB_ID_SOURCE = "spark.sql.sources.writeJobUUID"
"""What ``_SUCCESS`` names as the origin of the job id, as Hadoop does for a job id that Spark generated."""
PARTITION_OVERWRITE_MODE_KEY = "spark.sql.sources.partitionOverwriteMode"

OPTION_PATH = "path"
OPTION_FORMAT = "format"
OPTION_PARTITION_BY = "partitionby"
OPTION_MAX_RECORDS_PER_FILE = "maxrecordsperfile"
OPTION_PARTITION_OVERWRITE_MODE = "partitionoverwritemode"
OPTION_STORAGE_OPTIONS = "storage_options"
OPTION_COMPRESSION = "compression"
OPTION_HEADER = "header"
OPTION_MAX_OPEN_FILES = "maxopenfiles"
OPTION_PROTOCOL = "protocol"
OPTION_JOB_ID = "jobid"
OPTION_JOB_SET_UP = "jobsetup"
"""``true``: the caller set the job (``jobid``) up and hosts its driver side; ``writer()`` must not set it up."""
"""The job id (``write()`` sets it, to find the job's summary afterwards); a fresh ``spark-<uuid>`` if absent."""
OPTION_PARQUET_BLOCK_SIZE = PARQUET_BLOCK_SIZE
OPTION_PARQUET_PAGE_SIZE = PARQUET_PAGE_SIZE
PARQUET_CODEC_KEY = "spark.sql.parquet.compression.codec"
"""Spark's session default of the Parquet codec; the writer option ``compression`` overrides it."""
OUTPUT_TIMESTAMP_TYPE_KEY = "spark.sql.parquet.outputTimestampType"
"""How Spark stores time zone aware timestamps in Parquet (``INT96`` by default)."""
DEFAULT_OUTPUT_TIMESTAMP_TYPE = "INT96"
SPARK_VERSION_METADATA_KEY = "org.apache.spark.version"
SPARK_ROW_METADATA_KEY = "org.apache.spark.sql.parquet.row.metadata"
"""The footer key of the schema Spark reads a Parquet file back with (its types, nullability, field metadata)."""
_FILE_KEYS = {
    PARQUET_CODEC_KEY: PARQUET_CODEC_KEY.lower(),
    OUTPUT_TIMESTAMP_TYPE_KEY: OUTPUT_TIMESTAMP_TYPE_KEY.lower(),
    SPARK_HADOOP_PREFIX + PARQUET_BLOCK_SIZE: OPTION_PARQUET_BLOCK_SIZE,
    SPARK_HADOOP_PREFIX + PARQUET_PAGE_SIZE: OPTION_PARQUET_PAGE_SIZE,
}
"""Session keys that shape the files, and the option each travels to the data source as."""
DEFAULT_MAX_OPEN_FILES = 64
"""Files one task keeps open at once (Spark's counterpart: ``spark.sql.maxConcurrentOutputFileWriters``)."""
_PLAIN_OPTIONS = frozenset(
    {
        OPTION_PATH,
        OPTION_FORMAT,
        OPTION_PARTITION_BY,
        OPTION_MAX_RECORDS_PER_FILE,
        OPTION_PARTITION_OVERWRITE_MODE,
        OPTION_STORAGE_OPTIONS,
        OPTION_COMPRESSION,
        OPTION_HEADER,
        OPTION_MAX_OPEN_FILES,
        OPTION_PROTOCOL,
        OPTION_JOB_ID,
        OPTION_JOB_SET_UP,
        *_FILE_KEYS.values(),
    }
)


def committer_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The committer's keys of a Spark or Hadoop conf (``spark.hadoop.`` prefix or not), with the session's
    ``spark.sql.sources.partitionOverwriteMode``: what the driver ships to the data source as options.

    A session's keys are case-sensitive, as Hadoop's are: a key that only looks like the committer's (a misspelt
    or upper-case prefix, a bare short form) or an unknown one of its families is an error naming it
    (``check_key``), as in ``CommitterConfig.from_hadoop_conf``: a session key is never dropped silently.
    """
    for key in conf:
        check_key(key)
    selected = {key: value for key, value in conf.items() if is_committer_key(key)}
    selected.update({option: conf[key] for key, option in _FILE_KEYS.items() if key in conf})
    if PARTITION_OVERWRITE_MODE_KEY in conf:
        selected[PARTITION_OVERWRITE_MODE_KEY] = conf[PARTITION_OVERWRITE_MODE_KEY]
    return selected


MARKERS_SERVER_ADDRESS_KEY = MANIFEST_PREFIX + "markers.server.address"
SPARK_DRIVER_HOST_KEY = "spark.driver.host"


def with_driver_address(conf: Mapping[str, str], driver_host: str | None) -> dict[str, str]:
    """``conf`` with ``markers.server.address`` set to the driver's host (``spark.driver.host``, the address Spark's
    executors reach the driver on) unless a key of ``conf`` sets it already: the marker server then listens where
    every executor can reach it."""
    result = dict(conf)
    if not driver_host or any(
        key.lower().removeprefix(SPARK_HADOOP_PREFIX) == MARKERS_SERVER_ADDRESS_KEY for key in result
    ):
        return result
    result[MARKERS_SERVER_ADDRESS_KEY] = driver_host
    return result


# --- settings ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteSettings:
    """Everything about one write that the driver decides and every task needs; picklable."""

    destination: str
    job_id: str
    output_format: OutputFormat
    partition_by: tuple[str, ...] = ()
    max_records_per_file: int = 0
    """Most rows in one file; 0 means no limit (Spark's ``maxRecordsPerFile``)."""
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    """Files one task keeps open (``maxOpenFiles``): each holds a write buffer, so a task that meets thousands
    of partitions would otherwise hold thousands of them. Past it, the least recently written file is finished
    and the partition's next rows start a new file."""
    overwrite: bool = False
    partition_overwrite_mode: PartitionOverwriteMode = PartitionOverwriteMode.STATIC
    storage_options: dict[str, Any] = field(default_factory=dict)
    config: CommitterConfig = field(default_factory=CommitterConfig)
    protocol: str = "manifest"
    """The commit protocol (``create_committer``), resolved on the driver so every task uses the same one."""

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, overwrite: bool, session_conf: Mapping[str, str] | None = None
    ) -> WriteSettings:
        """Parse writer options over the session conf the driver shipped; an unknown option is an error."""
        merged: dict[str, str] = {}
        for key, value in (session_conf or {}).items():
            if key == PARTITION_OVERWRITE_MODE_KEY:
                merged[OPTION_PARTITION_OVERWRITE_MODE] = value
            else:
                merged[key.lower()] = value
        merged.update({key.lower(): value for key, value in options.items()})
        hadoop = {key: value for key, value in merged.items() if is_committer_key(key)}
        check_options(merged.keys() - hadoop.keys(), _PLAIN_OPTIONS, "option", f"of the {SHORT_NAME} data source")
        destination = merged.get(OPTION_PATH, "").strip()
        if not destination:
            raise ConfigError(f"the {SHORT_NAME} data source needs a destination: save(url) or option('path', url)")
        partition_by = tuple(c.strip() for c in merged.get(OPTION_PARTITION_BY, "").split(",") if c.strip())
        if len(set(partition_by)) != len(partition_by):
            raise ConfigError(f"partitionBy names a column twice: {','.join(partition_by)}")
        max_records = int_option(merged, OPTION_MAX_RECORDS_PER_FILE, "maxRecordsPerFile", 0)
        max_open_files = int_option(merged, OPTION_MAX_OPEN_FILES, "maxOpenFiles", DEFAULT_MAX_OPEN_FILES, 1)
        storage_text = merged.get(OPTION_STORAGE_OPTIONS, "").strip()
        try:
            storage_options = orjson.loads(storage_text) if storage_text else {}
        except orjson.JSONDecodeError:
            raise ConfigError(f"storage_options: expected a JSON object, got {storage_text!r}") from None
        if not isinstance(storage_options, dict):
            raise ConfigError(f"storage_options: expected a JSON object, got {storage_text!r}")
        protocol = resolve_protocol(destination, merged.get(OPTION_PROTOCOL, "auto").strip())
        if OPTION_COMPRESSION not in merged and PARQUET_CODEC_KEY.lower() in merged:
            merged[OPTION_COMPRESSION] = merged[PARQUET_CODEC_KEY.lower()]
        timestamp_type = merged.get(OUTPUT_TIMESTAMP_TYPE_KEY.lower(), DEFAULT_OUTPUT_TIMESTAMP_TYPE).strip().upper()
        if timestamp_type not in TIMESTAMP_TYPES:
            raise ConfigError(
                f"{OUTPUT_TIMESTAMP_TYPE_KEY}: expected one of {', '.join(TIMESTAMP_TYPES)}, got {timestamp_type!r}"
            )
        file_format = dataclasses.replace(
            output_format(merged.get(OPTION_FORMAT, "parquet"), merged), timestamp_type=timestamp_type
        )
        return cls(
            protocol=protocol,
            destination=destination,
            job_id=merged.get(OPTION_JOB_ID, "").strip() or new_job_id(),
            output_format=file_format,
            partition_by=partition_by,
            max_records_per_file=max(max_records, 0),
            max_open_files=max_open_files,
            overwrite=overwrite,
            partition_overwrite_mode=PartitionOverwriteMode.parse(
                merged.get(OPTION_PARTITION_OVERWRITE_MODE, PartitionOverwriteMode.STATIC.value)
            ),
            storage_options=storage_options,
            config=CommitterConfig.from_hadoop_conf(hadoop),
        )

    def with_schema(self, schema: StructType) -> WriteSettings:
        """These settings for rows of ``schema``: Parquet files carry Spark's footer metadata, the schema of their
        columns (no partition columns) that Spark reads them back with: ``variant``, nullability, field metadata."""
        if self.output_format.name != PARQUET:
            return self
        import pyspark
        from pyspark.sql.types import StructType

        data = StructType([field for field in schema.fields if field.name not in self.partition_by])
        footer = ((SPARK_VERSION_METADATA_KEY, pyspark.__version__), (SPARK_ROW_METADATA_KEY, data.json()))
        return dataclasses.replace(self, output_format=dataclasses.replace(self.output_format, footer=footer))

    @property
    def dynamic_overwrite(self) -> bool:
        """Replace only the partitions this job writes (needs partition columns, like Spark)."""
        return (
            self.overwrite
            and bool(self.partition_by)
            and self.partition_overwrite_mode is PartitionOverwriteMode.DYNAMIC
        )

    def committer(self, **kwargs: Any) -> CommitterBase:
        """A committer of this job and protocol; any process builds the same one."""
        return create_committer(
            self.destination,
            self.job_id,
            self.protocol,
            config=self.config,
            storage_options=self.storage_options,
            job_id_source=JOB_ID_SOURCE,
            **kwargs,
        )


def new_job_id() -> str:
    """A job id unique to one write, as Spark's ``spark.sql.sources.writeJobUUID``."""
    return f"spark-{uuid.uuid4()}"


def check_columns(settings: WriteSettings, columns: Sequence[str]) -> None:
    """The partition columns are columns of the data, and at least one data column remains."""
    names = list(columns)
    missing = [column for column in settings.partition_by if column not in names]
    if missing:
        raise ConfigError(f"partition column {missing[0]!r} is not a column of the data: {', '.join(names)}")
    if settings.partition_by and len(settings.partition_by) == len(names):
        raise ConfigError("every column is a partition column: at least one data column must remain")


# --- commit messages -----------------------------------------------------------------------------------------------


def task_ids(partition_id: int, spark_task_attempt_id: int) -> tuple[str, str]:
    """(task id, task attempt id) of one Spark task attempt: both unique per attempt, so manifests never clash."""
    return f"task_{partition_id:05d}_{spark_task_attempt_id}", f"attempt_{partition_id:05d}_{spark_task_attempt_id}"


@dataclass(frozen=True)
class ManifestCommitMessage(WriterCommitMessage):
    """What one task attempt tells the driver: which manifest is its own, and what it wrote."""

    job_id: str
    partition_id: int
    attempt_number: int
    spark_task_attempt_id: int
    task_id: str
    task_attempt_id: str
    rows: int
    files: tuple[str, ...]
    """Destination-relative paths of the attempt's files."""
    partitions: tuple[str, ...]
    """Destination-relative partition directories the attempt wrote into."""
    task_committed: bool = True
    """False where the protocol's task commit publishes (v2): the driver commits the task, if Spark accepts it."""
    outputs: tuple[tuple[str, str], ...] = ()
    """Where ``task_committed`` is false: (file name in the attempt directory, destination-relative path)."""


# --- the task side ------------------------------------------------------------------------------------------------


def _remove_empty_job_dirs(committer: CommitterBase) -> None:
    """After a late attempt cleaned up behind an ended job, remove the directories its writes recreated."""
    for directory in committer.job_state_directories():
        with contextlib.suppress(Exception):
            committer.store.remove_empty_dir(directory)


# --- the writer ------------------------------------------------------------------------------------------------------


class ManifestWriter(DataSourceArrowWriter):
    """Writes each Spark task's batches into its attempt directory, commits the task; the driver commits the job."""

    def __init__(self, settings: WriteSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> ManifestCommitMessage:
        """On an executor: write this attempt's rows, then commit the task (publish its manifest)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise CommitterError(f"job {self.settings.job_id}: write() must run inside a Spark task")
        partition_id = context.partitionId()
        spark_attempt = context.taskAttemptId()
        task_id, attempt_id = task_ids(partition_id, spark_attempt)
        # The committer's own client closes when the task ends; keep_alive beats the job's heartbeat meanwhile
        # where no driver process hosts it (transactional or upload, set up by this data source).
        with self.settings.committer() as committer, committer.keep_alive(attempt_id):
            task = committer.setup_task(task_id, attempt_id)
            output = _TaskOutput(
                task, self.settings, partition_id, spark_attempt, in_place=committer.task_writes_in_place
            )
            try:
                try:
                    for batch in iterator:
                        if batch.num_rows:
                            output.write(batch)
                finally:
                    output.close()
                if not committer.job_is_live():
                    # Spark killed this attempt (a speculation loser, or a failed stage) and its input just ended:
                    # the job was committed or aborted meanwhile. Publishing now would leave debris in _temporary.
                    raise JobStateError(
                        f"{committer.destination_url}: job {self.settings.job_id} ended "
                        f"before task attempt {attempt_id} could commit"
                    )
                task_committed = not committer.task_commit_publishes
                if task_committed:
                    committer.commit_task(task, output.outputs)
            except BaseException:
                with contextlib.suppress(Exception):
                    committer.abort_task(task)
                if not committer.job_is_live():
                    _remove_empty_job_dirs(committer)
                raise
        return ManifestCommitMessage(
            job_id=self.settings.job_id,
            partition_id=partition_id,
            attempt_number=context.attemptNumber(),
            spark_task_attempt_id=spark_attempt,
            task_id=task_id,
            task_attempt_id=attempt_id,
            rows=output.rows,
            files=tuple(output.files),
            partitions=tuple(sorted(output.partitions)),
            task_committed=task_committed,
            outputs=() if task_committed else tuple(output.outputs.items()),
        )

    def accepted_messages(self, messages: Sequence[WriterCommitMessage | None]) -> list[ManifestCommitMessage]:
        """The messages Spark accepted, checked: all present, of this job, one per partition."""
        accepted: list[ManifestCommitMessage] = []
        partitions: set[int] = set()
        for index, message in enumerate(messages):
            if not isinstance(message, ManifestCommitMessage):
                raise CommitterError(
                    f"job {self.settings.job_id}: commit message {index} is {type(message).__name__}, "
                    "not a message of a committed task"
                )
            if message.job_id != self.settings.job_id:
                raise CommitterError(
                    f"job {self.settings.job_id}: commit message of task {message.task_id} belongs to job "
                    f"{message.job_id}"
                )
            if message.partition_id in partitions:
                raise CommitterError(
                    f"job {self.settings.job_id}: two commit messages of partition {message.partition_id}"
                )
            partitions.add(message.partition_id)
            accepted.append(message)
        return accepted

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """On the driver: commit the job from the accepted attempts' manifests, then replace old output."""
        settings = self.settings
        accepted = self.accepted_messages(messages)
        with settings.committer() as committer:
            self._commit(committer, accepted)

    def _commit(self, committer: CommitterBase, accepted: list[ManifestCommitMessage]) -> None:
        settings = self.settings
        fs = committer.store.fs
        old = None
        if settings.overwrite:
            written = {d for message in accepted for d in message.partitions} if settings.dynamic_overwrite else None
            old = list_old_output(fs, committer.paths.dest, written)
            # Under v2 the accepted attempts' files are in the destination already: they are new, not old.
            new = {posixpath.join(committer.paths.dest, f) for message in accepted for f in message.files}
            old = OldOutput(tuple(f for f in old.files if f not in new), old.directories)
        for message in accepted:
            if not message.task_committed:
                # A publishing task commit (v2), deferred to here so that only the accepted attempt publishes.
                task = committer.task_attempt(message.task_id, message.task_attempt_id)
                committer.commit_task(task, dict(message.outputs))
        # Only the attempts whose messages Spark's commit coordinator let through; manifests of losers, denied
        # or killed attempts stay in _temporary and go with it.
        accepted_attempts = {message.task_id: message.task_attempt_id for message in accepted}
        deleted = commit_replacing(committer, old, accepted_attempts).replaced
        log.info(
            "Job %s committed %d tasks, %d rows into %s; %d old files replaced",
            settings.job_id,
            len(accepted),
            sum(message.rows for message in accepted),
            committer.destination_url,
            deleted,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """On the driver: abort the job; the destination is left as it was before the job."""
        with self.settings.committer() as committer:
            committer.abort_job()


class ManifestDataSource(DataSource):
    """``df.write.format("manifest")``: files through the manifest committer; see the module docstring."""

    session_conf: ClassVar[dict[str, str]] = {}
    """Committer keys of the session conf, captured by ``register()`` (a data source cannot read the conf)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def writer(self, schema: StructType, overwrite: bool) -> ManifestWriter:
        """On the driver: parse the options, check the partition columns and set up the job."""
        settings = WriteSettings.from_options(self.options, overwrite=overwrite, session_conf=self.session_conf)
        check_columns(settings, schema.fieldNames())
        settings = settings.with_schema(schema)
        if self.options.get(OPTION_JOB_SET_UP, "").strip().lower() == "true":
            # manifest_committer.spark.write set the job up in the caller's process, which hosts the driver's
            # side of it (the marker server of the transactional and upload protocols) until the write returns.
            return ManifestWriter(settings)
        if hosts_marker_server(settings.protocol) and settings.config.markers_type is not MarkerType.DIRECT:
            # This worker exits once writer() returns, and a marker server here would die with it: tasks would
            # find it gone and the job would look dead to rollback. Direct markers need no server, and the
            # running tasks beat the job's heartbeat (keep_alive).
            log.info(
                "Job %s: direct write markers (format('%s') has no driver process to host a marker server; "
                "manifest_committer.spark.write has)",
                settings.job_id,
                SHORT_NAME,
            )
            settings = dataclasses.replace(
                settings, config=dataclasses.replace(settings.config, markers_type=MarkerType.DIRECT)
            )
        with settings.committer() as committer:
            committer.setup_job()
        log.info("Set up job %s writing %s into %s", settings.job_id, settings.output_format.name, settings.destination)
        return ManifestWriter(settings)
