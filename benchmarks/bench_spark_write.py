"""Spark write benchmark: the same DataFrame written several ways in one Spark session on ``local[2]``.

* ``v1``: ``df.write.parquet`` with Hadoop's ``FileOutputCommitter``, algorithm version 1 (Spark's default
  commit protocol, ``SQLHadoopMapReduceCommitProtocol``).
* ``hadoop-manifest``: ``df.write.parquet`` with Hadoop 3.5's ``ManifestCommitter``
  (``mapreduce.outputcommitter.factory.scheme.file=...ManifestCommitterFactory``). Spark binds a
  ``PathOutputCommitter`` only through ``PathOutputCommitProtocol`` of the ``spark-hadoop-cloud`` module, which
  the pyspark wheel does not ship (nor ``BindingParquetOutputCommitter``). So this script compiles, with the JDK's
  ``javac`` against the wheel's jars, a 40-line stand-in (``bench.ManifestCommitProtocol``, source below): a
  ``HadoopMapReduceCommitProtocol`` whose committer comes from ``PathOutputCommitterFactory`` and whose task
  files go to that committer's ``getWorkPath()`` -- what ``PathOutputCommitProtocol`` does for non-dynamic writes.
* ``ours``: ``manifest_committer.spark.write(df, dest, format="parquet", partition_by=...)`` (the ``manifest``
  protocol).
* ``ours-v1``, ``ours-v2``, ``ours-transactional``: the same call with ``protocol="v1"``, ``"v2"`` or
  ``"transactional"`` (``--writers`` picks the writers; the default is the first three).

Workloads ``TASKSxPARTITIONS``: ``spark.range(rows, numPartitions=TASKS)`` (contiguous id slices, no shuffle)
with the partition column ``p = id % PARTITIONS``, so every task holds rows of every partition value and writes
exactly one file per value (``1`` partition: no partition column, one file per task). ``--files-per-task N``
gives every task N times the rows and every writer ``maxRecordsPerFile = --rows-per-file``, so each task writes
N files per value: 10,000 files from 200 unpartitioned tasks, say, without 10,000 Spark tasks. Every run writes into a
fresh directory. Per run the order of the writers rotates; one small unmeasured write of each comes first
(partitioned, unless ``--warm-unpartitioned``).

Measured: end-to-end wall time of the write call; job-commit time. For Hadoop's manifest committer and all of
ours that is ``committer_commit_job`` from the summary report
(``mapreduce.manifest.committer.summary.report.directory``; the ``_SUCCESS`` file is written before job commit
ends, so it cannot hold that duration). ``FileOutputCommitter`` has no statistics: for the two ``df.write``
writers Spark's own SQL metric "job commit time" (``BasicWriteJobStatsTracker``, read from the session's SQL
status store) is reported too.

``--shapes``: instead of the workloads, shapes of data (narrow, wide, string-heavy, nested, decimals, both timestamp
kinds, Variant, partitioned) written by Spark's own writer (``v1``) and by ``ours``, alternating; per writer the
files, bytes, Parquet row groups and the median wall time.

Run ``python benchmarks/bench_spark_write.py --help``; BENCHMARKS.md ("Spark writes") has the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import DataFrame, SparkSession, functions

# The checkout this script is in, not whatever package the interpreter finds first (run as a script, Python puts
# only benchmarks/ on the path, and the editable install of another checkout would be measured instead). Spark's
# Python workers get it too: see session().
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import manifest_committer as mc
import manifest_committer.spark as mcs

ROOT = str(Path(__file__).resolve().parents[1])
"""This checkout: the package measured, in this process and in Spark's workers."""

