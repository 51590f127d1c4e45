"""Ten million files: a job commit on the memory store whose manifests come from a fast generator.

A 10,000,000-file job cannot be prepared by 10 million task writes on this machine, nor held in fsspec's memory
filesystem (hundreds of bytes a file, in the committing process). So the job is generated:

* **Manifests.** ``generate`` writes one valid task manifest per task (``--files-per-task`` files spread over
  ``--partitions`` directories) as JSON built from string templates, to a directory on tmpfs (``/dev/shm``:
  its pages are not in any process's RSS). Generation is not timed as part of the commit.
* **The store.** ``GeneratedJobStore`` wraps the memory store of the benchmark (``IndexedMemoryStore``, O(1)
  probes). The manifest directory lists the generated manifests and reads them from tmpfs; a rename of a data
  file from a task attempt directory into the destination is counted and succeeds (the file is virtual: nothing
  else of the store holds it); every other call (``commit-started``, the journal, directories, ``_SUCCESS``,
  cleanup) is the memory store's own.

So the commit does all of its own work (list, read and check every manifest, spill the entries, find duplicate
destinations in bounded memory, journal each unit, one ``rename_file`` store call per file, save ``_SUCCESS``,
clean up), and only the data files' bytes are missing. Each size runs in a fresh subprocess, which reports its
peak RSS (``ru_maxrss``), the wall time of ``commit_job``, the stages' times and the spill files' sizes.

``python benchmarks/bench_ten_million.py --files 1000000 10000000`` (BENCHMARKS.md has the results).
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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for benchmarks.bench_cloud_commit

import manifest_committer as mc
from benchmarks.indexed_memory_store import IndexedMemoryStore
from manifest_committer.entry_file import SPILL_PREFIX
from manifest_committer.manifest import MANIFEST_SUFFIX, MANIFEST_TYPE
from manifest_committer.paths import JobPaths
from manifest_committer.store import FileStatus, StoreOperations
from manifest_committer.store.wrapping import WrappingStore

JOB_ID = "job_ten_million"
STAGES = (
    "job_stage_load_manifests",
    "job_stage_create_target_dirs",
    "job_stage_rename_files",
    "job_stage_save_success_marker",
    "job_stage_cleanup",
)


def partition_name(index: int) -> str:
    return f"dt={2024 + index // 360:04d}-{index % 360 // 30 + 1:02d}-{index % 30 + 1:02d}"


def task_ids(task: int) -> tuple[str, str]:
    return f"task_{task:07d}", f"attempt_{task:07d}_0"


def manifest_json(paths: JobPaths, to_url: Any, task: int, files: int, partitions: int) -> bytes:
    """One valid task manifest, built from templates: about a microsecond a file."""
    task_id, attempt_id = task_ids(task)
    source = to_url(paths.task_attempt_dir(attempt_id)) + "/"
    dest = to_url(paths.dest) + "/"
    names = [partition_name(p) for p in range(partitions)]
    entries = ",".join(
        f'{{"s":"{source}{names[n % partitions]}/part-{task:07d}-{n:06d}.parquet",'
        f'"d":"{dest}{names[n % partitions]}/part-{task:07d}-{n:06d}.parquet","z":1024}}'
        for n in range(files)
    )
    directories = ",".join(f'{{"d":"{dest}{name}","t":1,"l":1}}' for name in names[: min(partitions, files)])
    return (
        f'{{"extraData":{{}},"type":"{MANIFEST_TYPE}","version":1,"jobId":"{paths.job_id}",'
        f'"jobAttemptNumber":{paths.job_attempt},"taskID":"{task_id}","taskAttemptID":"{attempt_id}",'
        f'"taskAttemptDir":"{source[:-1]}","files":[{entries}],"directories":[{directories}],'
        '"iostatistics":{"counters":{},"gauges":{},"minimums":{},"maximums":{},"meanstatistics":{}}}'
    ).encode()


class GeneratedJobStore(WrappingStore):
    """The memory store, plus generated manifests (read from ``manifests``) and virtual data files."""

    def __init__(self, inner: StoreOperations, paths: JobPaths, manifests: str) -> None:
        super().__init__(inner)
        self.paths = paths
        self.manifests = manifests
        self.tasks_prefix = paths.task_attempts_dir.rstrip("/") + "/"
        self.dest_prefix = paths.dest.rstrip("/") + "/"
        self.renamed = 0
        self._lock = threading.Lock()

    def _generated(self, path: str) -> str | None:
        if os.path.dirname(path.rstrip("/")) != self.paths.manifest_dir.rstrip("/"):
            return None
        local = os.path.join(self.manifests, os.path.basename(path))
        return local if os.path.exists(local) else None

    def list_dir(self, path: str) -> list[FileStatus]:
        listed = self.inner.list_dir(path)
        if path.rstrip("/") == self.paths.manifest_dir.rstrip("/"):
            for entry in os.scandir(self.manifests):
                listed.append(
                    FileStatus(path=f"{path.rstrip('/')}/{entry.name}", size=entry.stat().st_size, is_dir=False)
                )
        return listed

    def read_bytes(self, path: str) -> bytes:
        local = self._generated(path)
        if local is None:
            return self.inner.read_bytes(path)
        with open(local, "rb") as handle:
            return handle.read()

    def rename_file(self, source: str, dest: str) -> None:
        if source.startswith(self.tasks_prefix) and dest.startswith(self.dest_prefix):
            with self._lock:
                self.renamed += 1
            return
        self.inner.rename_file(source, dest)


def generate(root: str, files: int, tasks: int, partitions: int) -> tuple[str, float]:
    """Write the job's manifests under ``root``; returns the directory and the seconds it took."""
    paths = JobPaths("/bench/out", JOB_ID, 0)
    to_url = mc.ManifestCommitter("memory://bench/out", job_id=JOB_ID).store.to_url
    directory = os.path.join(root, "manifests")
    os.makedirs(directory)
    per_task = files // tasks
    start = time.perf_counter()

    def write(task: int) -> None:
        task_id, _ = task_ids(task)
        with open(os.path.join(directory, task_id + MANIFEST_SUFFIX), "wb") as handle:
            handle.write(manifest_json(paths, to_url, task, per_task, partitions))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(write, range(tasks)))
    return directory, time.perf_counter() - start


