"""pyarrow through the committer: write a partitioned table, append to it, overwrite one partition, read it back.

Run: ``python examples/arrow_write.py [--dest DIR]`` (exit status 1 if the read-back rows differ).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import pyarrow as pa
import pyarrow.dataset as pads

import manifest_committer.arrow as mca


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", default=f"{tempfile.mkdtemp()}/events")
    args = parser.parse_args()
    table = pa.table({"day": ["2026-11-21", "2026-11-22"] * 500, "value": list(range(1000))})
    summary = mca.write(table, args.dest, partition_by=["day"])
    mca.write(table.slice(0, 10), args.dest, partition_by=["day"], mode="append")
    replacement = pa.table({"day": ["2026-11-22"], "value": [-1]})
    mca.write(replacement, args.dest, partition_by=["day"], mode="overwrite",
              options={"partitionOverwriteMode": "dynamic"})  # fmt: skip
    rows = pads.dataset(args.dest, partitioning="hive").count_rows()
    print(f"first job {summary.job_id if summary else None}: {rows} rows in {args.dest}")
    return 0 if rows == 500 + 5 + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