WRITERS = ("v1", "hadoop-manifest", "ours")
"""The default writers."""
PROTOCOL_WRITERS = {"ours": "manifest", "ours-v1": "v1", "ours-v2": "v2", "ours-transactional": "transactional"}
"""Each of this project's writers and the commit protocol it uses."""
ALL_WRITERS = ("v1", "hadoop-manifest", *PROTOCOL_WRITERS)
DEFAULT_CASES = ("64x1", "32x50", "200x50")
SPARK_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"
SHIM_CLASS = "bench.ManifestCommitProtocol"
SHIM_SOURCE = """\
package bench;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.OutputCommitter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitterFactory;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.internal.io.HadoopMapReduceCommitProtocol;

/** Stand-in for spark-hadoop-cloud's PathOutputCommitProtocol (not in the pyspark wheel), static writes only. */
public class ManifestCommitProtocol extends HadoopMapReduceCommitProtocol {
  private final String dest;
  private transient PathOutputCommitter pathCommitter;

  public ManifestCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, dynamicPartitionOverwrite);
    if (dynamicPartitionOverwrite) {
      throw new IllegalArgumentException("dynamic partition overwrite is not supported");
    }
    this.dest = path;
  }

  @Override
  public OutputCommitter setupCommitter(TaskAttemptContext context) {
    try {
      Path out = new Path(dest);
      pathCommitter = PathOutputCommitterFactory.getCommitterFactory(out, context.getConfiguration())
          .createOutputCommitter(out, context);
      return pathCommitter;
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, FileNameSpec spec) {
    try {
      Path work = pathCommitter.getWorkPath();
      Path parent = dir.isDefined() ? new Path(work, dir.get()) : work;
      return new Path(parent, getFilename(context, spec)).toString();
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }
}
"""


@dataclass
class Sample:
    case: str
    writer: str
    run: int
    wall_s: float
    commit_job_s: float | None  # committer_commit_job from the summary report (manifest committers)
    spark_job_commit_s: float | None  # Spark's "job commit time" SQL metric (df.write only)
    files: int
    after_commit_s: float | None = None
    """From the end of ``commit_job`` (the summary report's modification time) to the write's return: what waits
    for the background delete of the job's state (``close()`` in the driver's commit worker), plus Spark's tail."""


