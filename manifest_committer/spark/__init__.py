"""Write Spark DataFrames through the manifest committer, safe under task retries and speculation.

Two ways in::

    import manifest_committer.spark as mcs

    mcs.write(df, "gs://bucket/table", format="parquet", partition_by=["dt", "country"], mode="overwrite")

    df.write.format("manifest").option("format", "parquet").option("partitionBy", "dt,country") \\
        .mode("append").save("abfs://container@account.dfs.core.windows.net/table")

``write()`` checks its options, the destination's scheme and the partition columns in the calling process before
Spark starts anything, so a mistake raises the library's own ``ConfigError``/``UnsupportedStoreError``.

The ``manifest`` format needs no set-up: PySpark 4 finds it in the installed module ``pyspark_manifest_committer``.
Such a data source sees only the writer's options, so committer keys go in as options; ``register(spark)`` instead
also captures the session's ``spark.hadoop.mapreduce.manifest.committer.*`` keys. Through the format, a bad option
is found on the driver before any task starts, but Spark reports it as an ``AnalysisException``
(``PYTHON_DATA_SOURCE_ERROR``) whose last line is the library's error.

PySpark 4.x refuses ``DataFrameWriter.partitionBy`` and the modes ``errorifexists`` (Spark's default) and
``ignore`` for Python data sources before the source is called: partition columns are the ``partitionBy``
option, and ``write()`` offers every mode (``errorifexists`` is its default, as in Spark). On S3 (``s3://``,
``s3a://``) the protocol ``auto`` is ``upload``: tasks leave multipart uploads at the final keys, the job commit
completes them (S3 has no rename the other protocols could rely on).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import shutil
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ..config import MANIFEST_PREFIX
from ..errors import CommitterError, ManifestError
from ..protocols.base import SUMMARY_FILENAME_FORMAT
from ..protocols.transactional.readers import committed_files
from ..store import open_destination_store, store_bindings
from ..success_data import SuccessData
from ..writing.job import DestinationExistsError
from ..writing.modes import PartitionOverwriteMode, SaveMode, destination_has_data
from .datasource import (
    JOB_ID_SOURCE,
    OPTION_JOB_ID,
    OPTION_JOB_SET_UP,
    PARTITION_OVERWRITE_MODE_KEY,
    SHORT_NAME,
    SPARK_DRIVER_HOST_KEY,
    ManifestCommitMessage,
    ManifestDataSource,
    ManifestWriter,
    WriteSettings,
    check_columns,
    committer_conf,
    new_job_id,
    with_driver_address,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "JOB_ID_SOURCE",
    "SHORT_NAME",
    "DestinationExistsError",
    "ManifestCommitMessage",
    "ManifestDataSource",
    "ManifestWriter",
    "PartitionOverwriteMode",
    "SaveMode",
    "WriteSettings",
    "read",
    "register",
    "write",
]


log = logging.getLogger(__name__)

SUMMARY_REPORT_DIRECTORY_KEY = MANIFEST_PREFIX + "summary.report.directory"


def _session_conf(spark: SparkSession) -> dict[str, str]:
    """The session's committer keys, and the driver's host as the marker server's address unless one is set:
    the job is set up in this process, the driver, which Spark's executors on every host reach there."""
    conf = {str(key): str(value) for key, value in spark.conf.getAll.items()}
    return with_driver_address(committer_conf(conf), conf.get(SPARK_DRIVER_HOST_KEY))


def read(
    spark: SparkSession,
    url: str,
    *,
    format: str = "parquet",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    schema: Any = None,
) -> DataFrame:
    """Read what a reader may read of ``url``: its committed files (``mc.committed_files``), partition columns from
    the directory names. Spark's own reader lists every file; under the transactional protocol that includes
    uncommitted attempts' files and files a later overwrite removed, which this leaves out.
    ``options`` go to Spark's reader; ``schema`` (a ``StructType`` or DDL string) is needed to read an empty table.
    """
    # Hadoop's Path takes a string literally (no percent-decoding): the decoded URLs name the files.
    files = [urllib.parse.unquote(file_url) for file_url in committed_files(url, dict(storage_options or {}))]
    reader = spark.read.format(format).option("basePath", url)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    if schema is not None:
        reader = reader.schema(schema)
    if not files:
        if schema is None:
            raise CommitterError(f"{url}: no committed data file to read; give a schema to read an empty table")
        return spark.createDataFrame([], schema)
    return reader.load(files)


def register(spark: SparkSession) -> None:
    """Register the ``manifest`` data source in ``spark``, with the session's committer keys as of now.

    A data source sees only its options, so the ``spark.hadoop.mapreduce.manifest.committer.*`` keys and
    ``spark.sql.sources.partitionOverwriteMode`` are read here and travel inside the registered class; options
    of a write override them. Register again after changing them (``write()`` reads them at every call).
    """
    captured = _session_conf(spark)
    source = type(ManifestDataSource.__name__, (ManifestDataSource,), {"session_conf": captured})
    spark.dataSource.register(source)


def _writer_options(
    spark: SparkSession,
    *,
    format: str,
    partition_by: Sequence[str],
    storage: Mapping[str, Any],
    options: Mapping[str, str] | None,
) -> dict[str, str]:
    """The data source options of one ``write()``: session keys, then the caller's options, then the arguments."""
    # Option keys are case-insensitive in Spark: lower-case them all so a later one replaces an earlier one.
    writer_options = {key.lower(): value for key, value in _session_conf(spark).items()}
    if PARTITION_OVERWRITE_MODE_KEY.lower() in writer_options:
        writer_options["partitionoverwritemode"] = writer_options.pop(PARTITION_OVERWRITE_MODE_KEY.lower())
    writer_options.update({key.lower(): str(value) for key, value in (options or {}).items()})
    writer_options["format"] = format
    if partition_by:
        writer_options["partitionby"] = ",".join(partition_by)
    if storage:
        writer_options["storage_options"] = orjson.dumps(dict(storage)).decode("utf-8")
    return writer_options


