"""Writing DataFrames through the ``manifest`` data source on a real local Spark session."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark import TaskContext
from pyspark.cloudpickle import register_pickle_by_value
from pyspark.sql import DataFrame, SparkSession, functions
from pyspark.sql.types import LongType, StringType, StructField, StructType

import manifest_committer as mc
import manifest_committer.spark as mcs
from manifest_committer.operate import inspect_destination
from manifest_committer.spark.datasource import ManifestDataSource, ManifestWriter
from manifest_committer.store import open_store

pytestmark = pytest.mark.spark

# Classes and UDFs of this module must reach the Python workers by value: the module is not importable there.
register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

SCHEMA = StructType(
    [StructField("id", LongType()), StructField("name", StringType()), StructField("country", StringType())]
)
ROWS = [(i, f"name {i}", ["DE", "FR", "a b/c=d%", None][i % 4]) for i in range(40)]
CLEANUP_THREAD = "manifest-committer-cleanup-"
"""The name prefix of the background delete's threads (``stages/cleanup.py``)."""


def frame(spark: SparkSession, rows: list[tuple[Any, ...]] = ROWS, partitions: int = 3) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA).repartition(partitions)


def read_back(spark: SparkSession, path: Path, fmt: str = "parquet") -> list[tuple[Any, ...]]:
    reader = spark.read.schema(SCHEMA)
    if fmt == "csv":
        reader = reader.option("header", "true")
    frame = reader.format(fmt).load(str(path))
    return sorted((tuple(row) for row in frame.select("id", "name", "country").collect()), key=lambda r: r[0])


def committed(root: Path) -> set[str]:
    """The files a reader may read (under the transactional protocol, what the commit records say)."""
    return set(mc.committed_files(str(root)))


def committed_rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    frame = mcs.read(spark, str(path), schema=SCHEMA)
    return sorted((tuple(row) for row in frame.select("id", "name", "country").collect()), key=lambda r: r[0])


def data_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not str(p.relative_to(root)).startswith("_")
    }


def job_state_files(root: Path) -> list[Path]:
    temporary = root / "_temporary"
    return [p for p in temporary.rglob("*") if p.is_file()] if temporary.exists() else []


def assert_no_job_state(root: Path, wait: float = 0.0) -> None:
    """Nothing of any job left under ``_temporary``; ``wait``: for how long tasks Spark killed may still run."""
    deadline = time.monotonic() + wait
    while job_state_files(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job_state_files(root) == []


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_every_format_reads_back_row_exact(spark: SparkSession, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark), str(out), format=fmt, options={"maxRecordsPerFile": "5"})
    assert read_back(spark, out, fmt) == sorted(ROWS)
    files = data_files(out)
    extension = {"parquet": ".snappy.parquet", "csv": ".csv", "json": ".json"}[fmt]
    assert files and all(name.endswith(extension) for name in files)
    assert len(files) >= 8  # 40 rows, at most 5 per file
    success = mc.SuccessData.load(str(out / "_SUCCESS"))
    assert success.success and success.job_id.startswith("spark-")
    assert sorted(name.rsplit("/", 1)[-1] for name in success.filenames) == sorted(files)
    assert_no_job_state(out)


def test_partitioned_write_escapes_odd_values(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark), str(out), partition_by=["country"], mode="append")
    directories = sorted(p.name for p in out.iterdir() if p.is_dir() and p.name != "_temporary")
    assert directories == [
        "country=DE",
        "country=FR",
        "country=__HIVE_DEFAULT_PARTITION__",
        "country=a b%2Fc%3Dd%25",
    ]
    assert read_back(spark, out) == sorted(ROWS)
    for path in out.rglob("*.parquet"):  # partition columns live in the path only
        assert spark.read.parquet(str(path)).columns == ["id", "name"]


def test_format_path_with_options_and_committer_keys(spark: SparkSession, tmp_path: Path) -> None:
    out, reports = tmp_path / "out", tmp_path / "reports"
    mcs.register(spark)
    (
        frame(spark)
        .write.format("manifest")
        .option("format", "csv")
        .option("partitionBy", "country")
        .option("mapreduce.manifest.committer.summary.report.directory", str(reports))
        .option("spark.hadoop.mapreduce.manifest.committer.validate.output", "true")
        .mode("append")
        .save(str(out))
    )
    assert read_back(spark, out, "csv") == sorted(ROWS)
    summaries = list(reports.glob("summary-spark-*.json"))
    assert len(summaries) == 1 and mc.SuccessData.load(str(summaries[0])).success
    with pytest.raises(Exception, match=r"mapreduce\.manifest\.committer\.no\.such\.key"):
        frame(spark).write.format("manifest").option("mapreduce.manifest.committer.no.such.key", "1").mode(
            "append"
        ).save(str(tmp_path / "other"))
    assert not (tmp_path / "other").exists() or not data_files(tmp_path / "other")


