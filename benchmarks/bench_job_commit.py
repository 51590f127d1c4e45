"""Job-commit benchmark: this project's committers against Hadoop 3.5's ManifestCommitter on one local disk, one run.

For each case (``TASKSxPARTITIONS``) and each run, a fresh job is prepared: ``setup_job``; for every task
``setup_task``, one small file written with plain ``os`` calls into each of the partition directories
``dt=2024-01-01+n/part-<task>-<n>.parquet`` of the attempt's work path, then ``commit_task``. Only ``commit_job``
is timed. Hadoop's ``ManifestCommitter`` (from the jar inside the pyspark wheel, driven through py4j) commits the
same layout in the same run, its files written the same way into its own ``getWorkPath()``; it runs on
``RawLocalFileSystem`` so it neither writes nor renames ``.crc`` side files. Both committers run with their default
``io.threads`` (32). Runs of the two alternate (and swap order each run) so the noise of a shared machine falls on
both; the JVM gets one unmeasured warm-up job first, and so does Python.

``--protocol`` picks which of this project's protocols run (``mc.create_committer``: manifest, v1, v2,
transactional; default manifest), side by side in the same run with the same alternating order. v2 and
transactional move work from the job commit into the tasks, so the task side is measured too: the wall time of
all tasks (``--task-threads`` of them at once, as executors would run them) and the summed time of their
``commit_task`` calls. When a protocol other than manifest runs, every task writes through ``task.fs`` (the
transactional protocol must: its files get tid names and write markers there), so the task side compares alike;
``--task-writes os`` keeps the cheaper plain-``os`` preparation for the rename protocols.

The memory case prepares a 1,000,000-file job by writing valid task manifests directly (pointing at real
zero-byte files), then commits it in a fresh subprocess and reports that process's peak RSS
(``ru_maxrss``): interpreter, imports and the whole job commit, whose files really are renamed.

Run ``python benchmarks/bench_job_commit.py --help`` for the options; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The checkout this script is in, not whatever package the interpreter finds first: run as a script, Python puts
# only benchmarks/ on the path, and an editable install of another checkout would be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import manifest_committer as mc
from manifest_committer.manifest import DirEntry, EntryStatus, FileEntry, TaskManifest
from manifest_committer.protocols.base import CommitterBase

STAGES = (
    "job_stage_load_manifests",
    "job_stage_create_target_dirs",
    "job_stage_rename_files",
    "job_stage_save_success_marker",
    "job_stage_cleanup",
)
COMMIT_JOB = "committer_commit_job"
FILE_BYTES = b"0123456789abcdef"
PREPARE_THREADS = 4
MANIFEST_PACKAGE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest"


@dataclass(frozen=True)
class Case:
    """A job of ``tasks`` task attempts, each writing one file into each of ``partitions`` directories."""

    tasks: int
    partitions: int

    @property
    def files(self) -> int:
        return self.tasks * self.partitions

    @property
    def label(self) -> str:
        return f"{self.tasks}x{self.partitions}"

    @classmethod
    def parse(cls, text: str) -> Case:
        tasks, _, partitions = text.lower().partition("x")
        return cls(int(tasks), int(partitions))


PROTOCOLS = ("manifest", "v1", "v2", "transactional")
"""This project's protocols that write to local disk (``upload`` is S3's)."""


@dataclass
class Measurement:
    """One timed ``commit_job``: wall time around the call, and the committer's own statistics (ms)."""

    committer: str
    case: str
    wall_s: float
    commit_job_ms: int | None
    stages_ms: dict[str, int] = field(default_factory=dict)
    prepare_s: float = 0.0
    clean_s: float | None = None
    """Until the store is clean (the background delete of the job's state done); ``None`` where not measured."""
    tasks_s: float | None = None
    """Wall time of all task attempts (setup, writes, ``commit_task``), run ``--task-threads`` at a time."""
    commit_task_s: float | None = None
    """Summed duration of the ``commit_task`` calls (threads overlap, so it can exceed ``tasks_s``)."""


def partition_name(index: int) -> str:
    return f"dt={2024 + index // 360:04d}-{index % 360 // 30 + 1:02d}-{index % 30 + 1:02d}"


