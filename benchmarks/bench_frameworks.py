"""Each framework's own writer vs the same write through the committer, local disk, 10,000 files.

The data: ``--rows`` rows with a partition column ``p`` of ``--partitions`` values, so every writer makes one
Hive directory per value and (with ``--tasks`` framework tasks each holding rows of every value) about
``tasks x partitions`` files. Own writers: ``pyarrow.dataset.write_dataset(partitioning=["p"], flavor hive)``,
Polars ``write_parquet(partition_by="p")``, Dask ``to_parquet(partition_on=["p"])`` (threads scheduler),
Ray ``write_parquet(partition_cols=["p"])`` (2 CPUs). Through the committer: ``manifest_committer.<framework>.write``
with ``partition_by=["p"]`` (protocol ``manifest``). One run of each after an unmeasured warm-up; wall time of
the write call; a fresh directory per run.

Run ``python benchmarks/bench_frameworks.py [--frameworks arrow,polars,dask,ray]``; BENCHMARKS.md ("Other
writer frameworks") has the results.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa


def table(rows: int, partitions: int) -> pa.Table:
    return pa.table({"p": [i % partitions for i in range(rows)], "value": list(range(rows))})


def timed(write: Callable[[str], Any], root: Path, name: str) -> float:
    target = root / name
    start = time.perf_counter()
    write(str(target))
    elapsed = time.perf_counter() - start
    files = sum(1 for path in target.rglob("*") if path.is_file() and not path.name.startswith(("_", ".")))
    print(f"  {name:<22} {elapsed:8.2f} s  {files:6d} files", flush=True)
    shutil.rmtree(target, ignore_errors=True)
    return elapsed


def writers(framework: str, data: pa.Table, tasks: int) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """(own writer, committer writer) of ``framework`` for ``data``."""
    if framework == "arrow":
        import pyarrow.dataset as pads

        import manifest_committer.arrow as mca

        def own(url: str) -> None:
            pads.write_dataset(data, url, format="parquet", partitioning=["p"], partitioning_flavor="hive",
                               max_partitions=1 << 20)  # fmt: skip

        return own, lambda url: mca.write(data, url, partition_by=["p"], protocol="manifest")
    if framework == "polars":
        import polars as pl

        import manifest_committer.polars as mcp

        frame = pl.from_arrow(data)
        assert isinstance(frame, pl.DataFrame)
        return (
            lambda url: frame.write_parquet(url, partition_by="p"),
            lambda url: mcp.write(frame, url, partition_by=["p"], protocol="manifest"),
        )
    if framework == "dask":
        import dask
        import dask.dataframe as dd

        import manifest_committer.dask as mcd

        dask.config.set(scheduler="threads")
        ddf = dd.from_pandas(data.to_pandas(), npartitions=tasks)
        return (
            lambda url: ddf.to_parquet(url, partition_on=["p"], write_index=False),
            lambda url: mcd.write(ddf, url, partition_by=["p"], protocol="manifest"),
        )
    import ray

    import manifest_committer.ray as mcr

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = ray.data.from_arrow(data).repartition(tasks).materialize()
    return (
        lambda url: dataset.write_parquet(url, partition_cols=["p"]),
        lambda url: mcr.write(dataset, url, partition_by=["p"], protocol="manifest"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frameworks", default="arrow,polars,dask,ray")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2_500)
    parser.add_argument("--tasks", type=int, default=4, help="framework tasks (Dask partitions, Ray blocks)")
    args = parser.parse_args()
    data = table(args.rows, args.partitions)
    root = Path(tempfile.mkdtemp(prefix="bench-frameworks-"))
    try:
        for framework in args.frameworks.split(","):
            own, committed = writers(framework, data, args.tasks)
            print(f"{framework}:", flush=True)
            timed(own, root, "warm-up-own")
            timed(committed, root, "warm-up-committer")
            own_time = timed(own, root, "own")
            committer_time = timed(committed, root, "committer")
            print(f"  ratio committer/own: {committer_time / own_time:.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
