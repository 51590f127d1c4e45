"""Dask through the committer: a LocalCluster of worker processes writes a partitioned frame; one barrier task
commits exactly the partitions' attempts. Read back with Dask.

Run: ``python examples/dask_write.py [--dest DIR]`` (exit status 1 if the read-back rows differ).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import dask
import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

import manifest_committer.dask as mcd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", default=f"{tempfile.mkdtemp()}/events")
    args = parser.parse_args()
    frame = pd.DataFrame({"day": [f"2026-11-{10 + i % 7}" for i in range(1000)], "value": range(1000)})
    # Python 3.11: the workers' profiler can deadlock a worker (CPython issue 106883); docs/writers.md#dask.
    profiler_off = dask.config.set({"distributed.worker.profile.enabled": sys.version_info >= (3, 12)})
    with (
        profiler_off,
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster),
    ):
        summary = mcd.write(dd.from_pandas(frame, npartitions=4), args.dest, partition_by=["day"],
                            mode="overwrite", compute_kwargs={"retries": 2})  # fmt: skip
        rows = len(dd.read_parquet(args.dest, dataset={"partitioning": "hive"}))
    print(f"job {summary.job_id if summary else None}: {rows} rows in {args.dest}")
    return 0 if rows == 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
