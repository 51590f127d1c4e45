"""Job commit under store latency, and against the Azure and GCS emulators.

Latency part: a job of ``TASKS x FILES`` small files on the ``memory://`` store, wrapped in a
``FaultInjectingStore``. The job is prepared (setup, tasks written and committed) with the wrapper's latency at 0;
then its call counters are cleared, its latency set (20 ms by default) and only ``commit_job`` is timed. The ideal
is ``calls x latency / io.threads``: every store call the commit made, sleeping in parallel on every thread with
no other cost. The report gives measured / ideal.

Emulator part: the same kind of job (fewer files) against Azurite and fake-gcs-server, started as the test
fixtures start them (``tests/fixtures/emulators.py``), each job in a fresh container or bucket; files per second
of ``commit_job``.

Run ``python benchmarks/bench_cloud_commit.py --help`` for the options; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fsspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

import manifest_committer as mc
from manifest_committer.store import FaultInjectingStore, FileStatus, StoreOperations
from manifest_committer.store.memory import MemoryStore

PARTITIONS = 5


class IndexedMemoryStore(MemoryStore):
    """``memory://`` with O(1) probes and renames, so a benchmark measures the committer, not fsspec's scans.

    fsspec's ``MemoryFileSystem.info`` scans every key of the filesystem (to find implied directories) and ``mv``
    expands paths, so with 20,000 keys one ``rename_file`` costs milliseconds of CPU under the GIL: more than
    the injected latency can hide. This store keeps a set of directories (explicit and implied) beside the
    filesystem's dict; a deleted file's directory stays, as a real directory would.
    """

    def __init__(self, fs: Any) -> None:
        super().__init__(fs)
        self._dirs: set[str] = set()
        self._indexed_keys = -1

    def _directories(self) -> set[str]:
        size = len(self.fs.store) + len(self.fs.pseudo_dirs)
        if size != self._indexed_keys:  # files written or directories made through the filesystem itself
            dirs = {d for d in self.fs.pseudo_dirs if d}
            for key in self.fs.store:
                self._add_parents(dirs, key)
            self._dirs = dirs
            self._indexed_keys = size
        return self._dirs

    @staticmethod
    def _add_parents(dirs: set[str], path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = parent.rsplit("/", 1)[0]

    def info(self, path: str) -> FileStatus | None:
        path = self.fs._strip_protocol(path)
        found = self.fs.store.get(path)
        if found is not None:
            return FileStatus(path=path, size=found.size, is_dir=False)
        with self._rename_lock:
            return FileStatus(path=path, size=0, is_dir=True) if path in self._directories() else None

    def rename_file(self, source: str, dest: str) -> None:
        source, dest = self.fs._strip_protocol(source), self.fs._strip_protocol(dest)
        with self._rename_lock:
            dirs = self._directories()
            if dest in self.fs.store or dest in dirs:
                raise FileExistsError(f"rename destination exists: {dest}")
            if source not in self.fs.store:
                raise FileNotFoundError(f"rename source not found: {source}")
            self.fs.store[dest] = self.fs.store.pop(source)
            self._add_parents(dirs, dest)

    def delete_dir(self, path: str) -> bool:
        """One pass over the keys (fsspec's recursive ``rm`` probes every file it deletes, each a full scan)."""
        path = self.fs._strip_protocol(path).rstrip("/")
        prefix = path + "/"
        with self._rename_lock:
            found = path in self._directories() or path in self.fs.store
            for key in [key for key in self.fs.store if key == path or key.startswith(prefix)]:
                del self.fs.store[key]
            self.fs.pseudo_dirs[:] = [d for d in self.fs.pseudo_dirs if d != path and not d.startswith(prefix)]
            self._dirs = {d for d in self._dirs if d != path and not d.startswith(prefix)}
            self._indexed_keys = len(self.fs.store) + len(self.fs.pseudo_dirs)
        return found

    def delete_file(self, path: str) -> bool:
        with self._rename_lock:
            return self.fs.store.pop(self.fs._strip_protocol(path), None) is not None


@dataclass
class Measurement:
    store: str
    io_threads: int
    files: int
    tasks: int
    latency_s: float
    commit_job_s: float
    prepare_s: float
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def ideal_s(self) -> float:
        return self.total_calls * self.latency_s / self.io_threads

    @property
    def files_per_s(self) -> float:
        return self.files / self.commit_job_s


def _files_of(task_index: int, files_per_task: int) -> Iterator[str]:
    for n in range(files_per_task):
        yield f"dt=2024-01-0{1 + n % PARTITIONS}/part-{task_index:05d}-{n:04d}.csv"


def run_job(
    store: str,
    destination: str,
    *,
    tasks: int,
    files_per_task: int,
    io_threads: int,
    latency: float,
    storage_options: dict[str, Any] | None = None,
    indexed: bool = False,
) -> Measurement:
    """Prepare a job without latency, then time its ``commit_job`` with ``latency`` on every store call."""
    wrappers: list[FaultInjectingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapper = FaultInjectingStore(IndexedMemoryStore(inner.fs) if indexed else inner)
        wrappers.append(wrapper)
        return wrapper

    config = mc.CommitterConfig(io_threads=io_threads)
    committer = mc.ManifestCommitter(
        destination, f"job-{uuid.uuid4().hex[:8]}", 0, config, storage_options, store_wrapper=wrap
    )
    start = time.perf_counter()
    committer.setup_job()
    for index in range(tasks):
        task = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
        for relative in _files_of(index, files_per_task):
            task.fs.pipe_file(f"{task.work_path}/{relative}", b"a,b\n1,2\n")
        committer.commit_task(task)
    prepared = time.perf_counter()
    wrapper = wrappers[0]
    wrapper.calls.clear()
    wrapper.latency = latency
    committed_start = time.perf_counter()
    success = committer.commit_job()
    commit_s = time.perf_counter() - committed_start
    wrapper.latency = 0.0
    files = tasks * files_per_task
    if len(success.filenames) == 0 or not success.success:
        raise RuntimeError(f"{store}: job commit did not succeed")
    return Measurement(store, io_threads, files, tasks, latency, commit_s, prepared - start, dict(wrapper.calls))


def latency_cases(args: argparse.Namespace) -> list[Measurement]:
    results = []
    for threads, run, latency, indexed in itertools.product(
        args.threads, range(args.runs), (args.latency, 0.0) if args.baseline else (args.latency,), args.inner
    ):
        fsspec.filesystem("memory").store.clear()
        fsspec.filesystem("memory").pseudo_dirs[:] = [""]
        measured = run_job(
            "memory-indexed" if indexed else "memory",
            f"memory://bench/out-{threads}-{run}",
            tasks=args.tasks,
            files_per_task=args.files_per_task,
            io_threads=threads,
            latency=latency,
            indexed=indexed,
        )
        results.append(measured)
        print(
            f"{measured.store} latency {latency} io.threads={threads} run {run}: "
            f"commit_job {measured.commit_job_s:.2f} s, "
            f"{measured.total_calls} calls, ideal {measured.ideal_s:.2f} s, "
            f"ratio {measured.commit_job_s / max(measured.ideal_s, 1e-9):.2f}; calls {measured.calls}",
            flush=True,
        )
    return results


def emulator_cases(args: argparse.Namespace) -> list[Measurement]:
    from tests.fixtures.emulators import fresh_root, run_azurite, run_fake_gcs_server

    results = []
    for name, start in (("azurite", run_azurite), ("fake-gcs-server", run_fake_gcs_server)):
        with start() as emulator:
            for run in range(args.runs):
                # A fresh container or bucket per run, deleted after it: the emulators slow down as they fill.
                with fresh_root(emulator, "bench") as root:
                    measured = run_job(
                        name,
                        f"{emulator.protocol}://{root}/out",
                        tasks=args.cloud_tasks,
                        files_per_task=args.files_per_task,
                        io_threads=args.cloud_threads,
                        latency=0.0,
                        storage_options=emulator.storage_options,
                    )
                results.append(measured)
                print(
                    f"{name} io.threads={args.cloud_threads} run {run}: {measured.files} files, commit_job "
                    f"{measured.commit_job_s:.2f} s = {measured.files_per_s:.0f} files/s; "
                    f"{measured.total_calls} calls; prepare {measured.prepare_s:.1f} s",
                    flush=True,
                )
    return results


def machine_info() -> dict[str, str]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"nproc": str(os.cpu_count()), "cpu": model, "python": platform.python_version()}


def print_tables(results: list[Measurement]) -> None:
    groups: dict[tuple[str, int, float], list[Measurement]] = {}
    for result in results:
        groups.setdefault((result.store, result.io_threads, result.latency_s), []).append(result)
    print("\n| store | files | io.threads | store calls | median commit_job (s) | ideal (s) | measured / ideal |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (store, threads, _), runs in groups.items():
        if runs[0].latency_s <= 0:
            continue
        wall = statistics.median(r.commit_job_s for r in runs)
        ideal = statistics.median(r.ideal_s for r in runs)
        print(
            f"| {store} | {runs[0].files:,} | {threads} | {runs[0].total_calls:,} | {wall:.2f} | {ideal:.2f} "
            f"| {wall / ideal:.2f} |"
        )
    print("\n| store | files | io.threads | store calls | median commit_job (s) | files/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for (store, threads, _), runs in groups.items():
        if runs[0].latency_s > 0:
            continue
        wall = statistics.median(r.commit_job_s for r in runs)
        print(
            f"| {store} | {runs[0].files:,} | {threads} | {runs[0].total_calls:,} | {wall:.2f} "
            f"| {runs[0].files / wall:.0f} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=200, help="tasks of the latency case (default 200)")
    parser.add_argument("--files-per-task", type=int, default=50, help="files per task (default 50)")
    parser.add_argument("--latency", type=float, default=0.020, help="seconds per store call (default 0.020)")
    parser.add_argument("--threads", type=int, nargs="+", default=[8, 32, 128], help="io.threads (default 8 32 128)")
    parser.add_argument(
        "--inner",
        type=lambda v: v == "indexed",
        nargs="+",
        default=[False, True],
        metavar="{memory,indexed}",
        help="inner store(s) of the latency case: fsspec memory, or memory with O(1) probes (default both)",
    )
    parser.add_argument("--baseline", action="store_true", help="also time each latency case with latency 0")
    parser.add_argument("--runs", type=int, default=1, help="runs per case (default 1)")
    parser.add_argument("--cloud-tasks", type=int, default=20, help="tasks of the emulator case (default 20)")
    parser.add_argument("--cloud-threads", type=int, default=32, help="io.threads of the emulator case")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency case")
    parser.add_argument("--no-emulators", action="store_true", help="skip Azurite and fake-gcs-server")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    output: dict[str, Any] = {"machine": machine_info(), "date": time.strftime("%Y-%m-%d"), "argv": sys.argv}
    print(json.dumps(output["machine"]))
    results: list[Measurement] = []
    if not args.no_latency:
        results += latency_cases(args)
    if not args.no_emulators:
        results += emulator_cases(args)
    print_tables(results)
    if args.json:
        output["results"] = [dict(asdict(r), ideal_s=r.ideal_s, files_per_s=r.files_per_s) for r in results]
        with open(args.json, "w") as handle:
            json.dump(output, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
