"""Each framework's own writer vs the same write through the committer, 10,000 files: local disk, and local disk
with injected latency on every call.

The data: rows with a partition column ``p``; every writer makes one Hive directory per value of ``p`` and one
file per framework task and value, 10,000 files in all: pyarrow and Polars write in process (one task, 10,000
values), Dask 4 partitions x 2,500 values, Ray 10 blocks x 1,000 values (Ray's own ``write_parquet`` refuses more
than 1,024 partitions per block). 20 rows per file (``--rows-per-file``).

Own writers (unsafe: straight to the final paths): ``pyarrow.dataset.write_dataset(partitioning=["p"], flavor
hive)`` fed the same record batch reader as the committer's task, Polars ``write_parquet(partition_by="p")``
(and, on local disk, Polars' sink through a ``file_path_provider`` naming files as Polars does: the extension point
the committer's task uses where it cannot let Polars name the files, without the committer; and Polars' own sink
followed by nothing but the system calls the committer's route makes, in bare loops: the floor of that route),
Dask ``to_parquet(partition_on=["p"])`` (threads scheduler), Ray ``write_parquet(partition_cols=["p"])`` (2 CPUs).
Through the committer: ``manifest_committer.<framework>.write(partition_by=["p"], protocol="manifest")``.

``--latency 0.02``: still local disk, but every call of fsspec's local filesystem (open, info, ls, mkdir,
makedirs, isdir, isfile, delete, copy, move) sleeps that long first, in every process: Ray's workers install it
with a ``worker_process_setup_hook``, so Ray is measured too (its workers cannot share a ``memory://`` store).
Every writer, own or the committer's, reaches the disk through that filesystem: the own writers through fsspec
(pyarrow and Ray through ``PyFileSystem(FSSpecHandler(...))``, Polars' ``sink_parquet(pl.PartitionBy(...))``
handed fsspec files by a ``file_path_provider``, as the committer's Polars task is), and the committer's tasks
write their data files through ``task.fs`` instead of the native local writers they use on plain local disk.
The committer's own store calls sleep once each in a ``FaultInjectingStore`` with that latency (as
``bench_cloud_commit.py`` injects it, so the stages know the calls are slow and use their whole pool), and the
fsspec calls inside them do not sleep again. Local disk answers probes in O(1), as ``bench_cloud_commit.py``'s
``IndexedMemoryStore`` does, so no writer pays for fsspec's ``MemoryFileSystem`` scanning every key per call.

One measured run of each after an unmeasured warm-up with a twentieth of the files (with the same latency), or
``--repeat K`` rounds, the writers' order reversed every other round, with each round's ratio and their median
(this machine's disk gave the same write 1.2 to 11 s within an hour while runs deleted their output); wall time
of the write call after an ``os.sync()``; a fresh directory per run, all deleted at the end, not between runs (see
``timed``: on ext4 without a journal, files created within minutes of many deletions cost more; leave five minutes
after deleting many files, a test suite's or an earlier run's, before a run). pyarrow's own writer is quadratic in
the partitions of one batch, so it is also timed fed the same sorted slices of at most 128 partitions that the
committer's task hands it ("own, same slices"); with ``--latency`` only so (the whole table in one batch took
over ten minutes).
Under ``--latency`` the store counts as an object store for the files pyarrow's writer keeps open (64 for a
streamed task, 1,024 where the task's rows are in memory: ``TaskTarget.dataset_open_files``).
Run ``python benchmarks/bench_frameworks.py [--frameworks arrow,polars,dask,ray] [--latency 0.02] [--repeat 5]``;
``TMPDIR=$(bash benchmarks/ext4_in_ram.sh)`` in front measures a local ext4 without this machine's virtual disk.
The run ends with a table of the medians (framework, the version of its package that ran, own writer, own and
committed wall times, ratio), as BENCHMARKS.md ("Other writer frameworks") keeps it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not an installed one

import manifest_committer.polars
import manifest_committer.writing.dataset_output
import manifest_committer.writing.job
from manifest_committer.protocols.base import CommitterBase
from manifest_committer.protocols.registry import create_committer
from manifest_committer.store import FaultInjectingStore
from manifest_committer.writing.job import WriteJob

SHAPES = {"arrow": (1, 10_000), "polars": (1, 10_000), "dask": (4, 2_500), "ray": (10, 1_000)}
"""framework -> (tasks, partition values): 10,000 files each."""
ROWS_PER_FILE = 20
SLOWED = ("_open", "info", "ls", "mkdir", "makedirs", "rmdir", "isdir", "isfile", "lexists", "rm_file", "cp_file", "mv")
"""The calls of fsspec's ``LocalFileSystem`` that sleep under ``--latency``."""