class SmallFiles:
    """Writes the jobs' small files, reusing the committed files of earlier jobs by renaming them into place.

    On a shared disk creating a file costs hundreds of microseconds and a rename tens, so recycling keeps the
    preparation of 100,000-file jobs affordable. Every file holds the same 16 bytes either way; only the
    preparation changes, never the timed job commit.
    """

    def __init__(self) -> None:
        self._spares: deque[str] = deque()
        self._drained: list[str] = []

    def write(self, path: str) -> None:
        try:
            spare = self._spares.pop()  # atomic: preparing threads share the spares
        except IndexError:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(handle, FILE_BYTES)
            finally:
                os.close(handle)
        else:
            os.rename(spare, path)

    def write_task_files(self, work_dir: str, task: int, partitions: int) -> None:
        """One small file in each partition directory of a task attempt's working directory, by plain os calls."""
        for index in range(partitions):
            directory = os.path.join(work_dir, partition_name(index))
            os.mkdir(directory)  # the work directory exists after setup_task / setupTask
            self.write(os.path.join(directory, f"part-{task:05d}-{index:05d}.parquet"))

    @staticmethod
    def write_through(fs: Any, work_path: str, task: int, partitions: int) -> None:
        """The same files written the way a user's task writes them: ``task.fs.open`` (parents made by it)."""
        for index in range(partitions):
            with fs.open(f"{work_path}/{partition_name(index)}/part-{task:05d}-{index:05d}.parquet", "wb") as handle:
                handle.write(FILE_BYTES)

    def recycle(self, destination: str, case: Case, reuse: bool = True) -> None:
        """Check a committed destination (every file there, no job state left), then keep its files as spares.

        Names starting with ``_`` are the job's records (``_SUCCESS``, the transactional ``_started_`` and
        ``_committed_`` files), not data. Without ``reuse`` (files named by a protocol) the destination is deleted.
        """
        files = [
            os.path.join(directory, name)
            for directory, _, names in os.walk(destination)
            for name in names
            if not name.startswith("_")
        ]
        if len(files) != case.files or os.path.exists(os.path.join(destination, "_temporary")):
            raise RuntimeError(f"{destination}: {len(files)} files after commit, expected {case.files}, or state left")
        if not reuse:
            shutil.rmtree(destination)
            return
        self._spares.extend(files)
        self._drained.append(destination)

    def remove_drained(self) -> None:
        """Delete earlier destinations whose files have all been reused (outside any timed section)."""
        keep = []
        for destination in self._drained:
            if any(not name.startswith("_") for _, _, names in os.walk(destination) for name in names):
                keep.append(destination)
            else:
                shutil.rmtree(destination)
        self._drained = keep


def mean_ms(iostatistics: dict[str, Any], name: str) -> int | None:
    """The summed duration of statistic ``name`` in Hadoop's JSON form, or ``None`` if it has no samples."""
    mean = iostatistics.get("meanstatistics", {}).get(name + ".mean")
    if not mean or not mean.get("samples"):
        return None
    return int(mean["sum"])


def measurement_from_report(committer: str, case: Case, wall: float, report_path: str) -> Measurement:
    with open(report_path, "rb") as handle:
        statistics_json = json.load(handle)["iostatistics"]
    stages = {name: value for name in STAGES if (value := mean_ms(statistics_json, name)) is not None}
    return Measurement(committer, case.label, wall, mean_ms(statistics_json, COMMIT_JOB), stages)


# --- this project ----------------------------------------------------------------------------------------------


