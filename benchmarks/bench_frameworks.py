"""Each framework's own writer vs the same write through the committer, 10,000 files: local disk, and a memory
store with injected latency on every call.

The data: rows with a partition column ``p``; every writer makes one Hive directory per value of ``p`` and one
file per framework task and value, 10,000 files in all: pyarrow and Polars write in process (one task, 10,000
values), Dask 4 partitions x 2,500 values, Ray 10 blocks x 1,000 values (Ray's own ``write_parquet`` refuses more
than 1,024 partitions per block). 20 rows per file.

Own writers (unsafe: straight to the final paths): ``pyarrow.dataset.write_dataset(partitioning=["p"], flavor
hive)`` fed the same record batch reader as the committer's task, Polars ``write_parquet(partition_by="p")``,
Dask ``to_parquet(partition_on=["p"])`` (threads scheduler), Ray ``write_parquet(partition_cols=["p"])`` (2 CPUs).
Through the committer: ``manifest_committer.<framework>.write(partition_by=["p"], protocol="manifest")``.

``--latency 0.02``: the destination is ``memory://``, served by a memory filesystem that sleeps that long in
every call (open, info, ls, mkdir, delete, copy, move): the framework's own writer pays it on each of its calls,
the committer's tasks on each data file they open, and the committer's store layer once per store call (a
``FaultInjectingStore`` with that latency, as ``bench_cloud_commit.py`` does, so the stages know the calls are
slow and run them on their whole pool). Polars' own writer cannot write to an fsspec filesystem by path, so
there its own ``sink_parquet(pl.PartitionBy(...))`` gets each file as an fsspec file from a
``file_path_provider``. Ray is left out (its worker processes do not share the driver's memory filesystem).

One measured run of each after an unmeasured warm-up with a twentieth of the files; wall time of the write call;
a fresh directory per run. pyarrow's own writer is quadratic in the partitions of one batch, so it is also timed
fed the same sorted slices of at most 128 partitions that the committer's task hands it ("own, same slices");
with ``--latency`` only so (the whole table in one batch took over ten minutes with latency).
Run ``python benchmarks/bench_frameworks.py [--frameworks arrow,polars,dask,ray] [--latency 0.02]``;
BENCHMARKS.md ("Other writer frameworks") has the results.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
from fsspec.implementations.memory import MemoryFileSystem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not an installed one

from manifest_committer.committer import CommitterBase
from manifest_committer.protocols import create_committer
from manifest_committer.store import FaultInjectingStore
from manifest_committer.writing.job import WriteJob

SHAPES = {"arrow": (1, 10_000), "polars": (1, 10_000), "dask": (4, 2_500), "ray": (10, 1_000)}
"""framework -> (tasks, partition values): 10,000 files each."""
ROWS_PER_FILE = 20


_in_store = threading.local()
"""Set while the committer's store layer calls the filesystem: that call has slept in ``LatencyStore`` already."""


class LatencyMemoryFileSystem(MemoryFileSystem):  # type: ignore[misc]
    """``memory://`` whose every call first sleeps ``latency`` seconds, as a remote store's round trip would."""

    latency = 0.0


class LatencyStore(FaultInjectingStore):
    """The committer's store calls sleep once here, as ``bench_cloud_commit.py`` injects latency (so the stages
    know the calls are slow and use their whole pool); the filesystem calls inside them then do not sleep again
    (and the memory store's rename lock is held for microseconds, as on a real store)."""

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        def quietly() -> Any:
            _in_store.active = True
            try:
                return call()
            finally:
                _in_store.active = False

        return super().around(operation, path, quietly)


def _with_store_latency(latency: float) -> None:
    """Every committer the write jobs build wraps its store in a ``LatencyStore``."""

    def committer(job: WriteJob) -> CommitterBase:
        return create_committer(job.destination, job.job_id, job.protocol, config=job.config,
                                storage_options=job.storage_options,
                                store_wrapper=lambda inner: LatencyStore(inner, latency=latency))  # fmt: skip

    WriteJob.committer = committer  # type: ignore[assignment,method-assign]


def _slowed(name: str) -> None:
    original = getattr(MemoryFileSystem, name)

    def slowed(self: LatencyMemoryFileSystem, *args: Any, **kwargs: Any) -> Any:
        if not getattr(_in_store, "active", False):
            time.sleep(self.latency)
        return original(self, *args, **kwargs)

    setattr(LatencyMemoryFileSystem, name, slowed)


for _name in ("_open", "info", "ls", "mkdir", "rmdir", "rm_file", "cp_file", "mv", "pipe_file", "cat_file"):
    _slowed(_name)


def table(tasks: int, partitions: int) -> pa.Table:
    rows = tasks * partitions * ROWS_PER_FILE
    return pa.table({"p": [i % partitions for i in range(rows)], "value": list(range(rows))})


def count_files(url: str) -> int:
    fs, path = fsspec.core.url_to_fs(url)
    return sum(1 for name in fs.find(path) if not name.rsplit("/", 1)[-1].startswith(("_", ".")))


def timed(write: Callable[[str], Any], root: str, name: str) -> float:
    target = f"{root}/{name}-{uuid.uuid4().hex[:6]}"
    start = time.perf_counter()
    write(target)
    elapsed = time.perf_counter() - start
    print(f"  {name:<22} {elapsed:8.2f} s  {count_files(target):6d} files", flush=True)
    fs, path = fsspec.core.url_to_fs(target)
    latency, LatencyMemoryFileSystem.latency = LatencyMemoryFileSystem.latency, 0.0
    try:
        fs.rm(path, recursive=True)
    finally:
        LatencyMemoryFileSystem.latency = latency
    return elapsed