_in_store = threading.local()
"""Set while the committer's store layer calls the store: that call has slept in ``LatencyStore`` already."""
_latency = [0.0]
"""Seconds every call sleeps in this process (a list: changed in place by ``install_latency``)."""


class LatencyStore(FaultInjectingStore):
    """The committer's store calls sleep once here, as ``bench_cloud_commit.py`` injects latency (so the stages
    know the calls are slow and use their whole pool); fsspec calls inside them then do not sleep again."""

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        def quietly() -> Any:
            _in_store.active = True
            try:
                return call()
            finally:
                _in_store.active = False

        return super().around(operation, path, quietly)


def _slowed(name: str) -> None:
    original = getattr(LocalFileSystem, name)
    if getattr(original, "slowed", False):
        return

    def slowed(self: LocalFileSystem, *args: Any, **kwargs: Any) -> Any:
        if _latency[0] and not getattr(_in_store, "active", False):
            time.sleep(_latency[0])
        return original(self, *args, **kwargs)

    slowed.slowed = True  # type: ignore[attr-defined]
    setattr(LocalFileSystem, name, slowed)


def _not_local(task_fs: Any) -> bool:
    """Under ``--latency`` the committer's tasks write through ``task.fs`` (which sleeps), as the own writers do."""
    return False


def install_latency(latency: float) -> None:
    """In this process: fsspec's local calls sleep ``latency`` s, every committer the write jobs build wraps its
    store in a ``LatencyStore``, and the committer's tasks write through fsspec. Ray's workers run it at start."""
    _latency[0] = latency
    for name in SLOWED:
        _slowed(name)

    def committer(job: WriteJob) -> CommitterBase:
        return create_committer(job.destination, job.job_id, job.protocol, config=job.config,
                                storage_options=job.storage_options,
                                store_wrapper=lambda inner: LatencyStore(inner, latency=latency))  # fmt: skip

    WriteJob.committer = committer  # type: ignore[assignment,method-assign]
    manifest_committer.writing.dataset_output.is_local = _not_local
    manifest_committer.writing.job.is_local = _not_local  # type: ignore[attr-defined]  # open files as on a store
    manifest_committer.polars.is_local = _not_local  # type: ignore[attr-defined]


LATENCY_VARIABLE = "BENCH_FRAMEWORKS_LATENCY"
"""How the driver's ``--latency`` reaches Ray's worker processes."""


def ray_worker_setup() -> None:
    """Ray's ``worker_process_setup_hook``: each worker process installs the driver's latency."""
    latency = float(os.environ.get(LATENCY_VARIABLE, "0"))
    if latency:
        install_latency(latency)


def table(tasks: int, partitions: int, rows_per_file: int = ROWS_PER_FILE) -> pa.Table:
    rows = tasks * partitions * rows_per_file
    return pa.table({"p": [i % partitions for i in range(rows)], "value": list(range(rows))})


def count_files(path: str) -> int:
    return sum(1 for _, _, names in os.walk(path) for name in names if not name.startswith(("_", ".")))


def timed(write: Callable[[str], Any], root: str, name: str) -> float:
    """One timed write into a new directory under ``root``, kept until the benchmark ends: ext4 without a journal
    (this machine's root file system) passes over every free inode deleted in the last 60 s (300 s while its
    inode table block is dirty) when it allocates one, checking each (``recently_deleted``); after many deletions
    a file creation cost over 1 ms of system CPU, most of it there (``perf``)."""
    target = f"{root}/{name.replace(' ', '-').replace(',', '')}-{uuid.uuid4().hex[:6]}"
    os.sync()  # the previous run's writeback is not charged to this one
    start = time.perf_counter()
    write(target)
    elapsed = time.perf_counter() - start
    load = os.getloadavg()[0]
    print(f"  {name:<22} {elapsed:8.2f} s  {count_files(target):6d} files  load {load:4.1f}", flush=True)
    return elapsed