class PythonCommitterBench:
    """Prepares and commits jobs with one of this project's protocols."""

    def __init__(
        self,
        root: str,
        io_threads: int,
        files: SmallFiles,
        *,
        protocol: str = "manifest",
        task_threads: int = PREPARE_THREADS,
        write_through_fs: bool = False,
    ) -> None:
        if protocol == "transactional" and not write_through_fs:
            raise ValueError("the transactional protocol's tasks must write through task.fs (--task-writes fs)")
        self.root = root
        self.io_threads = io_threads
        self.files = files
        self.protocol = protocol
        self.name = protocol
        self.task_threads = task_threads
        self.write_through_fs = write_through_fs
        self.reports = os.path.join(root, "reports-python")
        self.tasks_s = 0.0
        self.commit_task_s = 0.0

    def prepare(self, case: Case, run: int) -> CommitterBase:
        """Set up the job and run every task; ``tasks_s`` and ``commit_task_s`` hold the task side's cost."""
        destination = os.path.join(self.root, f"{self.protocol}-{case.label}-{run}")
        config = mc.CommitterConfig(io_threads=self.io_threads, summary_report_directory=self.reports)
        committer = mc.create_committer(destination, f"job-{case.label}-{run}", self.protocol, config=config)
        committer.setup_job()
        commit_task_s: list[float] = []

        def task(index: int) -> None:
            attempt = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
            if self.write_through_fs:
                self.files.write_through(attempt.fs, attempt.work_path, index, case.partitions)
            else:
                self.files.write_task_files(attempt.work_path, index, case.partitions)
            started = time.perf_counter()
            committer.commit_task(attempt)
            commit_task_s.append(time.perf_counter() - started)

        started = time.perf_counter()
        with ThreadPoolExecutor(self.task_threads) as pool:
            list(pool.map(task, range(case.tasks)))
        self.tasks_s = time.perf_counter() - started
        self.commit_task_s = sum(commit_task_s)
        self.files.remove_drained()
        return committer

    def run(self, case: Case, run: int) -> Measurement:
        start = time.perf_counter()
        committer = self.prepare(case, run)
        prepared = time.perf_counter()
        committer.commit_job()
        wall = time.perf_counter() - prepared  # the time to return
        committer.close()  # waits for the background delete of the job's state (and stops a marker server)
        clean = time.perf_counter() - prepared
        report = os.path.join(self.reports, f"summary-{committer.job_id}.json")
        result = measurement_from_report(self.name, case, wall, report)
        result.prepare_s = prepared - start
        result.clean_s = clean
        result.tasks_s = self.tasks_s
        result.commit_task_s = self.commit_task_s
        self.files.recycle(committer.paths.dest, case, reuse=not self.write_through_fs)
        return result


# --- Hadoop 3.5 through py4j -----------------------------------------------------------------------------------


class HadoopCommitterBench:
    """Prepares and commits the same jobs with Hadoop's ``ManifestCommitter`` in a JVM driven through py4j."""

    name = "hadoop"

    def __init__(self, root: str, io_threads: int, files: SmallFiles) -> None:
        from pyspark.java_gateway import launch_gateway

        self.root = root
        self.files = files
        self.reports = os.path.join(root, "reports-hadoop")
        self.gateway: Any = launch_gateway()  # type: ignore[no-untyped-call]
        jvm = self.gateway.jvm
        self.hadoop: Any = jvm.org.apache.hadoop
        self.version = str(self.hadoop.util.VersionInfo.getVersion())
        self.conf: Any = self.hadoop.conf.Configuration()
        # No checksums: no .crc side files to write at task time or rename at job time, as in our committer.
        self.conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        self.conf.set("mapreduce.manifest.committer.io.threads", str(io_threads))
        # Hadoop's _SUCCESS is saved before cleanup and without committer_commit_job; the summary report is
        # written at the very end of commitJob with the job's final statistics.
        self.conf.set("mapreduce.manifest.committer.summary.report.directory", "file:" + self.reports)
        self.committer_class: Any = getattr(jvm, MANIFEST_PACKAGE).ManifestCommitter
        self.job_number = 0

    def filesystem_class(self, path: str) -> str:
        uri = self.hadoop.fs.Path("file:" + path).toUri()
        return str(self.hadoop.fs.FileSystem.get(uri, self.conf).getClass().getName())

    def _task_context(self, job_number: int, task: int) -> Any:
        mapreduce = self.hadoop.mapreduce
        attempt = mapreduce.TaskAttemptID("202611220000", job_number, mapreduce.TaskType.MAP, task, 0)
        return mapreduce.task.TaskAttemptContextImpl(self.conf, attempt)

    def run(self, case: Case, run: int) -> Measurement:
        self.job_number += 1
        number = self.job_number
        destination = os.path.join(self.root, f"hadoop-{case.label}-{run}")
        output = self.hadoop.fs.Path("file:" + destination)
        job_id = self.hadoop.mapreduce.JobID("202611220000", number)
        job_context = self.hadoop.mapreduce.task.JobContextImpl(self.conf, job_id)
        start = time.perf_counter()
        job_committer = self.committer_class(output, self._task_context(number, 0))
        job_committer.setupJob(job_context)

        def task(index: int) -> None:
            context = self._task_context(number, index)
            committer = self.committer_class(output, context)
            committer.setupTask(context)
            self.files.write_task_files(str(committer.getWorkPath().toUri().getPath()), index, case.partitions)
            committer.commitTask(context)

        with ThreadPoolExecutor(PREPARE_THREADS) as pool:
            list(pool.map(task, range(case.tasks)))
        self.files.remove_drained()
        prepared = time.perf_counter()
        job_committer.commitJob(job_context)
        wall = time.perf_counter() - prepared
        report = os.path.join(self.reports, f"summary-{job_id.toString()}.json")
        result = measurement_from_report(self.name, case, wall, report)
        result.prepare_s = prepared - start
        self.files.recycle(destination, case)
        return result

    def close(self) -> None:
        self.gateway.shutdown()


