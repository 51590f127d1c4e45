"""Job commit under store latency, and against the Azure and GCS emulators.

Latency part: a job of ``TASKS x FILES`` small files on the ``memory://`` store, wrapped in a
``FaultInjectingStore``. The job is prepared (setup, tasks written and committed) with the wrapper's latency at 0;
then its call counters are cleared, its latency set (20 ms by default) and only ``commit_job`` is timed. The ideal
is ``calls x latency / io.threads``: every store call the commit made, sleeping in parallel on every thread with
no other cost. The report gives measured / ideal.

Emulator part: the same kind of job (fewer files) against Azurite and fake-gcs-server, started as the test
fixtures start them (``tests/fixtures/emulators.py``), each job in a fresh container or bucket; files per second
of ``commit_job``.

``--protocol`` runs several of this project's protocols (``mc.create_committer``: manifest, v1, v2,
transactional) side by side on the same jobs, the order rotating per run. v2 and transactional move work into
the tasks, so the task side is timed too: every task (setup, writes through ``task.fs``, ``commit_task``) runs
``--task-threads`` at a time, and with ``--task-latency`` the injected latency applies to the tasks' store calls
as well (commit-task listings, saves and renames, write markers). The data writes themselves go to the inner
filesystem, not through the wrapper, and so cost no injected latency in any protocol: every protocol writes each
file once, so they would add the same to all.

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
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fsspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

import manifest_committer as mc
from benchmarks.indexed_memory_store import ConcurrentIndexedMemoryStore, IndexedMemoryStore
from manifest_committer.statistic_names import COMMITTER_FILES_COMMITTED
from manifest_committer.store import NO_HINTS, FaultInjectingStore, RenameHint, StoreOperations

PARTITIONS = 5
PROTOCOLS = ("manifest", "v1", "v2", "transactional")


class PeakCountingStore(FaultInjectingStore):
    """Counts the store calls in flight at once (a batch counts each of its calls), to show that
    ``io.threads`` still bounds them when one thread puts several in flight."""

    def __init__(self, inner: StoreOperations) -> None:
        super().__init__(inner)
        self.peak = 0
        self._in_flight = 0
        self._counting = threading.Lock()

    def _enter(self, calls: int) -> None:
        with self._counting:
            self._in_flight += calls
            self.peak = max(self.peak, self._in_flight)

    def _leave(self, calls: int) -> None:
        with self._counting:
            self._in_flight -= calls

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        self._enter(1)
        try:
            return super().around(operation, path, call)
        finally:
            self._leave(1)

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        if not self.capabilities.concurrent_calls:
            return super().rename_files(pairs, hints)  # one by one, through ``around``
        self._enter(len(pairs))
        try:
            return super().rename_files(pairs, hints)
        finally:
            self._leave(len(pairs))


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
    protocol: str = "manifest"
    tasks_s: float = 0.0
    """Wall time of all tasks (setup, writes, ``commit_task``), ``task_threads`` at a time."""
    commit_task_s: float = 0.0
    """Summed duration of the ``commit_task`` calls."""
    task_threads: int = 1
    task_latency_s: float = 0.0
    task_calls: dict[str, int] = field(default_factory=dict)
    """Store calls of the task side (through the wrapper: not the data writes)."""
    commit_cpu_s: float = 0.0
    """CPU time of the process (every thread, user and system) during ``commit_job``: over the store calls, the
    CPU a call costs, which bounds the calls per second on the machine's cores whatever the thread count."""
    concurrent_calls: bool = False
    """The store took each unit's renames in flight together (Azure, GCS; ``--calls concurrent``)."""
    peak_in_flight: int = 0
    """The most store calls in flight at once during ``commit_job``."""

    @property
    def total_task_calls(self) -> int:
        return sum(self.task_calls.values())

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
    protocol: str = "manifest",
    task_threads: int = 1,
    task_latency: float = 0.0,
    concurrent_calls: bool = False,
) -> Measurement:
    """Run a job's tasks with ``task_latency`` on every store call, then time its ``commit_job`` with ``latency``."""
    wrappers: list[PeakCountingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        if concurrent_calls:
            inner = ConcurrentIndexedMemoryStore(inner.fs)
        elif indexed:
            inner = IndexedMemoryStore(inner.fs)
        wrapper = PeakCountingStore(inner)
        wrappers.append(wrapper)
        return wrapper

    config = mc.CommitterConfig(io_threads=io_threads)
    committer = mc.create_committer(
        destination,
        f"job-{uuid.uuid4().hex[:8]}",
        protocol,
        config=config,
        storage_options=storage_options,
        store_wrapper=wrap,
    )
    wrapper = wrappers[0]
    commit_task_s: list[float] = []

    def task(index: int) -> None:
        attempt = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
        for relative in _files_of(index, files_per_task):
            attempt.fs.pipe_file(f"{attempt.work_path}/{relative}", b"a,b\n1,2\n")
        started = time.perf_counter()
        committer.commit_task(attempt)
        commit_task_s.append(time.perf_counter() - started)

    try:
        start = time.perf_counter()
        committer.setup_job()
        wrapper.calls.clear()
        wrapper.latency = task_latency
        with ThreadPoolExecutor(task_threads) as pool:
            list(pool.map(task, range(tasks)))
        prepared = time.perf_counter()
        task_calls = dict(wrapper.calls)
        wrapper.calls.clear()
        wrapper.latency = latency
        wrapper.peak = 0
        committed_start, cpu_start = time.perf_counter(), time.process_time()
        success = committer.commit_job()
        commit_s = time.perf_counter() - committed_start
        commit_cpu_s = time.process_time() - cpu_start
        wrapper.latency = 0.0
    finally:
        committer.close()
    files = tasks * files_per_task
    if len(success.filenames) == 0 or not success.success:
        raise RuntimeError(f"{store}: job commit did not succeed")
    committed = success.iostatistics.counters.get(COMMITTER_FILES_COMMITTED, 0)
    if committed != files:  # a store that lost a task's file would make every figure here wrong
        raise RuntimeError(f"{store}: the job commit committed {committed} files of the {files} the tasks wrote")
    return Measurement(
        store,
        io_threads,
        files,
        tasks,
        latency,
        commit_s,
        prepared - start,
        dict(wrapper.calls),
        protocol=protocol,
        tasks_s=prepared - start,
        commit_task_s=sum(commit_task_s),
        task_threads=task_threads,
        task_latency_s=task_latency,
        task_calls=task_calls,
        commit_cpu_s=commit_cpu_s,
        concurrent_calls=wrapper.capabilities.concurrent_calls,
        peak_in_flight=wrapper.peak,
    )


def _rotated(protocols: list[str], run: int) -> list[str]:
    """The protocols in the order of ``run``: rotated each run so drift in load falls on all of them."""
    shift = run % len(protocols)
    return protocols[shift:] + protocols[:shift]


def _describe(measured: Measurement) -> str:
    return (
        f"{measured.protocol}: commit_job {measured.commit_job_s:.2f} s, {measured.total_calls} calls; "
        f"tasks {measured.tasks_s:.2f} s ({measured.task_threads} threads, {measured.total_task_calls} calls, "
        f"commit_task sum {measured.commit_task_s:.2f} s); CPU {measured.commit_cpu_s:.2f} s, "
        f"{measured.commit_cpu_s / max(1, measured.total_calls) * 1e6:.0f} us a store call; "
        f"calls {'concurrent' if measured.concurrent_calls else 'one by one'}, peak in flight {measured.peak_in_flight}"
    )


def latency_cases(args: argparse.Namespace) -> list[Measurement]:
    results = []
    for threads, run, latency, indexed, concurrent in itertools.product(
        args.threads,
        range(args.runs),
        (args.latency, 0.0) if args.baseline else (args.latency,),
        args.inner,
        args.calls,
    ):
        if concurrent and not indexed:
            continue  # the concurrent store is the indexed one
        for protocol in _rotated(args.protocol, run):
            fsspec.filesystem("memory").store.clear()
            fsspec.filesystem("memory").pseudo_dirs[:] = [""]
            measured = run_job(
                ("memory-concurrent" if concurrent else "memory-indexed") if indexed else "memory",
                f"memory://bench/out-{threads}-{run}",
                tasks=args.tasks,
                files_per_task=args.files_per_task,
                io_threads=threads,
                latency=latency,
                indexed=indexed,
                protocol=protocol,
                task_threads=args.task_threads,
                task_latency=latency if args.task_latency else 0.0,
                concurrent_calls=concurrent,
            )
            results.append(measured)
            print(
                f"{measured.store} latency {latency} io.threads={threads} run {run} {_describe(measured)}; "
                f"ideal {measured.ideal_s:.2f} s, ratio {measured.commit_job_s / max(measured.ideal_s, 1e-9):.2f}; "
                f"calls {measured.calls}",
                flush=True,
            )
    return results


def emulator_cases(args: argparse.Namespace) -> list[Measurement]:
    from tests.fixtures.emulators import fresh_root, run_azurite, run_fake_gcs_server

    results = []
    for name, start in (("azurite", run_azurite), ("fake-gcs-server", run_fake_gcs_server)):
        with start() as emulator:
            for run in range(args.runs):
                for protocol in _rotated(args.protocol, run):
                    # A fresh container or bucket per job, deleted after it: the emulators slow down as they fill.
                    with fresh_root(emulator, "bench") as root:
                        measured = run_job(
                            name,
                            f"{emulator.protocol}://{root}/out",
                            tasks=args.cloud_tasks,
                            files_per_task=args.files_per_task,
                            io_threads=args.cloud_threads,
                            latency=0.0,
                            storage_options=emulator.storage_options,
                            protocol=protocol,
                            task_threads=args.task_threads,
                        )
                    results.append(measured)
                    print(
                        f"{name} io.threads={args.cloud_threads} run {run} {measured.files} files "
                        f"{_describe(measured)}; {measured.files_per_s:.0f} files/s",
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
    groups: dict[tuple[str, str, int, float], list[Measurement]] = {}
    for result in results:
        groups.setdefault((result.store, result.protocol, result.io_threads, result.latency_s), []).append(result)
    print(
        "\n| store | protocol | files | io.threads | store calls | median commit_job (s) | ideal (s) "
        "| measured / ideal | CPU (s) | CPU a store call (us) | peak calls in flight |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (store, protocol, threads, _), runs in groups.items():
        if runs[0].latency_s <= 0:
            continue
        wall = statistics.median(r.commit_job_s for r in runs)
        ideal = statistics.median(r.ideal_s for r in runs)
        cpu = statistics.median(r.commit_cpu_s for r in runs)
        print(
            f"| {store} | {protocol} | {runs[0].files:,} | {threads} | {runs[0].total_calls:,} | {wall:.2f} "
            f"| {ideal:.2f} | {wall / ideal:.2f} | {cpu:.2f} | {cpu / runs[0].total_calls * 1e6:.0f} "
            f"| {max(r.peak_in_flight for r in runs)} |"
        )
    print("\n| store | protocol | files | io.threads | store calls | median commit_job (s) | files/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (store, protocol, threads, _), runs in groups.items():
        if runs[0].latency_s > 0:
            continue
        wall = statistics.median(r.commit_job_s for r in runs)
        print(
            f"| {store} | {protocol} | {runs[0].files:,} | {threads} | {runs[0].total_calls:,} | {wall:.2f} "
            f"| {runs[0].files / wall:.0f} |"
        )
    print_protocol_table(groups)


def print_protocol_table(groups: dict[tuple[str, str, int, float], list[Measurement]]) -> None:
    """Every protocol beside the manifest protocol of the same store, threads and latency: medians and ratios."""
    if len({protocol for _, protocol, _, _ in groups}) < 2:  # a comparison needs two
        return
    print(
        "\n| store | latency (ms) | protocol | median commit_job (s) | job store calls | median tasks wall (s) "
        "| task store calls | median sum of commit_task (s) | commit_job / manifest | tasks / manifest |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for (store, protocol, threads, latency), runs in groups.items():
        wall = statistics.median(r.commit_job_s for r in runs)
        tasks = statistics.median(r.tasks_s for r in runs)
        commit_task = statistics.median(r.commit_task_s for r in runs)
        base = groups.get((store, "manifest", threads, latency))
        ratios = "| |"
        if base is not None:
            base_wall = statistics.median(r.commit_job_s for r in base)
            base_tasks = statistics.median(r.tasks_s for r in base)
            ratios = f"| {wall / base_wall:.2f} | {tasks / base_tasks:.2f} |"
        print(
            f"| {store} | {latency * 1000:g} | {protocol} | {wall:.2f} | {runs[0].total_calls:,} | {tasks:.2f} "
            f"| {runs[0].total_task_calls:,} | {commit_task:.2f} {ratios}"
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
    parser.add_argument(
        "--calls",
        type=lambda v: v == "concurrent",
        nargs="+",
        default=[False],
        metavar="{one-by-one,concurrent}",
        help="indexed store's renames one by one, or a unit's in flight together as an async client's (default "
        "one-by-one)",
    )
    parser.add_argument("--baseline", action="store_true", help="also time each latency case with latency 0")
    parser.add_argument("--runs", type=int, default=1, help="runs per case (default 1)")
    parser.add_argument("--cloud-tasks", type=int, default=20, help="tasks of the emulator case (default 20)")
    parser.add_argument("--cloud-threads", type=int, default=32, help="io.threads of the emulator case")
    parser.add_argument(
        "--protocol",
        nargs="+",
        choices=PROTOCOLS,
        default=["manifest"],
        help="this project's protocols to run side by side (default manifest)",
    )
    parser.add_argument("--task-threads", type=int, default=1, help="tasks run at once (default 1)")
    parser.add_argument(
        "--task-latency", action="store_true", help="inject the latency into the tasks' store calls too"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency case")
    parser.add_argument("--no-emulators", action="store_true", help="skip Azurite and fake-gcs-server")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    args.protocol = list(dict.fromkeys(args.protocol))

    output: dict[str, Any] = {"machine": machine_info(), "date": time.strftime("%Y-%m-%d"), "argv": sys.argv}
    print(json.dumps(output["machine"]))
    results: list[Measurement] = []
    if not args.no_latency:
        results += latency_cases(args)
    if not args.no_emulators:
        results += emulator_cases(args)
    print_tables(results)
    if args.json:
        output["results"] = [
            dict(asdict(r), ideal_s=r.ideal_s, files_per_s=r.files_per_s, total_task_calls=r.total_task_calls)
            for r in results
        ]
        with open(args.json, "w") as handle:
            json.dump(output, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