def _read_summary(url: str, storage: Mapping[str, Any], job_id: str) -> SuccessData | None:
    """The successful summary of job ``job_id`` in the file ``url``, or ``None`` if it is not there."""
    try:
        opened = open_destination_store(url, dict(storage))
    except CommitterError as error:
        log.warning("Cannot open %s to read the summary of job %s: %s", url, job_id, error)
        return None
    try:
        data = opened.store.read_bytes(opened.path)
    except FileNotFoundError:
        return None
    finally:
        opened.store.close()
    try:
        summary = SuccessData.from_json(data, url)
    except ManifestError as error:
        log.warning("Not the summary of job %s: %s", job_id, error)
        return None
    return summary if summary.success and summary.job_id == job_id else None


def _job_summary(
    url: str, storage: Mapping[str, Any], job_id: str, report_directory: str, report_storage: Mapping[str, Any]
) -> SuccessData:
    """The committed job's ``SuccessData``, read back through the store: its job commit ran in a worker process
    that Spark started, which hands nothing back to this one.

    First the summary report ``summary-<jobId>.json`` (written by the job commit itself, so no other job can have
    replaced it), then ``_SUCCESS`` (if it is still this job's). ``CommitterError`` naming both if neither is.
    """
    report = posixpath.join(report_directory.rstrip("/"), SUMMARY_FILENAME_FORMAT.format(job_id=job_id))
    success = posixpath.join(url.rstrip("/"), "_SUCCESS")
    summary = _read_summary(report, report_storage, job_id) or _read_summary(success, storage, job_id)
    if summary is None:
        raise CommitterError(
            f"{url}: job {job_id} committed, but neither {report} nor {success} holds its summary "
            "(another job replaced _SUCCESS, and the summary report could not be written)"
        )
    return summary


def write(
    df: DataFrame,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    protocol: str = "auto",
) -> SuccessData | None:
    """Write ``df`` to ``url`` through the manifest committer in any save mode; returns the job's ``SuccessData``
    once the job committed (``None`` when mode ``ignore`` skipped the write).

    ``mode``: ``errorifexists`` (fails if ``url`` holds data), ``ignore`` (does nothing then), ``append``,
    ``overwrite`` (old files go only after the new job committed; with
    ``options={"partitionOverwriteMode": "dynamic"}`` or the session's ``spark.sql.sources.partitionOverwriteMode``
    only the partitions written). ``storage_options`` reach fsspec on the driver and every executor and must be
    JSON-serialisable. ``options``: writer options such as ``maxRecordsPerFile``, ``maxOpenFiles``,
    ``compression``, ``header`` and committer keys (``mapreduce.manifest.committer.*``). ``protocol``: the commit
    protocol (``manifest_committer.create_committer``; the data source option ``protocol`` too).

    The summary comes back through the store (the job commit runs in a worker Spark starts): from the committer
    key ``summary.report.directory`` if set, else from a temporary directory of this process that the write is
    given as that key (the driver's workers run on this host), else from ``_SUCCESS`` if it is this job's.
    """
    store_bindings().check(url, "url")
    save_mode = SaveMode.parse(mode)
    spark = df.sparkSession
    storage = dict(storage_options or {})
    writer_options = _writer_options(spark, format=format, partition_by=partition_by, storage=storage, options=options)
    writer_options["protocol"] = protocol
    # Checked here, in the caller's process: inside Spark the same error would arrive as the last line of an
    # AnalysisException. The data source checks again on the driver with exactly these options.
    settings = WriteSettings.from_options(
        {**writer_options, "path": url}, overwrite=save_mode is SaveMode.OVERWRITE, session_conf=None
    )
    check_columns(settings, df.columns)
    opened = open_destination_store(url, storage)
    try:
        holds_data = save_mode in (SaveMode.ERROR_IF_EXISTS, SaveMode.IGNORE) and destination_has_data(
            opened.store.fs, opened.path
        )
    finally:
        opened.store.close()
    if holds_data:
        if save_mode is SaveMode.IGNORE:
            return None
        raise DestinationExistsError(f"{url}: the destination already holds data (save mode errorifexists)")
    register(spark)
    spark_mode = "overwrite" if save_mode is SaveMode.OVERWRITE else "append"
    job_id = new_job_id()
    writer_options[OPTION_JOB_ID] = job_id
    report_directory = settings.config.summary_report_directory
    private = None
    if report_directory is None:
        private = tempfile.mkdtemp(prefix="manifest-committer-summary-")
        report_directory = private
        writer_options[SUMMARY_REPORT_DIRECTORY_KEY] = private
    try:
        # The job is set up here, in the caller's process, which hosts its driver side until the write returns
        # (the marker server of transactional and upload: a worker Spark starts for the data source would exit with
        # it). The data source is told not to set the job up again.
        driver = WriteSettings.from_options(
            {**writer_options, "path": url},
            overwrite=save_mode is SaveMode.OVERWRITE,
            session_conf=_session_conf(spark),
        )
        with driver.committer() as committer:
            committer.setup_job()
            try:
                df.write.format(SHORT_NAME).options(**writer_options, **{OPTION_JOB_SET_UP: "true"}).mode(
                    spark_mode
                ).save(url)
            except BaseException:
                # Spark aborts the job it ran; one that failed before Spark reached the source is aborted here
                # (a second abort does nothing, and after the commit point an abort keeps the output).
                with contextlib.suppress(Exception):
                    committer.abort_job()
                raise
        return _job_summary(url, storage, job_id, report_directory, storage if private is None else {})
    finally:
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