# --- floors: bare system-call loops over the same layout ---------------------------------------------------------


def commit_threads(io_threads: int) -> int:
    """How many units a local job commit runs at once (``StageContext.max_in_flight`` on a store whose calls take
    microseconds): the floors use the same count."""
    return min(io_threads, 2 * (os.cpu_count() or 1))


@dataclass
class FloorMeasurement:
    """The system calls a job commit of ``case`` cannot avoid, timed bare, on the same disk in the same run."""

    case: str
    threads: int
    rename_s: float
    """``os.rename`` of every file from its task directory to its destination (directories made beforehand)."""
    rmdir_s: float
    """``os.rmdir`` of every emptied partition directory, then of every task directory."""
    rename_serial_s: float
    rmdir_serial_s: float


class FloorBench:
    """Bare ``rename`` and ``rmdir`` loops: the files and directories of a job commit of the same case, laid out
    as a task writes them (``task/dt=.../part-...``), renamed into ``dest/dt=.../`` and then removed, in ``threads``
    threads taking consecutive slices as the commit's units do, and once in one thread. Nothing else: no
    manifests, no checks, no journal; the distance from a job commit to this is what the committer adds."""

    name = "floor"

    def __init__(self, root: str, io_threads: int, files: SmallFiles) -> None:
        self.root = root
        self.files = files
        self.threads = commit_threads(io_threads)

    def _layout(self, case: Case, label: str) -> tuple[str, list[tuple[str, str]], list[str], list[str]]:
        base = os.path.join(self.root, f"floor-{case.label}-{label}")
        source_root, dest = os.path.join(base, "tasks"), os.path.join(base, "dest")
        os.makedirs(source_root)
        moves: list[tuple[str, str]] = []
        partition_dirs: list[str] = []
        task_dirs = [os.path.join(source_root, f"attempt_{task:05d}_0") for task in range(case.tasks)]
        for task_dir in task_dirs:
            os.mkdir(task_dir)
        for index in range(case.partitions):
            os.makedirs(os.path.join(dest, partition_name(index)))

        def task(number: int) -> None:
            self.files.write_task_files(task_dirs[number], number, case.partitions)

        with ThreadPoolExecutor(PREPARE_THREADS) as pool:
            list(pool.map(task, range(case.tasks)))
        for number, task_dir in enumerate(task_dirs):
            for index in range(case.partitions):
                relative = f"{partition_name(index)}/part-{number:05d}-{index:05d}.parquet"
                moves.append((os.path.join(task_dir, relative), os.path.join(dest, relative)))
                partition_dirs.append(os.path.join(task_dir, partition_name(index)))
        return dest, moves, partition_dirs, task_dirs

    @staticmethod
    def _timed_loop(threads: int, items: list[Any], call: Any, star: bool) -> float:
        size = max(1, len(items) // (threads * 4) + 1)
        slices = [items[i : i + size] for i in range(0, len(items), size)]

        def run(part: list[Any]) -> None:
            if star:
                for item in part:
                    call(*item)
            else:
                for item in part:
                    call(item)

        start = time.perf_counter()
        if threads <= 1:
            for part in slices:
                run(part)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, slices))
        return time.perf_counter() - start

    def _one(self, case: Case, label: str, threads: int) -> tuple[float, float]:
        dest, moves, partition_dirs, task_dirs = self._layout(case, label)
        rename_s = self._timed_loop(threads, moves, os.rename, star=True)
        rmdir_s = self._timed_loop(threads, partition_dirs, os.rmdir, star=False)
        rmdir_s += self._timed_loop(threads, task_dirs, os.rmdir, star=False)
        os.rmdir(os.path.dirname(task_dirs[0]))
        self.files.recycle(dest, case)
        return rename_s, rmdir_s

    def run(self, case: Case, run: int) -> FloorMeasurement:
        rename_s, rmdir_s = self._one(case, f"{run}-t", self.threads)
        serial_rename_s, serial_rmdir_s = self._one(case, f"{run}-1", 1)
        self.files.remove_drained()
        return FloorMeasurement(case.label, self.threads, rename_s, rmdir_s, serial_rename_s, serial_rmdir_s)


# --- the memory case -------------------------------------------------------------------------------------------


