"""Polars through the committer: write a lazy frame partitioned by day, read it back with Polars.

Run: ``python examples/polars_write.py [--dest DIR]`` (exit status 1 if the read-back rows differ).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import polars as pl

import manifest_committer.polars as mcp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", default=f"{tempfile.mkdtemp()}/events")
    args = parser.parse_args()
    frame = pl.LazyFrame({"id": range(1000)}).with_columns(day=pl.format("2026-11-{}", pl.col("id") % 7 + 10))
    summary = mcp.write(frame, args.dest, partition_by=["day"], mode="overwrite")
    back = pl.read_parquet(f"{args.dest}/**/*.parquet", hive_partitioning=True)
    print(f"job {summary.job_id if summary else None}: {back.height} rows, {back['day'].n_unique()} days")
    return 0 if back.height == 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