@pytest.mark.parametrize(
    ("url", "kwargs", "error", "message"),
    [
        ("OUT", {"options": {"mapreduce.manifest.committer.io.thread": "4"}}, mc.ConfigError, "did you mean"),
        ("OUT", {"options": {"maxOpenFiles": "0"}}, mc.ConfigError, "maxOpenFiles: must be at least 1"),
        ("OUT", {"partition_by": ["no_such_column"]}, mc.ConfigError, "'no_such_column' is not a column"),
        ("gss://bucket/table", {}, mc.UnsupportedStoreError, "unknown scheme gss://"),
    ],
)
def test_helper_raises_the_librarys_own_error_before_spark_runs_anything(  # noqa: PLR0917
    spark: SparkSession, tmp_path: Path, url: str, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Not an AnalysisException whose last line holds the error: the caller's process checks first."""
    destination = str(tmp_path / "out") if url == "OUT" else url
    with pytest.raises(error, match=message):
        mcs.write(frame(spark), destination, mode="append", **kwargs)
    assert not (tmp_path / "out").exists()


def test_session_conf_reaches_the_committer(spark: SparkSession, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    key = "spark.hadoop.mapreduce.manifest.committer.summary.report.directory"
    spark.conf.set(key, str(reports))
    try:
        mcs.write(frame(spark), str(tmp_path / "out"), mode="append")
    finally:
        spark.conf.unset(key)
    assert len(list(reports.glob("summary-spark-*.json"))) == 1


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("spark.hadoop.mapreduce.manifest.commiter.io.threads", "mapreduce.manifest.committer.io.threads"),
        ("spark.hadoop.MAPREDUCE.manifest.committer.io.threads", "mapreduce.manifest.committer.io.threads"),
    ],
)
def test_a_session_key_that_only_looks_like_the_committers_is_an_error(
    spark: SparkSession, tmp_path: Path, key: str, meant: str
) -> None:
    """Dropped silently, the job would run with the default the user meant to change."""
    spark.conf.set(key, "3")
    try:
        with pytest.raises(mc.ConfigError, match=re.escape(key) + ".*did you mean.*" + re.escape(meant)):
            mcs.write(frame(spark), str(tmp_path / "out"), mode="append")
    finally:
        spark.conf.unset(key)
    assert not (tmp_path / "out").exists()


def test_errorifexists_and_ignore(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark, ROWS[:10]), str(out))  # errorifexists on a new destination writes
    before = data_files(out)
    with pytest.raises(mcs.DestinationExistsError, match=str(out)):
        mcs.write(frame(spark, ROWS[10:]), str(out))
    mcs.write(frame(spark, ROWS[10:]), str(out), mode="ignore")
    assert data_files(out) == before
    assert read_back(spark, out) == sorted(ROWS[:10])
    fresh = tmp_path / "fresh"
    mcs.write(frame(spark, ROWS[10:]), str(fresh), mode="ignore")
    assert read_back(spark, fresh) == sorted(ROWS[10:])


def test_append_then_overwrite(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark, ROWS[:20]), str(out), mode="append")
    mcs.write(frame(spark, ROWS[20:]), str(out), mode="append")
    assert read_back(spark, out) == sorted(ROWS)
    old = set(data_files(out))
    mcs.write(frame(spark, ROWS[:5]), str(out), partition_by=["country"], mode="overwrite")
    assert read_back(spark, out) == sorted(ROWS[:5])
    assert not old & set(data_files(out))


def test_dynamic_partition_overwrite(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark), str(out), partition_by=["country"], mode="append")
    replacement: list[tuple[Any, ...]] = [(100, "new DE", "DE"), (101, "new XX", "XX")]
    mcs.write(
        frame(spark, replacement, 2),
        str(out),
        partition_by=["country"],
        mode="overwrite",
        options={"partitionOverwriteMode": "dynamic"},
    )
    expected = sorted([row for row in ROWS if row[2] != "DE"] + replacement)
    assert read_back(spark, out) == expected
    # The session's setting works as well, through the format path.
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        mcs.register(spark)
        frame(spark, [(200, "newer FR", "FR")], 1).write.format("manifest").option("partitionBy", "country").mode(
            "overwrite"
        ).save(str(out))
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
        mcs.register(spark)
    assert read_back(spark, out) == sorted([row for row in expected if row[2] != "FR"] + [(200, "newer FR", "FR")])