def sliced(data: pa.Table, partitions_per_batch: int = 128) -> list[pa.RecordBatch]:
    """``data`` sorted by ``p`` in batches of at most ``partitions_per_batch`` values, as the committer's task hands
    them to ``write_dataset`` (pyarrow's writer is quadratic in the partitions of one batch)."""
    ordered = data.sort_by("p").combine_chunks()
    values = ordered.column("p").to_pylist()
    starts = [index for index in range(1, len(values)) if values[index] != values[index - 1]]
    cuts = [0, *starts[partitions_per_batch - 1 :: partitions_per_batch], len(values)]
    return [batch for a, b in itertools.pairwise(cuts) for batch in ordered.slice(a, b - a).to_batches()]


def writers(
    framework: str, data: pa.Table, tasks: int, slow: bool, whole_table: bool = True
) -> dict[str, Callable[[str], Any]]:
    """The own writer(s) and the committer's writer of ``framework`` for ``data``, by name; ``whole_table``:
    pyarrow's own writer fed the whole table too (local disk only: quadratic, minutes)."""
    if framework == "arrow":
        import pyarrow.dataset as pads
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        import manifest_committer.arrow as mca

        def own(url: str, batches: list[pa.RecordBatch] | None = None) -> None:
            reader = pa.RecordBatchReader.from_batches(data.schema, batches or data.to_batches())
            pads.write_dataset(reader, url, format="parquet", partitioning=["p"], partitioning_flavor="hive",
                               filesystem=PyFileSystem(FSSpecHandler(LocalFileSystem())) if slow else None,
                               max_partitions=1 << 20)  # fmt: skip

        return {
            **(
                {"own": own} if whole_table and not slow else {}
            ),  # quadratic in partitions per batch (see the module): local disk only
            "own, same slices": lambda url: own(url, sliced(data)),
            "committer": lambda url: mca.write(data, url, partition_by=["p"], protocol="manifest"),
        }
    if framework == "polars":
        import polars as pl

        import manifest_committer.polars as mcp

        frame = pl.from_arrow(data)
        assert isinstance(frame, pl.DataFrame)

        def own_polars(url: str) -> None:
            if not slow:
                frame.write_parquet(url, partition_by="p")
                return
            fs = LocalFileSystem()
            handles: list[Any] = []

            def provide(args: Any) -> Any:
                directory = f"{url}/p={args.partition_keys.item()}"
                fs.makedirs(directory, exist_ok=True)  # what Polars' own writer does for each partition
                handle = fs.open(f"{directory}/{args.index_in_partition}.parquet", "wb")
                handles.append(handle)
                return handle

            frame.lazy().sink_parquet(pl.PartitionBy(url, key="p", include_key=False, file_path_provider=provide))
            for handle in handles:
                handle.close()

        def own_with_provider(url: str) -> None:
            """Polars' own partitioned sink through the extension point the committer's task must use: a
            ``file_path_provider`` naming each file as Polars would (``p=<value>/<index>.parquet``)."""

            def provide(args: Any) -> str:
                return f"p={args.partition_keys.item()}/{args.index_in_partition}.parquet"

            frame.lazy().sink_parquet(pl.PartitionBy(url, key="p", include_key=False, file_path_provider=provide))

        def own_sink_and_commit_calls(url: str) -> None:
            """The floor: Polars' own sink into an attempt directory, then only the system calls the committer's
            promises need on its own route, in bare loops (no manifest, no journal, no Python beyond the loops):
            each file renamed in place to a unique name, the attempt directory listed for links, each file
            probed, each directory opened without following a link and listed, then moved into the destination."""
            attempt = f"{url}/_temporary/attempt"
            os.makedirs(attempt)
            sinked: list[str] = []
            frame.lazy().sink_parquet(
                pl.PartitionBy(attempt, key="p", include_key=False, approximate_bytes_per_file=None),
                sinked_paths_callback=lambda args: sinked.extend(path.path for path in args.paths),
            )
            calls_start = time.perf_counter()
            named = []
            for number, path in enumerate(sinked):
                directory = path.rpartition("/")[0]
                unique = f"{directory}/part-00000-floor-a0-c{number:03d}.parquet"
                os.rename(path, unique)
                named.append((directory, unique))
            with os.scandir(attempt) as entries:
                links = [entry.name for entry in entries if entry.is_symlink()]
            sizes = [os.lstat(unique).st_size for _, unique in named]
            assert not links and len(sizes) == len(sinked)
            cut = len(attempt) + 1
            for directory, _ in named:
                handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                with os.scandir(handle) as entries:
                    held = [(entry.name, entry.is_file(follow_symlinks=False)) for entry in entries]
                os.close(handle)
                assert len(held) == 1
                os.rename(directory, f"{url}/{directory[cut:]}")
            FLOOR_CALLS_SECONDS.append(time.perf_counter() - calls_start)

        return {
            "own": own_polars,
            # under latency "own" has a provider; the floor is of local disk only
            **({} if slow else {"own, file_path_provider": own_with_provider}),
            **({} if slow else {"own sink + the commit's system calls": own_sink_and_commit_calls}),
            "committer": lambda url: mcp.write(frame, url, partition_by=["p"], protocol="manifest"),
        }
    if framework == "dask":
        import dask
        import dask.dataframe as dd

        import manifest_committer.dask as mcd

        dask.config.set(scheduler="threads")
        ddf = dd.from_pandas(data.to_pandas(), npartitions=tasks)
        return {  # Dask's own writer reaches the disk through fsspec's local filesystem
            "own": lambda url: ddf.to_parquet(url, partition_on=["p"], write_index=False),
            "committer": lambda url: mcd.write(ddf, url, partition_by=["p"], protocol="manifest"),
        }
    import ray

    import manifest_committer.ray as mcr

    if not ray.is_initialized():
        root = str(Path(__file__).resolve().parents[1])
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": root, LATENCY_VARIABLE: str(_latency[0])},
                              "worker_process_setup_hook": "benchmarks.bench_frameworks.ray_worker_setup"})  # fmt: skip
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = ray.data.from_arrow(data).repartition(tasks).materialize()
    filesystem = None
    if slow:
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        filesystem = PyFileSystem(FSSpecHandler(LocalFileSystem()))
    return {
        "own": lambda url: dataset.write_parquet(url, partition_cols=["p"], filesystem=filesystem),
        "committer": lambda url: mcr.write(dataset, url, partition_by=["p"], protocol="manifest"),
    }