def compile_shim(work: Path) -> Path:
    """Compile ``bench.ManifestCommitProtocol`` against the pyspark wheel's jars; returns the class directory."""
    jars = Path(pyspark.__file__).parent / "jars"
    source = work / "shim" / "ManifestCommitProtocol.java"
    source.parent.mkdir(parents=True)
    source.write_text(SHIM_SOURCE)
    classes = work / "shim-classes"
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", f"{jars}/*", str(source)],
        check=True,
        capture_output=True,
    )
    return classes


def export_root_to_workers() -> None:
    """Put this checkout first on ``PYTHONPATH`` before the JVM starts: Spark's Python workers (tasks, the data
    source's planning and job commit) are other processes, and the JVM this process launches passes its
    ``PYTHONPATH`` on to every worker it starts. Without it they import whichever package their interpreter finds.
    """
    rest = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != ROOT]
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *rest])
    # And this interpreter (its virtualenv's packages), not whichever ``python3`` the PATH finds first.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def session(classes: Path, reports: Path) -> SparkSession:
    export_root_to_workers()
    return (
        SparkSession.builder.master("local[2]")
        .appName("bench_spark_write")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.extraClassPath", str(classes))
        .config("spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version", "1")
        .config(
            "spark.hadoop.mapreduce.outputcommitter.factory.scheme.file",
            "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory",
        )
        # Read by both manifest committers (ours captures the session's mapreduce.manifest.committer.* keys).
        .config("spark.hadoop.mapreduce.manifest.committer.summary.report.directory", str(reports))
        .getOrCreate()
    )


def frame(spark: SparkSession, tasks: int, partitions: int, rows_per_file: int, files_per_task: int = 1) -> DataFrame:
    df = spark.range(0, tasks * partitions * files_per_task * rows_per_file, numPartitions=tasks)
    columns = [
        functions.col("id"),
        (functions.col("id") * 7 % 1000).alias("value"),
        functions.lit("payload").alias("text"),
    ]
    if partitions > 1:
        columns.append((functions.col("id") % partitions).alias("p"))
    return df.select(*columns)


def last_job_commit_metric(spark: SparkSession) -> float | None:
    """Spark's "job commit time" metric of the last SQL execution, in seconds (the listener bus is asynchronous)."""
    jss = spark._jsparkSession
    store = jss.sharedState().statusStore()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        executions = store.executionsList()
        last = executions.apply(executions.size() - 1)
        accumulator = None
        plan_metrics = last.metrics()
        for index in range(plan_metrics.size()):
            metric = plan_metrics.apply(index)
            if metric.name() == "job commit time":
                accumulator = metric.accumulatorId()
        if accumulator is not None and last.completionTime().isDefined():
            text = store.executionMetrics(last.executionId()).mkString("\n")
            for line in str(text).splitlines():
                key, _, value = line.partition(" -> ")
                if key.strip() == str(accumulator):
                    return parse_duration(value)
        time.sleep(0.2)
    return None


def parse_duration(text: str) -> float:
    """The first duration in a formatted SQL timing metric (``"1.2 s"``, ``"850 ms"``, ``"1.0 m"``), in seconds."""
    match = re.search(r"([\d.,]+)\s*(ms|s|m|h)\b", text)
    if match is None:
        raise ValueError(f"no duration in {text!r}")
    number = float(match.group(1).replace(",", ""))
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[match.group(2)]


@dataclass(frozen=True)
class SummaryTimes:
    commit_job_s: float | None
    """``committer_commit_job`` of the summary report."""
    written_at: float
    """The report's modification time (``time.time()`` scale): the end of ``commit_job``, which writes it last."""


def summary_commit_job(reports: Path) -> SummaryTimes:
    """``committer_commit_job`` (seconds) from the only summary report in ``reports``, which is then emptied."""
    found = sorted(reports.glob("summary-*.json"))
    if len(found) != 1:
        raise RuntimeError(f"expected one summary report in {reports}, found {len(found)}")
    written_at = found[0].stat().st_mtime
    summary = mc.SuccessData.load(str(found[0]))
    found[0].unlink()
    mean = summary.iostatistics.meanstatistics.get("committer_commit_job.mean")
    return SummaryTimes(None if mean is None else mean.sum / 1000, written_at)


def count_files(dest: Path) -> int:
    """Data files outside ``_temporary`` (the transactional protocol's are in the destination under tid names)."""
    return sum(
        1
        for directory, _, names in os.walk(dest)
        for name in names
        if name.endswith(".parquet") and "_temporary" not in Path(directory).relative_to(dest).parts
    )


@dataclass(frozen=True)
class WriteOptions:
    """How every writer splits files, and the transactional writer's marker type."""

    max_records_per_file: int = 0
    """``maxRecordsPerFile`` of every writer (0: unset, one file per task and partition value)."""
    transactional_markers: str = "batched"


@dataclass(frozen=True)
class WriteTimes:
    wall_s: float
    returned_at: float
    """``time.time()`` when the write returned."""


def write_once(  # noqa: PLR0917 (one call site)
    spark: SparkSession, df: DataFrame, writer: str, dest: Path, partitioned: bool, options: WriteOptions
) -> WriteTimes:
    partition_by = ["p"] if partitioned else []
    limit = {"maxRecordsPerFile": str(options.max_records_per_file)} if options.max_records_per_file else {}
    if writer in PROTOCOL_WRITERS:
        protocol = PROTOCOL_WRITERS[writer]
        committer_options = dict(limit)
        if protocol == "transactional":
            committer_options["mapreduce.manifest.committer.markers.type"] = options.transactional_markers
        # "manifest" is the default protocol on local disk: not passed, so the script also drives checkouts whose
        # write() has no protocol argument yet (issue 13 compared main with an older commit this way).
        by_protocol: dict[str, Any] = {} if protocol == "manifest" else {"protocol": protocol}
        started = time.perf_counter()
        mcs.write(df, str(dest), format="parquet", partition_by=partition_by, options=committer_options, **by_protocol)
        return WriteTimes(time.perf_counter() - started, time.time())
    commit_protocol = SHIM_CLASS if writer == "hadoop-manifest" else SPARK_PROTOCOL
    spark.conf.set("spark.sql.sources.commitProtocolClass", commit_protocol)
    started = time.perf_counter()
    df.write.options(**limit).parquet(str(dest), partitionBy=partition_by or None)
    return WriteTimes(time.perf_counter() - started, time.time())


def run(args: argparse.Namespace) -> list[Sample]:
    work = Path(tempfile.mkdtemp(prefix="bench-spark-", dir=args.workdir))
    reports = work / "reports"
    reports.mkdir()
    classes = compile_shim(work)
    spark = session(classes, reports)
    spark.sparkContext.setLogLevel("ERROR")
    in_workers, here = worker_package(spark), str(Path(mc.__file__).parent)
    if in_workers != here:
        spark.stop()
        raise RuntimeError(f"Spark's Python workers import manifest_committer from {in_workers}, this process {here}")
    samples: list[Sample] = []
    writers: list[str] = list(dict.fromkeys(args.writers))
    try:
        options = WriteOptions(
            args.rows_per_file if args.files_per_task > 1 else 0, transactional_markers=args.transactional_markers
        )
        warm = frame(spark, 4, 1 if args.warm_unpartitioned else 4, args.rows_per_file)
        for writer in writers:
            write_once(spark, warm, writer, work / f"warm-{writer}", not args.warm_unpartitioned, options)
        for path in reports.glob("*"):
            path.unlink()
        for case in args.cases:
            tasks, partitions = (int(part) for part in case.split("x"))
            df = frame(spark, tasks, partitions, args.rows_per_file, args.files_per_task)
            expected = tasks * partitions * args.files_per_task
            runs = args.runs_large if expected >= 10_000 and args.runs_large else args.runs
            for index in range(runs):
                shift = index % len(writers)
                for writer in writers[shift:] + writers[:shift]:
                    dest = work / f"{case}-{writer}-{index}"
                    times = write_once(spark, df, writer, dest, partitions > 1, options)
                    metric = None if writer in PROTOCOL_WRITERS else last_job_commit_metric(spark)
                    summary = None if writer == "v1" else summary_commit_job(reports)
                    sample = Sample(
                        case,
                        writer,
                        index,
                        times.wall_s,
                        None if summary is None else summary.commit_job_s,
                        metric,
                        count_files(dest),
                        None if summary is None else times.returned_at - summary.written_at,
                    )
                    if sample.files != expected:
                        raise RuntimeError(f"{writer} wrote {sample.files} files into {dest}, not {expected}")
                    samples.append(sample)
                    print(json.dumps(asdict(sample)), flush=True)
                    shutil.rmtree(dest)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return samples


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages: the machine is shared, so every run notes them."""
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "n/a"


def worker_package(spark: SparkSession) -> str:
    """Where a Spark Python worker imports ``manifest_committer`` from."""

    def locate(_: object) -> str:
        import manifest_committer as package

        return str(Path(package.__file__).parent)

    return str(spark.sparkContext.parallelize([0], 1).map(locate).collect()[0])


def checkout_commit() -> str:
    """The commit this checkout has checked out (what ``ours`` measures), or ``"unknown"``."""
    result = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def table(samples: list[Sample]) -> str:
    def cell(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    def ratio(a: float | None, b: float | None) -> str:
        return "n/a" if a is None or not b else f"{a / b:.2f}"

    lines = [
        "| case | files | runs | writer | wall s | job commit s (summary) | job commit s (Spark metric) "
        "| after commit_job s |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    medians: dict[tuple[str, str], tuple[float | None, float | None, float | None]] = {}
    cases = list(dict.fromkeys(sample.case for sample in samples))
    writers = [writer for writer in ALL_WRITERS if any(sample.writer == writer for sample in samples)]
    for case in cases:
        for writer in writers:
            rows = [sample for sample in samples if sample.case == case and sample.writer == writer]
            if not rows:
                continue
            wall = median([row.wall_s for row in rows])
            commit = median([row.commit_job_s for row in rows])
            metric = median([row.spark_job_commit_s for row in rows])
            after = median([row.after_commit_s for row in rows])
            medians[(case, writer)] = (wall, commit, metric)
            lines.append(
                f"| {case} | {rows[0].files:,} | {len(rows)} | {writer} | {cell(wall)} | {cell(commit)} "
                f"| {cell(metric)} | {cell(after)} |"
            )
    lines.append("")
    lines.append("| case | writer | wall / v1 | wall / hadoop | job commit / hadoop | job commit / v1 (metric) |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for case in cases:
        v1, hadoop = (medians.get((case, writer), (None, None, None)) for writer in ("v1", "hadoop-manifest"))
        for writer in PROTOCOL_WRITERS:
            if (case, writer) not in medians:
                continue
            ours = medians[(case, writer)]
            lines.append(
                f"| {case} | {writer} | {ratio(ours[0], v1[0])} | {ratio(ours[0], hadoop[0])} "
                f"| {ratio(ours[1], hadoop[1])} | {ratio(ours[1], v1[2])} |"
            )
    return "\n".join(lines)


SHAPES: dict[str, tuple[str, ...]] = {
    "narrow": (
        "id",
        "concat('value-', cast(id % 97 as string)) as s",
        "cast(id % 10007 as double) / 7 as d",
        "timestamp_seconds(1700000000 + id) as t",
    ),
    "wide": (
        "id",
        *(f"cast(id * {i} % 1000 as {'double' if i % 3 else 'long'}) as c{i}" for i in range(40)),
        *(f"concat('s', cast(id % {i + 5} as string)) as s{i}" for i in range(4)),
    ),
    "strings": ("id", "sha2(cast(id as string), 256) as h", "repeat(cast(id % 13 as string), 40) as r"),
    "nested": (
        "id",
        "array(id, id + 1, id % 5) as a",
        "map('k', id % 11, 'j', id) as m",
        "named_struct('x', id % 3, 'y', cast(id % 7 as string)) as st",
    ),
    "decimals": (
        "id",
        "cast(id / 100 as decimal(9,2)) as d9",
        "cast(id / 10000 as decimal(18,4)) as d18",
        "cast(id as decimal(30,2)) as d30",
    ),
    "timestamps": (
        "id",
        "timestamp_seconds(1700000000 + id) as t",
        "cast(timestamp_seconds(1700000000 + id) as timestamp_ntz) as tn",
    ),
    "variant": ("id", """parse_json(concat('{"a":', cast(id % 100 as string), '}')) as v"""),
    "partitioned": (
        "id",
        "concat('value-', cast(id % 97 as string)) as s",
        "cast(id % 10007 as double) / 7 as d",
        "id % 8 as p",
    ),
}
"""``--shapes``: the columns of each shape, from ``spark.range``; ``partitioned`` is partitioned by ``p``."""
SHAPE_WRITERS = ("v1", "ours")


@dataclass(frozen=True)
class FileSample:
    shape: str
    writer: str
    run: int
    wall_s: float
    files: int
    bytes: int
    row_groups: int


def parquet_stats(dest: Path) -> tuple[int, int, int]:
    """(files, bytes, row groups) of the Parquet files under ``dest``."""
    import pyarrow.parquet as pq

    files = sorted(dest.rglob("*.parquet"))
    return (
        len(files),
        sum(file.stat().st_size for file in files),
        sum(pq.ParquetFile(file).metadata.num_row_groups for file in files),
    )


def run_shapes(args: argparse.Namespace) -> list[FileSample]:
    """Each shape written by Spark's own writer (v1) and by ``mcs.write``, alternating, ``--runs`` times each."""
    work = Path(tempfile.mkdtemp(prefix="bench-spark-shapes-", dir=args.workdir))
    reports = work / "reports"
    reports.mkdir()
    spark = session(compile_shim(work), reports)
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.sources.commitProtocolClass", SPARK_PROTOCOL)
    samples: list[FileSample] = []
    try:
        for shape in args.shapes:
            df = spark.range(args.shape_rows, numPartitions=args.shape_tasks).selectExpr(*SHAPES[shape])
            partition_by = ["p"] if shape == "partitioned" else []
            for run_index in range(-1, args.runs):  # run -1 warms up, unmeasured
                order = SHAPE_WRITERS if run_index % 2 == 0 else tuple(reversed(SHAPE_WRITERS))
                for writer in order:
                    dest = work / f"{shape}-{writer}-{run_index + 1}"
                    started = time.perf_counter()
                    if writer == "v1":
                        df.write.parquet(str(dest), partitionBy=partition_by or None)
                    else:
                        mcs.write(df, str(dest), format="parquet", partition_by=partition_by)
                    wall = time.perf_counter() - started
                    files, size, groups = parquet_stats(dest)
                    shutil.rmtree(dest, ignore_errors=True)
                    if run_index >= 0:
                        samples.append(FileSample(shape, writer, run_index, wall, files, size, groups))
                        print(samples[-1], flush=True)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return samples


def shape_table(samples: list[FileSample]) -> str:
    lines = [
        "| shape | writer | files | MB | row groups | wall s (median) | bytes / v1 | wall / v1 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for shape in dict.fromkeys(sample.shape for sample in samples):
        walls = {w: median([s.wall_s for s in samples if s.shape == shape and s.writer == w]) for w in SHAPE_WRITERS}
        last = {w: [s for s in samples if s.shape == shape and s.writer == w][-1] for w in SHAPE_WRITERS}
        for writer in SHAPE_WRITERS:
            sample, wall, v1_wall = last[writer], walls[writer], walls["v1"]
            lines.append(
                f"| {shape} | {writer} | {sample.files} | {sample.bytes / 1e6:.2f} | {sample.row_groups} "
                f"| {wall or 0:.2f} | {sample.bytes / last['v1'].bytes:.3f} "
                f"| {(wall or 0) / (v1_wall or 1):.2f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), help="TASKSxPARTITIONS workloads")
    parser.add_argument("--runs", type=int, default=3, help="measured runs of each writer per case (default 3)")
    parser.add_argument("--runs-large", type=int, default=0, help="runs for cases of >= 10,000 files (0: --runs)")
    parser.add_argument(
        "--writers", nargs="+", choices=ALL_WRITERS, default=list(WRITERS), help="writers (default: %(default)s)"
    )
    parser.add_argument(
        "--files-per-task",
        type=int,
        default=1,
        help="files per task and partition value, split by maxRecordsPerFile = --rows-per-file (default 1)",
    )
    parser.add_argument(
        "--transactional-markers",
        choices=("batched", "direct"),
        default="batched",
        help="markers.type of the ours-transactional writer (default batched, the library's default)",
    )
    parser.add_argument(
        "--warm-unpartitioned", action="store_true", help="warm up with an unpartitioned write (default partitioned)"
    )
    parser.add_argument("--rows-per-file", type=int, default=20, help="rows in each output file (default 20)")
    parser.add_argument("--workdir", default=None, help="directory for the outputs (default: the system temp dir)")
    parser.add_argument("--json", default=None, help="also write the samples to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--shapes",
        nargs="+",
        choices=list(SHAPES),
        default=None,
        help="instead of --cases: these shapes of data, Spark's own writer (v1) against ours; bytes, row groups",
    )
    parser.add_argument("--shape-rows", type=int, default=2_000_000, help="rows of each shape (default 2,000,000)")
    parser.add_argument("--shape-tasks", type=int, default=4, help="Spark tasks of each shape (default 4)")
    args = parser.parse_args(argv)
    print(
        f"python {platform.python_version()}, pyspark {pyspark.__version__}, {os.cpu_count()} cores, "
        f"{platform.platform()}; manifest_committer from {Path(mc.__file__).parent} ({checkout_commit()}); "
        f"load average {load_average()}",
        flush=True,
    )
    if args.shapes:
        shape_samples = run_shapes(args)
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(sample) for sample in shape_samples], indent=1))
        print(shape_table(shape_samples))
        print(f"load average at the end {load_average()}")
        return 0
    samples = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(sample) for sample in samples], indent=1))
    print(table(samples))
    print(f"load average at the end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
