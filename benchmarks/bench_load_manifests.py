"""Peak memory of LoadManifests alone: a job of N files in task manifests, loaded in a fresh subprocess.

Only the manifests are written (LoadManifests never touches the sources), under ``--root`` (``/dev/shm`` keeps
it fast; tmpfs pages do not count in a process's RSS). The child runs the stage on local disk and prints its
peak RSS (``ru_maxrss``), RSS before the stage, and the stage's wall time as JSON. Run it against two checkouts
to compare them: ``cd <checkout> && python benchmarks/bench_load_manifests.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from manifest_committer.config import CommitterConfig
from manifest_committer.manifest import DirEntry, EntryStatus, FileEntry, TaskManifest
from manifest_committer.paths import JobPaths
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.load_manifests import LoadManifestsArguments, LoadManifestsStage
from manifest_committer.store import open_store

JOB_ID = "job-load"


def resident_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def prepare(destination: str, files: int, tasks: int, partitions: int) -> None:
    opened = open_store(destination)
    store, dest = opened.store, opened.path
    paths = JobPaths(dest, JOB_ID)
    os.makedirs(paths.manifest_dir)
    per_task = files // tasks
    for index in range(tasks):
        attempt_id = f"attempt_{index:06d}_0"
        work_dir = paths.task_attempt_dir(attempt_id)
        entries = []
        for number in range(per_task):
            relative = f"dt={number % partitions:04d}/part-{index:06d}-{number:06d}.parquet"
            entries.append(FileEntry(store.to_url(f"{work_dir}/{relative}"), store.to_url(f"{dest}/{relative}"), 1))
        directories = [
            DirEntry(store.to_url(f"{dest}/dt={p:04d}"), EntryStatus.NOT_FOUND, 1) for p in range(partitions)
        ]
        manifest = TaskManifest(
            JOB_ID, 0, f"task_{index:06d}", attempt_id, store.to_url(work_dir), entries, directories
        )
        with open(paths.manifest_path(f"task_{index:06d}"), "wb") as handle:
            handle.write(manifest.to_json())


def child(destination: str) -> None:
    opened = open_store(destination)
    store, dest = opened.store, opened.path
    context = StageContext(config=CommitterConfig(), store=store, paths=JobPaths(dest, JOB_ID))
    before = resident_kib()
    start = time.perf_counter()
    result = LoadManifestsStage(context).apply(LoadManifestsArguments())
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    files = result.file_count
    result.entry_file.close()
    print(json.dumps({"files": files, "rss_before_kib": before, "peak_rss_kib": peak, "wall_s": round(wall, 2)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--root", default=None, help="parent directory of the job (default: the system temp)")
    parser.add_argument("--child", metavar="DEST", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    root = tempfile.mkdtemp(prefix="bench-load-", dir=args.root)
    try:
        destination = os.path.join(root, "out")
        prepare(destination, args.files, args.tasks, args.partitions)
        output = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", destination],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        print(output.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