def prepare_manifests_directly(destination: str, job_id: str, files: int, tasks: int, partitions: int) -> None:
    """A committed job without task commits: real zero-byte files plus valid manifests written here.

    Each of ``tasks`` attempts holds ``files // tasks`` files spread over ``partitions`` directories (fewer
    source directories than one per file, which would only make the preparation slow).
    """
    committer = mc.ManifestCommitter(destination, job_id=job_id)
    committer.setup_job()
    store, paths = committer.store, committer.paths
    per_task = files // tasks
    os.makedirs(paths.manifest_dir, exist_ok=True)

    def task(index: int) -> None:
        task_id, attempt_id = f"task_{index:06d}", f"attempt_{index:06d}_0"
        work_dir = paths.task_attempt_dir(attempt_id)
        entries: list[FileEntry] = []
        for partition in range(partitions):
            os.makedirs(os.path.join(work_dir, partition_name(partition)))
        for number in range(per_task):
            relative = f"{partition_name(number % partitions)}/part-{index:06d}-{number:06d}.parquet"
            source = os.path.join(work_dir, relative)
            os.close(os.open(source, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            entries.append(FileEntry(store.to_url(source), store.to_url(os.path.join(paths.dest, relative)), 0))
        directories = [
            DirEntry(store.to_url(os.path.join(paths.dest, partition_name(p))), EntryStatus.NOT_FOUND, 1)
            for p in range(partitions)
        ]
        manifest = TaskManifest(
            job_id=job_id,
            job_attempt_number=0,
            task_id=task_id,
            task_attempt_id=attempt_id,
            task_attempt_dir=store.to_url(work_dir),
            files=entries,
            directories=directories,
        )
        with open(paths.manifest_path(task_id), "wb") as handle:
            handle.write(manifest.to_json())

    with ThreadPoolExecutor(PREPARE_THREADS) as pool:
        list(pool.map(task, range(tasks)))


def resident_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory_child(destination: str, job_id: str) -> None:
    """Subprocess entry: commit the prepared job, print peak RSS and timings as JSON."""
    committer = mc.ManifestCommitter(destination, job_id=job_id)
    before = resident_kib()
    start = time.perf_counter()
    summary = committer.commit_job()
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    counters = summary.iostatistics.counters
    print(
        json.dumps(
            {
                "rss_before_commit_kib": before,
                "peak_rss_kib": peak,
                "rss_after_commit_kib": resident_kib(),
                "wall_s": wall,
                "files_committed": counters.get("committer_files_committed", 0),
            }
        )
    )


def run_memory_case(root: str, files: int, tasks: int, partitions: int) -> dict[str, Any]:
    destination = os.path.join(root, "memory-job")
    job_id = "job-memory"
    start = time.perf_counter()
    prepare_manifests_directly(destination, job_id, files, tasks, partitions)
    prepared = time.perf_counter()
    try:
        output = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--memory-child", destination, job_id],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
        committed = sum(len(names) for _, _, names in os.walk(destination)) - 1
        if committed != files or result["files_committed"] != files:
            raise RuntimeError(f"memory case committed {committed} files, expected {files}")
    finally:
        shutil.rmtree(destination, ignore_errors=True)
    result.update(files=files, tasks=tasks, partitions=partitions, prepare_s=prepared - start, root=root)
    return result


# --- profile -----------------------------------------------------------------------------------------------------


def profile_python_commit(root: str, case: Case, top: int, files: SmallFiles) -> str:
    """cProfile of one commit_job with ``io.threads=1``: cProfile sees only the calling thread, so the work runs
    there; the profile shows where the CPU and system-call time goes, not the effect of the pool."""
    bench = PythonCommitterBench(root, io_threads=1, files=files)  # manifest, plain-os writes
    committer = bench.prepare(case, run=999)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    committer.commit_job()
    profiler.disable()
    wall = time.perf_counter() - start
    committer.close()  # the background delete of the job's state, before the destination is checked
    files.recycle(committer.paths.dest, case)
    text = io.StringIO()
    text.write(f"commit_job with io.threads=1 under cProfile: {wall:.3f} s\n")
    for order in ("tottime", "cumulative"):
        stats = pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(order)
        stats.print_stats(top)
    return text.getvalue()


# --- orchestration -----------------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(
    results: list[Measurement], case: Case, committers: list[str], floors: list[FloorMeasurement] | None = None
) -> dict[str, Any]:
    """Medians per committer; ``ratio_*`` of this project's manifest committer to Hadoop's; ``versus_manifest``
    of every other protocol to the manifest protocol; ``versus_floor`` of each committer's time to return to the
    bare rename loop, and to rename + rmdir (medians of the same run)."""
    out: dict[str, Any] = {"case": case.label, "files": case.files}
    mine = [f for f in floors or [] if f.case == case.label]
    if mine:
        out["floor"] = {
            "runs": len(mine),
            "threads": mine[0].threads,
            "rename_s_median": median([f.rename_s for f in mine]),
            "rmdir_s_median": median([f.rmdir_s for f in mine]),
            "rename_serial_s_median": median([f.rename_serial_s for f in mine]),
            "rmdir_serial_s_median": median([f.rmdir_serial_s for f in mine]),
        }
    for committer in committers:
        runs = [r for r in results if r.committer == committer and r.case == case.label]
        if not runs:
            continue
        job_ms = [float(r.commit_job_ms) for r in runs if r.commit_job_ms is not None]
        out[committer] = {
            "runs": len(runs),
            "wall_s_median": median([r.wall_s for r in runs]),
            "wall_s_all": [round(r.wall_s, 3) for r in runs],
            "commit_job_ms_median": median(job_ms),
            "stages_ms_median": {s: median([float(r.stages_ms.get(s, 0)) for r in runs]) for s in STAGES},
            "prepare_s_median": median([r.prepare_s for r in runs]),
        }
        cleans = [r.clean_s for r in runs if r.clean_s is not None]
        if cleans:
            out[committer]["clean_s_median"] = median(cleans)
            out[committer]["clean_s_all"] = [round(clean, 3) for clean in cleans]
        tasks = [r.tasks_s for r in runs if r.tasks_s is not None]
        if tasks:
            out[committer]["tasks_s_median"] = median(tasks)
            out[committer]["commit_task_s_median"] = median([r.commit_task_s or 0.0 for r in runs])
    if "manifest" in out and "hadoop" in out:
        pairs = [
            (p.wall_s, h.wall_s)
            for p, h in zip(
                [r for r in results if r.committer == "manifest" and r.case == case.label],
                [r for r in results if r.committer == "hadoop" and r.case == case.label],
                strict=False,
            )
        ]
        out["ratio_wall_medians"] = out["manifest"]["wall_s_median"] / out["hadoop"]["wall_s_median"]
        out["ratio_commit_job_medians"] = (
            out["manifest"]["commit_job_ms_median"] / out["hadoop"]["commit_job_ms_median"]
        )
        out["ratio_wall_per_run_median"] = median([p / h for p, h in pairs])
        if "clean_s_median" in out["manifest"]:
            # Hadoop's store is clean when its commitJob returns (its cleanup is synchronous).
            out["ratio_clean_medians"] = out["manifest"]["clean_s_median"] / out["hadoop"]["wall_s_median"]
    if "floor" in out:
        floor = out["floor"]
        rename = min(floor["rename_s_median"], floor["rename_serial_s_median"])
        both = rename + min(floor["rmdir_s_median"], floor["rmdir_serial_s_median"])
        out["versus_floor"] = {
            committer: {
                "rename": out[committer]["wall_s_median"] / rename,
                "rename_rmdir": out[committer]["wall_s_median"] / both,
                "rename_stage_to_rename": out[committer]["stages_ms_median"]["job_stage_rename_files"] / 1000 / rename,
                # Until the store is clean, against the loops of everything a commit must do: rename and rmdir.
                "clean_rename_rmdir": out[committer].get("clean_s_median", out[committer]["wall_s_median"]) / both,
            }
            for committer in committers
            if committer in out
        }
    if "manifest" in out:
        base = out["manifest"]
        out["versus_manifest"] = {
            committer: {
                "commit_job_wall": out[committer]["wall_s_median"] / base["wall_s_median"],
                **(
                    {"tasks_wall": out[committer]["tasks_s_median"] / base["tasks_s_median"]}
                    if "tasks_s_median" in out[committer] and "tasks_s_median" in base
                    else {}
                ),
            }
            for committer in committers
            if committer in out and committer not in ("manifest", "hadoop")
        }
    return out


def print_table(summaries: list[dict[str, Any]], committers: list[str]) -> None:
    print(
        "\n| case | files | committer | median commit_job wall (s) | median committer_commit_job (ms) "
        "| median tasks wall (s) | median sum of commit_task (s) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for s in summaries:
        for committer in committers:
            if committer in s:
                c = s[committer]
                tasks = f"{c['tasks_s_median']:.2f} | {c['commit_task_s_median']:.2f}" if "tasks_s_median" in c else "|"
                print(
                    f"| {s['case']} | {s['files']:,} | {committer} | {c['wall_s_median']:.3f} "
                    f"| {c['commit_job_ms_median']:.0f} | {tasks} |"
                )
        if "ratio_wall_medians" in s:
            print(
                f"| {s['case']} | | manifest/Hadoop | {s['ratio_wall_medians']:.2f} "
                f"(per-run median {s['ratio_wall_per_run_median']:.2f}) | {s['ratio_commit_job_medians']:.2f} | | |"
            )
        if "ratio_clean_medians" in s:
            print(
                f"| {s['case']} | | manifest until clean / Hadoop | {s['ratio_clean_medians']:.2f} "
                f"({s['manifest']['clean_s_median']:.3f} s) | | | |"
            )
        for committer, ratios in s.get("versus_manifest", {}).items():
            tasks = f"{ratios['tasks_wall']:.2f}" if "tasks_wall" in ratios else ""
            print(f"| {s['case']} | | {committer}/manifest | {ratios['commit_job_wall']:.2f} | | {tasks} | |")
        if "floor" in s:
            f = s["floor"]
            print(
                f"| {s['case']} | | floor: rename / rmdir, {f['threads']} threads (1 thread) "
                f"| {f['rename_s_median']:.3f} / {f['rmdir_s_median']:.3f} "
                f"({f['rename_serial_s_median']:.3f} / {f['rmdir_serial_s_median']:.3f}) | | | |"
            )
        for committer, ratios in s.get("versus_floor", {}).items():
            print(
                f"| {s['case']} | | {committer}/floor: rename, rename+rmdir, rename stage/rename, "
                f"until clean/rename+rmdir | {ratios['rename']:.2f}, {ratios['rename_rmdir']:.2f}, "
                f"{ratios['rename_stage_to_rename']:.2f}, {ratios['clean_rename_rmdir']:.2f} | | | |"
            )
    print()
    for s in summaries:
        for committer in committers:
            if committer in s:
                stages = ", ".join(
                    f"{k.removeprefix('job_stage_')} {v:.0f}" for k, v in s[committer]["stages_ms_median"].items()
                )
                cleans = f"; until clean (s): {s[committer]['clean_s_all']}" if "clean_s_all" in s[committer] else ""
                print(
                    f"{s['case']} {committer} stage medians (ms): {stages}; runs (s): {s[committer]['wall_s_all']}"
                    f"{cleans}"
                )


def machine_info() -> dict[str, str]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        memory = meminfo.readline().split(":", 1)[1].strip()
    java = subprocess.run(["java", "-version"], check=False, capture_output=True, text=True).stderr.splitlines()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "memory": memory,
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "kernel": platform.release(),
        "load average": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


@contextmanager
def benchmark_root(parent: str | None, keep: bool) -> Iterator[str]:
    root = tempfile.mkdtemp(prefix="mc-bench-", dir=parent)
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--case", action="append", type=Case.parse, help="TASKSxPARTITIONS (default 200x50, 200x500)")
    parser.add_argument("--runs", type=int, default=5, help="measured runs per case and committer (default 5)")
    parser.add_argument("--io-threads", type=int, default=32, help="io.threads of both committers (default 32)")
    parser.add_argument("--root", default=None, help="parent directory on the disk to test (default: system temp)")
    parser.add_argument("--no-hadoop", action="store_true", help="skip Hadoop's committer")
    parser.add_argument("--no-floor", action="store_true", help="skip the bare rename and rmdir loops")
    parser.add_argument(
        "--protocol",
        nargs="+",
        choices=PROTOCOLS,
        default=["manifest"],
        help="this project's protocols to run side by side (default manifest)",
    )
    parser.add_argument(
        "--task-threads", type=int, default=PREPARE_THREADS, help=f"tasks run at once (default {PREPARE_THREADS})"
    )
    parser.add_argument(
        "--task-writes",
        choices=("os", "fs"),
        default=None,
        help="how tasks write: plain os calls with recycled files, or task.fs (default: os for manifest alone, "
        "else fs for every protocol)",
    )
    parser.add_argument("--memory-files", type=int, default=1_000_000, help="files of the memory case (0: skip)")
    parser.add_argument("--memory-tasks", type=int, default=1000)
    parser.add_argument("--memory-partitions", type=int, default=100)
    parser.add_argument("--memory-root", default=None, help="parent directory of the memory case (default: --root)")
    parser.add_argument("--profile", action="store_true", help="cProfile one serial commit of the first case")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--json", default=None, help="also write all results to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark directory")
    parser.add_argument("--memory-child", nargs=2, metavar=("DEST", "JOB_ID"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.memory_child:
        memory_child(*args.memory_child)
        return 0

    cases: list[Case] = args.case or [Case(200, 50), Case(200, 500)]
    output: dict[str, Any] = {"machine": machine_info(), "date": time.strftime("%Y-%m-%d"), "argv": sys.argv}
    print(json.dumps(output["machine"], indent=1))
    with benchmark_root(args.root, args.keep) as root:
        print(f"benchmark directory: {root}")
        files = SmallFiles()
        protocols: list[str] = list(dict.fromkeys(args.protocol))
        write_through_fs = (args.task_writes or ("os" if protocols == ["manifest"] else "fs")) == "fs"
        python_benches = [
            PythonCommitterBench(
                root,
                args.io_threads,
                files,
                protocol=protocol,
                task_threads=args.task_threads,
                write_through_fs=write_through_fs,
            )
            for protocol in protocols
        ]
        output["protocols"] = protocols
        output["task_writes"] = "fs" if write_through_fs else "os"
        hadoop_bench = None if args.no_hadoop else HadoopCommitterBench(root, args.io_threads, files)
        results: list[Measurement] = []
        floors: list[FloorMeasurement] = []
        try:
            if hadoop_bench is not None:
                output["hadoop_version"] = hadoop_bench.version
                output["hadoop_filesystem"] = hadoop_bench.filesystem_class(root)
                print(f"Hadoop {hadoop_bench.version} on {output['hadoop_filesystem']}")
            benches: list[PythonCommitterBench | HadoopCommitterBench | FloorBench] = list(python_benches)
            if hadoop_bench is not None:
                benches.append(hadoop_bench)
            if not args.no_floor:
                benches.append(FloorBench(root, args.io_threads, files))
            warm = cases[0]
            for bench in benches:
                bench.run(warm, run=-1)  # warm-up, not measured
            for case in cases:
                for run in range(args.runs):
                    # Rotate the order each run (two committers: alternate), so drift in load falls on all.
                    shift = run % len(benches)
                    order = benches[shift:] + benches[:shift]
                    for bench in order:
                        if isinstance(bench, FloorBench):
                            floor = bench.run(case, run)
                            floors.append(floor)
                            print(
                                f"{case.label} run {run} floor: rename {floor.rename_s:.3f} s, rmdir "
                                f"{floor.rmdir_s:.3f} s ({floor.threads} threads); 1 thread: rename "
                                f"{floor.rename_serial_s:.3f} s, rmdir {floor.rmdir_serial_s:.3f} s",
                                flush=True,
                            )
                            continue
                        measured = bench.run(case, run)
                        results.append(measured)
                        tasks = "" if measured.tasks_s is None else f"; tasks {measured.tasks_s:.2f} s"
                        clean = "" if measured.clean_s is None else f", until clean {measured.clean_s:.3f} s"
                        print(
                            f"{case.label} run {run} {measured.committer}: commit_job {measured.wall_s:.3f} s{clean} "
                            f"(committer_commit_job {measured.commit_job_ms} ms; prepare {measured.prepare_s:.1f} s"
                            f"{tasks})",
                            flush=True,
                        )
        finally:
            if hadoop_bench is not None:
                hadoop_bench.close()
        committers = [bench.name for bench in benches if not isinstance(bench, FloorBench)]
        summaries = [summarise(results, case, committers, floors) for case in cases]
        output["results"] = [asdict(r) for r in results]
        output["floors"] = [asdict(f) for f in floors]
        output["summaries"] = summaries
        output["load_average_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print_table(summaries, committers)
        print(f"load average after the runs: {output['load_average_after']}")

        if args.profile:
            profile = profile_python_commit(root, cases[0], args.profile_top, files)
            output["profile"] = profile
            print(profile)

    if args.memory_files:
        with benchmark_root(args.memory_root or args.root, args.keep) as memory_root:
            memory = run_memory_case(memory_root, args.memory_files, args.memory_tasks, args.memory_partitions)
        output["memory"] = memory
        print(
            f"memory case: {memory['files']:,} files, commit_job {memory['wall_s']:.1f} s, peak RSS "
            f"{memory['peak_rss_kib'] / 1024:.0f} MiB (RSS before commit_job "
            f"{memory['rss_before_commit_kib'] / 1024:.0f} MiB); prepare {memory['prepare_s']:.0f} s"
        )

    if args.json:
        with open(args.json, "w") as handle:
            json.dump(output, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
