"""Marker-creation benchmark: direct markers against the batching marker server, 64 concurrent writers.

Each case starts a fresh job on local disk. The writers are ``--processes`` worker processes (spawned, as
executors would be) of ``--threads`` threads each (64 writers by default); every writer creates
``--markers`` markers, one after the other, each for a distinct data file, and times every ``create`` call.
``direct``: each writer writes its own empty marker objects. ``batched``: the driver (this process) runs the
marker server, found by the writers through ``server.json``; the server's flush interval is the case's.
Reported: markers per second (all markers / wall time from the first writer's start to the last one's end),
p50 and p99 of the per-call latency, and the store calls made (by writers and server together).

``--latency-ms 20`` adds a second set of cases where every store call sleeps 20 ms first
(``FaultInjectingStore``), in the writers and in the server alike, to stand for an object store; those cases
use ``--latency-markers`` markers per writer, since a direct writer then needs 20 ms per marker.

Run ``python benchmarks/bench_markers.py --help`` for the options; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context

from manifest_committer.markers import MarkerClient, MarkerPaths, MarkerServer, read_markers
from manifest_committer.paths import JobPaths
from manifest_committer.retry import RetryPolicy
from manifest_committer.store import FaultInjectingStore, StoreOperations, open_store


@dataclass(frozen=True)
class Case:
    """One measured configuration."""

    marker_type: str
    interval_ms: int
    latency: float
    markers_per_writer: int

    @property
    def label(self) -> str:
        kind = "direct" if self.marker_type == "direct" else f"batched {self.interval_ms} ms"
        return f"{kind}, {self.latency * 1000:g} ms per store call"


@dataclass
class Result:
    case: str
    writers: int
    markers: int
    seconds: float
    markers_per_second: float
    p50_ms: float
    p99_ms: float
    store_calls: int
    server_flushes: int
    fallbacks: int
    read_back: int


def _store(destination: str, latency: float) -> tuple[FaultInjectingStore, str]:
    inner, path = open_store(destination)
    return FaultInjectingStore(inner, latency=latency), path


def _retry(store: StoreOperations) -> RetryPolicy:
    return RetryPolicy(attempts=5, initial_wait=0.05, is_retryable=store.is_transient)


def _writer_process(
    *, destination: str, job_id: str, marker_type: str, latency: float, process: int, threads: int, markers: int
) -> tuple[list[float], dict[str, int], int, float, float]:
    """Run ``threads`` writers in this process; returns latencies, store calls, fallbacks, first start, last end."""
    store, path = _store(destination, latency)
    paths = MarkerPaths(JobPaths(path, job_id, 0))
    client = MarkerClient(store, paths, _retry(store), marker_type="direct" if marker_type == "direct" else "batched")
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start_gate = threading.Barrier(threads + 1)

    def write(thread: int) -> None:
        own = latencies[thread]
        start_gate.wait()
        for number in range(markers):
            begin = time.perf_counter()
            client.create(f"dt={number % 10}/part-{process:03d}-{thread:03d}-{number:05d}.parquet")
            own.append(time.perf_counter() - begin)
        client.close()

    workers = [threading.Thread(target=write, args=(thread,)) for thread in range(threads)]
    for worker in workers:
        worker.start()
    start_gate.wait()
    started = time.time()
    for worker in workers:
        worker.join()
    ended = time.time()
    return [value for own in latencies for value in own], dict(store.calls), client.fallbacks, started, ended


def run_case(case: Case, root: str, processes: int, threads: int, pool: ProcessPoolExecutor) -> Result:
    destination = tempfile.mkdtemp(prefix="markers-", dir=root) + "/out"
    job_id = "bench_markers"
    store, path = _store(destination, case.latency)
    paths = MarkerPaths(JobPaths(path, job_id, 0))
    server = None
    if case.marker_type == "batched":
        server = MarkerServer(store, paths, _retry(store), batch_interval_ms=case.interval_ms).start()
    try:
        futures = [
            pool.submit(
                _writer_process,
                destination=destination,
                job_id=job_id,
                marker_type=case.marker_type,
                latency=case.latency,
                process=process,
                threads=threads,
                markers=case.markers_per_writer,
            )
            for process in range(processes)
        ]
        outcomes = [future.result() for future in futures]
    finally:
        if server is not None:
            server.stop()
    latencies = sorted(value for outcome in outcomes for value in outcome[0])
    calls: Counter[str] = Counter(store.calls)
    for outcome in outcomes:
        calls.update(outcome[1])
    seconds = max(outcome[4] for outcome in outcomes) - min(outcome[3] for outcome in outcomes)
    store.latency = 0.0
    found = read_markers(store, paths, _retry(store))
    total = len(latencies)
    expected = processes * threads * case.markers_per_writer
    if len(found.markers) != expected:
        raise SystemExit(f"{case.label}: read back {len(found.markers)} markers, expected {expected}")
    shutil.rmtree(os.path.dirname(destination), ignore_errors=True)
    return Result(
        case=case.label,
        writers=processes * threads,
        markers=total,
        seconds=round(seconds, 3),
        markers_per_second=round(total / seconds),
        p50_ms=round(latencies[total // 2] * 1000, 2),
        p99_ms=round(latencies[min(total - 1, int(total * 0.99))] * 1000, 2),
        store_calls=sum(calls.values()),
        server_flushes=server.flushes if server is not None else 0,
        fallbacks=sum(outcome[2] for outcome in outcomes),
        read_back=len(found.markers),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4, help="writer processes (default 4)")
    parser.add_argument("--threads", type=int, default=16, help="writer threads per process (default 16)")
    parser.add_argument("--markers", type=int, default=1000, help="markers per writer (default 1000)")
    parser.add_argument("--intervals", default="50,10", help="batch intervals in ms, comma-separated (default 50,10)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="also run with this latency per store call")
    parser.add_argument("--latency-markers", type=int, default=100, help="markers per writer with latency (100)")
    parser.add_argument("--root", default=tempfile.gettempdir(), help="directory for the jobs (local disk)")
    parser.add_argument("--json", help="write the results here too")
    options = parser.parse_args()

    intervals = [int(text) for text in options.intervals.split(",") if text]
    cases = [Case("direct", 0, 0.0, options.markers)]
    cases += [Case("batched", interval, 0.0, options.markers) for interval in intervals]
    if options.latency_ms > 0:
        latency = options.latency_ms / 1000.0
        cases.append(Case("direct", 0, latency, options.latency_markers))
        cases += [Case("batched", interval, latency, options.latency_markers) for interval in intervals]

    when = time.strftime("%Y-%m-%d %H:%M")
    print(f"# {when} on {platform.node()}: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    results = []
    with ProcessPoolExecutor(options.processes, mp_context=get_context("spawn")) as pool:
        # Warm the worker processes (imports) so that the first case does not pay for them.
        list(pool.map(time.sleep, [0.1] * options.processes))
        for case in cases:
            result = run_case(case, options.root, options.processes, options.threads, pool)
            results.append(result)
            print(json.dumps(asdict(result)), flush=True)

    print()
    print(
        "| case | writers x markers | wall (s) | markers/s | p50 (ms) | p99 (ms) | store calls | flushes | fallbacks |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result.case} | {result.writers} x {result.markers // result.writers:,} | {result.seconds:.2f} | "
            f"{result.markers_per_second:,} | {result.p50_ms} | {result.p99_ms} | {result.store_calls:,} | "
            f"{result.server_flushes:,} | {result.fallbacks} |"
        )
    if options.json:
        with open(options.json, "w") as handle:
            json.dump([asdict(result) for result in results], handle, indent=2)


if __name__ == "__main__":
    main()