FLOOR_CALLS_SECONDS: list[float] = []
"""The Polars floor's system calls after its sink, a run each: the part of the floor no sink can hide."""


def measure_round(measured: dict[str, Callable[[str], Any]], root: str, number: int) -> dict[str, float]:
    """One timed run of each writer: in order in even rounds, in reverse in odd ones, so that a disk whose speed
    drifts during the benchmark favours neither side."""
    names = list(measured) if number % 2 == 0 else list(reversed(measured))
    return {name: timed(measured[name], root, name) for name in names}


FRAMEWORK_PACKAGES = {"arrow": "pyarrow", "polars": "polars", "dask": "dask", "ray": "ray"}
"""The distribution whose version each framework's row of the results names."""


def framework_version(framework: str) -> str:
    """The installed version of ``framework``'s package (``FRAMEWORK_PACKAGES``)."""
    return importlib.metadata.version(FRAMEWORK_PACKAGES[framework])


@dataclass(frozen=True)
class Result:
    """One own writer of a framework against the committer's write, over the measured rounds."""

    framework: str
    version: str
    own: str
    own_seconds: list[float]
    committer_seconds: list[float]

    @property
    def ratios(self) -> list[float]:
        return [committed / own for own, committed in zip(self.own_seconds, self.committer_seconds, strict=True)]