def sliced(data: pa.Table, partitions_per_batch: int = 128) -> list[pa.RecordBatch]:
    """``data`` sorted by ``p`` in batches of at most ``partitions_per_batch`` values, as the committer's task hands
    them to ``write_dataset`` (pyarrow's writer is quadratic in the partitions of one batch)."""
    ordered = data.sort_by("p").combine_chunks()
    values = ordered.column("p").to_pylist()
    starts = [index for index in range(1, len(values)) if values[index] != values[index - 1]]
    cuts = [0, *starts[partitions_per_batch - 1 :: partitions_per_batch], len(values)]
    return [batch for a, b in itertools.pairwise(cuts) for batch in ordered.slice(a, b - a).to_batches()]


def writers(framework: str, data: pa.Table, tasks: int, memory: bool) -> dict[str, Callable[[str], Any]]:
    """The own writer(s) and the committer's writer of ``framework`` for ``data``, by name."""
    if framework == "arrow":
        import pyarrow.dataset as pads
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        import manifest_committer.arrow as mca

        def own(url: str, batches: list[pa.RecordBatch] | None = None) -> None:
            fs, path = fsspec.core.url_to_fs(url)
            reader = pa.RecordBatchReader.from_batches(data.schema, batches or data.to_batches())
            pads.write_dataset(reader, path, format="parquet", partitioning=["p"], partitioning_flavor="hive",
                               filesystem=PyFileSystem(FSSpecHandler(fs)) if memory else None,
                               max_partitions=1 << 20)  # fmt: skip

        return {
            **({} if memory else {"own": own}),  # quadratic in partitions per batch (see the module): local disk only
            "own, same slices": lambda url: own(url, sliced(data)),
            "committer": lambda url: mca.write(data, url, partition_by=["p"], protocol="manifest"),
        }
    if framework == "polars":
        import polars as pl

        import manifest_committer.polars as mcp

        frame = pl.from_arrow(data)
        assert isinstance(frame, pl.DataFrame)

        def own_polars(url: str) -> None:
            if not memory:
                frame.write_parquet(url, partition_by="p")
                return
            fs, path = fsspec.core.url_to_fs(url)
            handles: list[Any] = []

            def provide(args: Any) -> Any:
                handle = fs.open(f"{path}/p={args.partition_keys.item()}/{args.index_in_partition}.parquet", "wb")
                handles.append(handle)
                return handle

            frame.lazy().sink_parquet(pl.PartitionBy(path, key="p", include_key=False, file_path_provider=provide))
            for handle in handles:
                handle.close()

        return {
            "own": own_polars,
            "committer": lambda url: mcp.write(frame, url, partition_by=["p"], protocol="manifest"),
        }
    if framework == "dask":
        import dask
        import dask.dataframe as dd

        import manifest_committer.dask as mcd

        dask.config.set(scheduler="threads")
        ddf = dd.from_pandas(data.to_pandas(), npartitions=tasks)
        return {
            "own": lambda url: ddf.to_parquet(url, partition_on=["p"], write_index=False),
            "committer": lambda url: mcd.write(ddf, url, partition_by=["p"], protocol="manifest"),
        }
    import ray

    import manifest_committer.ray as mcr

    if not ray.is_initialized():
        root = str(Path(__file__).resolve().parents[1])
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": root}})  # fmt: skip
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = ray.data.from_arrow(data).repartition(tasks).materialize()
    return {
        "own": lambda url: dataset.write_parquet(url, partition_cols=["p"]),
        "committer": lambda url: mcr.write(dataset, url, partition_by=["p"], protocol="manifest"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frameworks", default="arrow,polars,dask,ray")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per call of a memory store; 0: local disk")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the partition values (and files)")
    args = parser.parse_args()
    memory = args.latency > 0
    if memory:
        fsspec.register_implementation("memory", LatencyMemoryFileSystem, clobber=True)
    local_root = tempfile.mkdtemp(prefix="bench-frameworks-")
    root = f"memory://bench-{uuid.uuid4().hex[:6]}" if memory else local_root
    try:
        for framework in args.frameworks.split(","):
            if memory and framework == "ray":
                print("ray: left out with --latency (its workers do not share the memory filesystem)")
                continue
            tasks, partitions = SHAPES[framework]
            data = table(tasks, max(1, int(partitions * args.scale)))
            print(f"{framework}: {tasks} tasks, {data.num_rows} rows", flush=True)
            LatencyMemoryFileSystem.latency = 0.0
            _with_store_latency(0.0)
            for name, write in writers(framework, table(tasks, max(1, partitions // 20)), tasks, memory).items():
                timed(write, root, f"warm-up {name}")  # a twentieth of the files: imports, caches, Ray's workers
            LatencyMemoryFileSystem.latency = args.latency
            _with_store_latency(args.latency)
            times = {name: timed(write, root, name) for name, write in writers(framework, data, tasks, memory).items()}
            for name, seconds in times.items():
                if name != "committer":
                    print(f"  ratio committer/{name}: {times['committer'] / seconds:.2f}", flush=True)
    finally:
        shutil.rmtree(local_root, ignore_errors=True)


if __name__ == "__main__":
    main()