def spill_bytes(directory: str) -> int:
    return sum(
        os.stat(os.path.join(directory, name)).st_size
        for name in os.listdir(directory)
        if name.startswith(SPILL_PREFIX)
    )


def child(manifests: str, spill: str) -> None:
    """Subprocess: set up the job, commit it, print peak RSS, times and counts as JSON (last line)."""
    stores: list[GeneratedJobStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        store = GeneratedJobStore(IndexedMemoryStore(inner.fs), JobPaths("/bench/out", JOB_ID, 0), manifests)
        stores.append(store)
        return store

    config = mc.CommitterConfig(summary_report_directory=None)
    committer = mc.ManifestCommitter("memory://bench/out", job_id=JOB_ID, config=config, store_wrapper=wrap)
    committer.setup_job()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spill_peak = 0
    done = threading.Event()

    def watch_spill() -> None:
        nonlocal spill_peak
        while not done.wait(0.5):
            spill_peak = max(spill_peak, spill_bytes(spill))

    watcher = threading.Thread(target=watch_spill, daemon=True)
    watcher.start()
    os.environ["TMPDIR"] = spill
    tempfile.tempdir = spill  # the entry and hash spill files go to the system temp directory
    cpu = time.process_time()
    start = time.perf_counter()
    summary = committer.commit_job()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    done.set()
    watcher.join()
    means = summary.iostatistics.meanstatistics
    print(
        json.dumps(
            {
                "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "rss_before_commit_kib": before,
                "wall_s": wall,
                "cpu_s": cpu,
                "spill_peak_bytes": spill_peak,
                "files_committed": summary.iostatistics.counters.get("committer_files_committed", 0),
                "renamed": stores[0].renamed,
                "stages_ms": {name: means[name + ".mean"].sum for name in STAGES if name + ".mean" in means},
            }
        )
    )


def run_size(files: int, tasks: int, partitions: int, root_parent: str, spill_parent: str) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="mc-ten-million-", dir=root_parent)
    spill = tempfile.mkdtemp(prefix="mc-ten-million-spill-", dir=spill_parent)
    try:
        manifests, generate_s = generate(root, files, tasks, partitions)
        manifest_bytes = sum(entry.stat().st_size for entry in os.scandir(manifests))
        finished = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", manifests, spill],
            check=False,
            capture_output=True,
            text=True,
        )
        if finished.returncode != 0:
            raise RuntimeError(f"the commit of {files} files failed:\n{finished.stderr[-3000:]}")
        output = finished.stdout
        result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
        if result["files_committed"] != files or result["renamed"] != files:
            raise RuntimeError(f"{files} files: committed {result['files_committed']}, renamed {result['renamed']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(spill, ignore_errors=True)
    result.update(files=files, tasks=tasks, partitions=partitions, generate_s=generate_s, manifest_bytes=manifest_bytes)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--files-per-task", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="destination directories per task")
    parser.add_argument("--manifest-root", default="/dev/shm", help="where the generated manifests go (tmpfs)")
    parser.add_argument("--spill-root", default=None, help="where the commit's spill files go (default: temp)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    results = []
    for files in args.files:
        tasks = max(1, files // args.files_per_task)
        load = os.getloadavg()[0]
        result = run_size(files, tasks, args.partitions, args.manifest_root, args.spill_root or tempfile.gettempdir())
        result["load_before"] = load
        result["load_after"] = os.getloadavg()[0]
        results.append(result)
        stages = ", ".join(f"{k.removeprefix('job_stage_')} {v / 1000:.1f}" for k, v in result["stages_ms"].items())
        print(
            f"{files:,} files ({tasks:,} tasks): commit_job {result['wall_s']:.1f} s (CPU {result['cpu_s']:.1f} s; "
            f"{result['wall_s'] / files * 1e6:.1f} us a file), peak RSS {result['peak_rss_kib'] / 1024:.0f} MiB "
            f"(before commit_job {result['rss_before_commit_kib'] / 1024:.0f} MiB), spill peak "
            f"{result['spill_peak_bytes'] / 2**20:.0f} MiB, manifests {result['manifest_bytes'] / 2**20:.0f} MiB "
            f"generated in {result['generate_s']:.1f} s; stages (s): {stages}; load {load:.1f} -> "
            f"{result['load_after']:.1f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