def results_of(framework: str, rounds: list[dict[str, float]]) -> list[Result]:
    """Each own writer's ``Result`` against the committer, from the rounds' wall times."""
    version = framework_version(framework)
    return [
        Result(framework, version, name, [times[name] for times in rounds], [times["committer"] for times in rounds])
        for name in rounds[0]
        if name != "committer"
    ]


def report_ratios(results: list[Result]) -> None:
    """Each round's ratio committer/own, and their median when there are several rounds."""
    for result in results:
        each = ", ".join(f"{ratio:.2f}" for ratio in result.ratios)
        median = f"; median {statistics.median(result.ratios):.2f}" if len(result.ratios) > 1 else ""
        print(f"  ratio committer/{result.own}: {each}{median}", flush=True)


def report_floor_calls(rounds: list[dict[str, float]]) -> None:
    """How long the floor's system calls took after its sink, against the own write of the same round."""
    if not FLOOR_CALLS_SECONDS:
        return
    shares = [calls / times["own"] for calls, times in zip(FLOOR_CALLS_SECONDS, rounds, strict=True)]
    print(
        f"  the floor's system calls after its sink: {statistics.median(FLOOR_CALLS_SECONDS):.2f} s median, "
        f"{', '.join(f'{share:.2f}' for share in shares)} of own; median {statistics.median(shares):.2f}",
        flush=True,
    )


def print_table(results: list[Result], latency: float) -> None:
    """The results as BENCHMARKS.md's table: medians of the rounds, with the framework versions that ran."""
    where = f"local disk, {latency * 1000:g} ms a call" if latency else "local disk"
    print(
        f"\n{where}; medians of {len(results[0].ratios) if results else 0} rounds; Python {platform.python_version()}"
    )
    print("| framework | version | own write | own, s | through the committer, s | ratio |")
    print("|---|---|---|---|---|---|")
    for result in results:
        own, committed = statistics.median(result.own_seconds), statistics.median(result.committer_seconds)
        ratio = statistics.median(result.ratios)
        print(f"| {result.framework} | {result.version} | {result.own} | {own:.2f} | {committed:.2f} | {ratio:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frameworks", default="arrow,polars,dask,ray")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per filesystem and store call; 0: none")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the partition values (and files)")
    parser.add_argument("--same-slices-only", action="store_true", help="leave out pyarrow's own writer fed the table")
    parser.add_argument("--repeat", type=int, default=1, help="measured rounds, alternating the writers' order")
    parser.add_argument("--rows-per-file", type=int, default=ROWS_PER_FILE, help="rows of each file written")
    args = parser.parse_args()
    whole_table = not args.same_slices_only
    slow = args.latency > 0
    if slow:
        install_latency(args.latency)  # before Ray starts: its workers install the same at start
    root = tempfile.mkdtemp(prefix="bench-frameworks-")
    frameworks = args.frameworks.split(",")
    versions = ", ".join(f"{FRAMEWORK_PACKAGES[name]} {framework_version(name)}" for name in frameworks)
    print(f"load average at start {os.getloadavg()[0]:.1f}; latency {args.latency} s; {versions}", flush=True)
    results: list[Result] = []
    try:
        for framework in frameworks:
            tasks, partitions = SHAPES[framework]
            data = table(tasks, max(1, int(partitions * args.scale)), args.rows_per_file)
            print(f"{framework} {framework_version(framework)}: {tasks} tasks, {data.num_rows} rows", flush=True)
            small = table(tasks, max(1, partitions // 20))
            for name, write in writers(framework, small, tasks, slow, whole_table).items():
                timed(write, root, f"warm-up {name}")  # a twentieth of the files: imports, caches, Ray's workers
            measured = writers(framework, data, tasks, slow, whole_table)
            FLOOR_CALLS_SECONDS.clear()
            rounds = [measure_round(measured, root, number) for number in range(args.repeat)]
            results.extend(results_of(framework, rounds))
            report_ratios(results_of(framework, rounds))
            report_floor_calls(rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(results, args.latency)


if __name__ == "__main__":
    main()