def fail_first_attempt(value: int) -> int:
    """Fails every task's first attempt on the row with id 7 (one task of the write)."""
    context = TaskContext.get()
    if value == 7 and context is not None and context.attemptNumber() == 0:
        raise ValueError("injected failure of a first attempt")
    return value


def test_first_attempt_task_failures_are_retried(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    df = frame(spark).withColumn("id", functions.udf(fail_first_attempt, LongType())("id"))
    mcs.write(df, str(out), mode="append")
    assert read_back(spark, out) == sorted(ROWS)
    assert_no_job_state(out)


class CommitsThenDiesWriter(ManifestWriter):
    """The executor dies after its task commit on first attempts: a manifest Spark never accepts."""

    def write(self, iterator: Any) -> mcs.ManifestCommitMessage:
        message = super().write(iterator)
        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0:
            raise RuntimeError("executor lost after the task commit")
        return message


class CommitsThenDiesSource(ManifestDataSource):
    @classmethod
    def name(cls) -> str:
        return "manifest_commits_then_dies"

    def writer(self, schema: StructType, overwrite: bool) -> ManifestWriter:
        return CommitsThenDiesWriter(super().writer(schema, overwrite).settings)


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2", "transactional"])
def test_manifests_of_unaccepted_attempts_never_reach_the_destination(
    spark: SparkSession, tmp_path: Path, protocol: str
) -> None:
    """First attempts finish ``write`` and die: Spark never accepts them. Under v2, whose task commit publishes,
    ``write`` leaves the task commit to the driver, so their rows never appear either. Under the transactional
    protocol their files are in the destination already: the job commit deletes them, found through markers."""
    out = tmp_path / "out"
    spark.dataSource.register(CommitsThenDiesSource)
    frame(spark).write.format("manifest_commits_then_dies").option("protocol", protocol).mode("append").save(str(out))
    assert committed_rows(spark, out) == sorted(ROWS)
    files = data_files(out)
    assert len(files) == 3
    # Every file is of a second attempt: first attempts committed their tasks, but were never accepted.
    success = mc.SuccessData.load(str(out / "_SUCCESS"))
    assert len(success.filenames) == 3
    assert_no_job_state(out)


def always_fail(value: int) -> int:
    if value == 7:
        raise ValueError("injected failure of every attempt")
    return value


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_failed_job_leaves_destination_as_it_was(spark: SparkSession, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    mcs.write(frame(spark, ROWS[:20]), str(out), partition_by=["country"], mode="append")
    before = data_files(out)
    success_before = (out / "_SUCCESS").read_bytes()
    with pytest.raises(Exception, match="injected failure of every attempt"):
        mcs.write(
            frame(spark).withColumn("id", functions.udf(always_fail, LongType())("id")),
            str(out),
            partition_by=["country"],
            mode=mode,
        )
    assert data_files(out) == before
    assert read_back(spark, out) == sorted(ROWS[:20])
    # Tasks Spark killed when the job failed see their input end and may try to commit after the job abort.
    assert_no_job_state(out, wait=10)
    # setup_job removed the old _SUCCESS (as Hadoop does), so a reader cannot mistake the failed job for done.
    assert not (out / "_SUCCESS").exists() or (out / "_SUCCESS").read_bytes() == success_before


def test_two_concurrent_appends_into_one_destination(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out"
    halves = [ROWS[:20], ROWS[20:]]
    errors: list[BaseException] = []

    def append(rows: list[tuple[Any, ...]]) -> None:
        try:
            mcs.write(frame(spark, rows), str(out), partition_by=["country"], mode="append")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=append, args=(rows,)) for rows in halves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert read_back(spark, out) == sorted(ROWS)
    assert_no_job_state(out)


def partition_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and "_temporary" not in p.parts)


def test_timestamp_and_date_partitions_match_spark_in_the_session_time_zone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark names timestamp partitions in the session time zone; Arrow hands the writer the same local time."""
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = spark.sql(
            "SELECT id, timestamp'2024-03-10 01:30:00.5' + make_interval(0, 0, 0, 0, id, 0, 0) AS ts, "
            "date'2024-01-02' AS d FROM range(3)"
        )
        df.write.partitionBy("ts", "d").parquet(str(tmp_path / "spark"))
        mcs.write(df, str(tmp_path / "ours"), partition_by=["ts", "d"])
        assert partition_dirs(tmp_path / "ours") == partition_dirs(tmp_path / "spark")
        assert "ts=2024-03-10 01%3A30%3A00.5" in partition_dirs(tmp_path / "ours")
        ours = spark.read.parquet(str(tmp_path / "ours")).orderBy("id").collect()
        assert ours == spark.read.parquet(str(tmp_path / "spark")).orderBy("id").collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous or "UTC")


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2", "transactional"])
def test_every_protocol_writes_appends_and_overwrites(spark: SparkSession, tmp_path: Path, protocol: str) -> None:
    """The helper's ``protocol=`` and the data source option ``protocol``; ``_SUCCESS`` names the protocol, and
    the helper returns the job's summary. Read back as readers of the protocol read (``mcs.read``: the committed
    files; Spark's own reader would also list what a transactional overwrite removed)."""
    out = tmp_path / "out"
    summary = mcs.write(frame(spark, ROWS[:20]), str(out), partition_by=["country"], mode="append", protocol=protocol)
    assert summary is not None and summary.success
    assert summary.job_id == mc.SuccessData.load(str(out / "_SUCCESS")).job_id
    assert len(summary.filenames) == len(committed(out))
    mcs.register(spark)
    frame(spark, ROWS[20:]).write.format("manifest").option("protocol", protocol).option("partitionBy", "country").mode(
        "append"
    ).save(str(out))
    assert committed_rows(spark, out) == sorted(ROWS)
    old = committed(out)

    mcs.write(frame(spark, ROWS[:5]), str(out), mode="overwrite", protocol=protocol)

    assert committed_rows(spark, out) == sorted(ROWS[:5])
    assert not old & committed(out)
    if protocol != "transactional":
        assert read_back(spark, out) == sorted(ROWS[:5]), "the old files are gone, not only hidden"
    expected = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
    assert mc.SuccessData.load(str(out / "_SUCCESS")).committer == (expected if protocol == "manifest" else protocol)
    assert_no_job_state(out)


def test_an_unknown_protocol_is_refused_before_spark_runs(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(mc.CommitterError, match="unknown commit protocol 'v9'"):
        mcs.write(frame(spark), str(tmp_path / "out"), protocol="v9")


@pytest.mark.parametrize("protocol", ["manifest", "v2"])
def test_write_returns_the_jobs_summary_without_success_file(
    spark: SparkSession, tmp_path: Path, protocol: str
) -> None:
    """With ``marksuccessfuljobs=false`` there is no ``_SUCCESS`` to read: the summary still comes back, from
    the job's summary report, and it is this job's (not the earlier one's)."""
    out = tmp_path / "out"
    first = mcs.write(frame(spark, ROWS[:20]), str(out), mode="append", protocol=protocol)
    options = {"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}
    second = mcs.write(frame(spark, ROWS[20:]), str(out), mode="append", protocol=protocol, options=options)

    assert first is not None and second is not None
    assert second.success and second.job_id != first.job_id
    assert second.iostatistics.counters["committer_files_committed"] == 3
    assert mc.SuccessData.load(str(out / "_SUCCESS")).job_id == first.job_id, "the earlier job's, left in place"
    assert read_back(spark, out) == sorted(ROWS)
    assert mcs.write(frame(spark, ROWS[:1]), str(out), mode="ignore", protocol=protocol) is None


def test_nothing_of_the_job_outlives_the_write(spark: SparkSession, tmp_path: Path) -> None:
    """The driver's job commit runs in a Python worker that Spark starts and then ends: the background delete of
    the job's state (``stages/cleanup.py``) is waited for there (the committer's ``close()``) before the worker
    answers Spark. So when ``write`` returns, the store is clean and the caller's process holds no delete of its
    own: an application that exits right after the write leaves no ``_temporary`` (not even an empty one),
    ``status`` shows no job and nothing being deleted, and the next job finds nothing to sweep."""
    out = tmp_path / "out"
    for mode, rows in (("errorifexists", ROWS[:20]), ("append", ROWS[20:])):
        summary = mcs.write(frame(spark, rows), str(out), partition_by=["country"], mode=mode)
        assert summary is not None and summary.success

        assert not (out / "_temporary").exists(), sorted(str(p) for p in (out / "_temporary").rglob("*"))
        cleaning = [thread.name for thread in threading.enumerate() if thread.name.startswith(CLEANUP_THREAD)]
        assert cleaning == [], "the caller's process deletes nothing: its exit can interrupt nothing"
        opened = open_store(str(out))
        store, dest = opened.store, opened.path
        try:
            status = inspect_destination(store, dest)
        finally:
            store.close()
        assert status.jobs == [] and status.state_being_deleted == []
        assert status.last_success is not None and status.last_success.job_id == summary.job_id
    assert read_back(spark, out) == sorted(ROWS)
