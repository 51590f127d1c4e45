"""Ray Data through the committer: a local Ray cluster writes a dataset through ``Datasink`` (retrying failed
write tasks), the driver commits exactly the attempts Ray reports. Read back with Ray.

Run: ``python examples/ray_write.py [--dest DIR]`` (exit status 1 if the read-back rows differ).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import ray

import manifest_committer.ray as mcr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", default=f"{tempfile.mkdtemp()}/events")
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        dataset = ray.data.range(1000).map(lambda row: {"day": f"2026-11-{10 + row['id'] % 7}", "id": row["id"]})
        summary = mcr.write(dataset, args.dest, partition_by=["day"], mode="overwrite",
                            ray_remote_args={"max_retries": 3})  # fmt: skip
        rows = ray.data.read_parquet(args.dest).count()
    finally:
        ray.shutdown()
    print(f"job {summary.job_id if summary else None}: {rows} rows in {args.dest}")
    return 0 if rows == 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
