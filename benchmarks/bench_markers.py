"""Marker-creation benchmark: direct markers against the batching marker server, 64 concurrent writers.

Each case starts a fresh job on one store: local disk, Azurite or fake-gcs-server (``--stores``; the emulators
are started as the tests start them, ``tests/fixtures/emulators.py``, a new emulator process and bucket for
each case), so that one run gives the batched / direct ratios of every store. The writers are ``--processes``
worker processes (spawned, as executors would be) of ``--threads`` threads each (64 writers by default); every
writer creates ``--markers`` markers, one after the other, each for a distinct data file, and times every
``create`` call. All writer processes start together (a barrier across processes), after their imports and
their first store connection. ``direct``: each writer writes its own empty marker objects. ``batched``: the
driver (this process) runs the marker server, found by the writers through ``server.json``; the server's flush
interval is the case's. Reported: markers per second (all markers / wall time from the first writer's start to
the last one's end), p50 and p99 of the per-call latency, the store calls made (by writers and server together)
and the 1-minute load average at the case's end; then, per store, batched / direct ratios. Every marker is read
back from the store's files after its case (``read_markers``), or the benchmark fails.

``--other-host`` runs the writers on another (simulated) host: the benchmark creates two network namespaces joined
by a veth pair on TEST-NET-1 (``tests/fixtures/network_namespaces.py``; root and iproute2 needed), moves itself
(the driver: the marker server, and the emulators it starts) into the first, at 192.0.2.1, and its writer
processes into the second, at 192.0.2.2; so every marker of a batched case crosses a network to the server, as on
a cluster, and the direct writers reach the emulators across it too (local disk stays one shared file system).
``--repeat N`` runs the cases of each store N times, alternating direct and batched, and reports the medians.

``--latency-ms 20`` adds a second set of cases where every store call sleeps 20 ms first
(``FaultInjectingStore``), in the writers and in the server alike, to stand for a remote object store; those
cases run on local disk only and use ``--latency-markers`` markers per writer, since a direct writer then needs
20 ms per marker. ``--emulator-markers`` sets the markers per writer on the emulators (default ``--markers``).

Run ``python benchmarks/bench_markers.py --help`` for the options; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from multiprocessing.managers import SyncManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

from manifest_committer.config import MarkerType
from manifest_committer.markers import MarkerClient, MarkerPaths, MarkerServer, read_markers
from manifest_committer.markers.address import LOOPBACK
from manifest_committer.paths import JobPaths
from manifest_committer.retry import RetryPolicy
from manifest_committer.store import FaultInjectingStore, OpenedStore, StoreOperations, open_store

if TYPE_CHECKING:
    from tests.fixtures.emulators import Emulator

LOCAL = "local disk"
EMULATORS = ("azurite", "fake-gcs-server")
START_TIMEOUT = 300.0
"""Seconds the writer processes wait for each other at the start (imports and a store connection each)."""


class StartBarrier(Protocol):
    """What the writer processes share to start at once (a manager's ``Barrier`` proxy)."""

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass(frozen=True)
class Target:
    """A store the cases run on: where a fresh destination comes from, and how to reach it from any process."""

    name: str
    root: str = ""
    emulator: Emulator | None = None
    delete_after: bool = True
    """Delete each case's container or bucket afterwards; off when the emulator itself stops after the case."""

    @property
    def storage_options(self) -> dict[str, Any]:
        return dict(self.emulator.storage_options) if self.emulator is not None else {}

    @contextlib.contextmanager
    def fresh_destination(self) -> Iterator[str]:
        """A destination no case used before, deleted afterwards (unless ``delete_after`` is off)."""
        if self.emulator is None:
            directory = tempfile.mkdtemp(prefix="markers-", dir=self.root)
            try:
                yield directory + "/out"
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            return
        from tests.fixtures.emulators import fresh_root, unique_name

        if self.delete_after:
            with fresh_root(self.emulator, "markers") as bucket:
                yield f"{self.emulator.protocol}://{bucket}/out"
            return
        bucket = unique_name("markers")
        self.emulator.filesystem().mkdir(bucket)
        yield f"{self.emulator.protocol}://{bucket}/out"


@dataclass(frozen=True)
class Case:
    """One measured configuration."""

    store: str
    marker_type: str
    interval_ms: int
    latency: float
    markers_per_writer: int

    @property
    def kind(self) -> str:
        return "direct" if self.marker_type == "direct" else f"batched {self.interval_ms} ms"

    @property
    def label(self) -> str:
        latency = f", {self.latency * 1000:g} ms per store call" if self.latency > 0 else ""
        return f"{self.kind}, {self.store}{latency}"


@dataclass
class Result:
    case: str
    store: str
    kind: str
    latency_ms: float
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
    load_average: float
    calls: dict[str, int] = field(default_factory=dict)


def _store(destination: str, latency: float, storage_options: dict[str, Any]) -> OpenedStore[FaultInjectingStore]:
    opened = open_store(destination, storage_options)
    return OpenedStore(FaultInjectingStore(opened.store, latency=latency), opened.path)


def _retry(store: StoreOperations) -> RetryPolicy:
    return RetryPolicy(attempts=5, initial_wait=0.05, is_retryable=store.is_transient)


def _writer_process(
    *,
    destination: str,
    storage_options: dict[str, Any],
    job_id: str,
    marker_type: str,
    latency: float,
    process: int,
    threads: int,
    markers: int,
    everyone: StartBarrier,
) -> tuple[list[float], dict[str, int], int, float, float]:
    """Run ``threads`` writers in this process; returns latencies, store calls, fallbacks, first start, last end."""
    opened = _store(destination, latency, storage_options)
    store, path = opened.store, opened.path
    store.inner.info(path)  # connect (and, on a cloud store, build the client) before the clock starts
    paths = MarkerPaths(JobPaths(path, job_id, 0))
    client = MarkerClient(store, paths, _retry(store), marker_type=MarkerType(marker_type))
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
    everyone.wait(START_TIMEOUT)  # every writer process is ready: one pool task per process, all at once
    start_gate.wait()
    started = time.time()
    for worker in workers:
        worker.join()
    ended = time.time()
    return [value for own in latencies for value in own], dict(store.calls), client.fallbacks, started, ended


def run_case(
    case: Case,
    target: Target,
    *,
    processes: int,
    threads: int,
    pool: ProcessPoolExecutor,
    manager: SyncManager,
    server_host: str = LOOPBACK,
) -> Result:
    """Run one case in a fresh destination of ``target``; the pool has exactly ``processes`` worker processes."""
    with target.fresh_destination() as destination:
        return _measure(
            case,
            destination,
            target.storage_options,
            processes=processes,
            threads=threads,
            pool=pool,
            manager=manager,
            server_host=server_host,
        )


def _measure(
    case: Case,
    destination: str,
    storage_options: dict[str, Any],
    *,
    processes: int,
    threads: int,
    pool: ProcessPoolExecutor,
    manager: SyncManager,
    server_host: str = LOOPBACK,
) -> Result:
    job_id = "bench_markers"
    opened = _store(destination, case.latency, storage_options)
    store, path = opened.store, opened.path
    paths = MarkerPaths(JobPaths(path, job_id, 0))
    server = None
    if case.marker_type == "batched":
        server = MarkerServer(store, paths, _retry(store), batch_interval_ms=case.interval_ms, host=server_host).start()
    everyone = manager.Barrier(processes)
    try:
        futures = [
            pool.submit(
                _writer_process,
                destination=destination,
                storage_options=storage_options,
                job_id=job_id,
                marker_type=case.marker_type,
                latency=case.latency,
                process=process,
                threads=threads,
                markers=case.markers_per_writer,
                everyone=everyone,
            )
            for process in range(processes)
        ]
        outcomes = [future.result() for future in futures]
    finally:
        if server is not None:
            server.stop()
    load_average = os.getloadavg()[0]
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
    return Result(
        case=case.label,
        store=case.store,
        kind=case.kind,
        latency_ms=case.latency * 1000,
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
        load_average=round(load_average, 2),
        calls=dict(calls),
    )


@contextlib.contextmanager
def open_target(name: str, root: str, host: str = LOOPBACK) -> Iterator[Target]:
    """The store ``name`` (``local``, ``azurite`` or ``fake-gcs-server``), started for one case.

    Every case gets a new emulator process: both slow down as they fill (Azurite even after the container is
    deleted; BENCHMARKS.md, emulator commits), and deleting 64,000 markers blob by blob took Azurite minutes
    here, so a case's objects go with its server instead.
    """
    if name == "local":
        yield Target(LOCAL, root=root)
        return
    from tests.fixtures.emulators import run_azurite, run_fake_gcs_server

    start = {"azurite": run_azurite, "fake-gcs-server": run_fake_gcs_server}[name]
    with start(host) as emulator:
        yield Target(name, emulator=emulator, delete_after=False)


def cases_for(store: str, options: argparse.Namespace) -> list[Case]:
    """Direct first, then batched at each interval; on local disk also the cases with injected latency."""
    intervals = [int(text) for text in options.intervals.split(",") if text]
    markers = options.markers if store == LOCAL else options.emulator_markers or options.markers
    cases = [Case(store, "direct", 0, 0.0, markers)]
    cases += [Case(store, "batched", interval, 0.0, markers) for interval in intervals]
    if store == LOCAL and options.latency_ms > 0:
        latency = options.latency_ms / 1000.0
        cases.append(Case(store, "direct", 0, latency, options.latency_markers))
        cases += [Case(store, "batched", interval, latency, options.latency_markers) for interval in intervals]
    return cases


def ratios(results: list[Result]) -> list[dict[str, Any]]:
    """Each batched case against the direct case of the same store and latency, from the same run."""
    direct = {(result.store, result.latency_ms): result for result in results if result.kind == "direct"}
    rows = []
    for result in results:
        base = direct.get((result.store, result.latency_ms))
        if result.kind == "direct" or base is None:
            continue
        rows.append(
            {
                "case": result.case,
                "throughput": round(result.markers_per_second / base.markers_per_second, 3),
                "p50": round(result.p50_ms / base.p50_ms, 2),
                "p99": round(result.p99_ms / base.p99_ms, 2),
                "store_calls_per_marker": round(
                    (result.store_calls / result.markers) / (base.store_calls / base.markers), 3
                ),
            }
        )
    return rows


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def medians(results: list[Result]) -> list[Result]:
    """One result per case: the median of its runs (each figure's own median), in the order cases first ran."""
    runs: dict[str, list[Result]] = {}
    for result in results:
        runs.setdefault(result.case, []).append(result)
    combined = []
    for case, group in runs.items():
        first = group[0]
        combined.append(
            Result(
                case=case + (f" (median of {len(group)})" if len(group) > 1 else ""),
                store=first.store,
                kind=first.kind,
                latency_ms=first.latency_ms,
                writers=first.writers,
                markers=first.markers,
                seconds=round(median([r.seconds for r in group]), 3),
                markers_per_second=round(median([r.markers_per_second for r in group])),
                p50_ms=round(median([r.p50_ms for r in group]), 2),
                p99_ms=round(median([r.p99_ms for r in group]), 2),
                store_calls=round(median([r.store_calls for r in group])),
                server_flushes=round(median([r.server_flushes for r in group])),
                fallbacks=max(r.fallbacks for r in group),
                read_back=min(r.read_back for r in group),
                load_average=round(median([r.load_average for r in group]), 2),
            )
        )
    return combined


def print_tables(results: list[Result]) -> None:
    print()
    print(
        "| case | writers x markers | wall (s) | markers/s | p50 (ms) | p99 (ms) | store calls | flushes | "
        "fallbacks | load |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for result in results:
        print(
            f"| {result.case} | {result.writers} x {result.markers // result.writers:,} | {result.seconds:.2f} | "
            f"{result.markers_per_second:,} | {result.p50_ms} | {result.p99_ms} | {result.store_calls:,} | "
            f"{result.server_flushes:,} | {result.fallbacks} | {result.load_average} |"
        )
    print()
    print("| batched / direct | throughput | p50 latency | p99 latency | store calls per marker |")
    print("|---|---:|---:|---:|---:|")
    for row in ratios(results):
        print(
            f"| {row['case']} | {row['throughput']} | {row['p50']} | {row['p99']} | {row['store_calls_per_marker']} |"
        )


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--processes", type=int, default=4, help="writer processes (default 4)")
    parser.add_argument("--threads", type=int, default=16, help="writer threads per process (default 16)")
    parser.add_argument("--markers", type=int, default=1000, help="markers per writer (default 1000)")
    parser.add_argument("--intervals", default="50,10", help="batch intervals in ms, comma-separated (default 50,10)")
    parser.add_argument(
        "--stores",
        default="local,azurite,fake-gcs-server",
        help="stores, comma-separated: local, azurite, fake-gcs-server (default all three)",
    )
    parser.add_argument("--emulator-markers", type=int, default=0, help="markers per writer on the emulators")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="also run with this latency per store call")
    parser.add_argument("--latency-markers", type=int, default=100, help="markers per writer with latency (100)")
    parser.add_argument("--root", default=tempfile.gettempdir(), help="directory for the jobs (local disk)")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument(
        "--other-host",
        action="store_true",
        help="writers on another simulated host (network namespaces on TEST-NET-1; needs root and iproute2)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each store's cases, alternating (medians)")
    parser.add_argument("--writers-namespace", help=argparse.SUPPRESS)  # set by --other-host for its run
    parser.add_argument("--server-host", default=LOOPBACK, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    options.stores = [text for text in options.stores.split(",") if text]
    unknown = sorted(set(options.stores) - {"local", *EMULATORS})
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}; known: local, {', '.join(EMULATORS)}")
    return options


def report(results: list[Result], json_path: str | None, *, argv: list[str], when: str) -> None:
    """Print the tables (of the medians, when cases ran more than once); with ``json_path`` also write every
    result (with its calls by name) and the ratios."""
    summary = medians(results)
    print_tables(summary)
    if json_path:
        document = {
            "date": when,
            "host": platform.node(),
            "argv": argv,
            "results": [asdict(result) for result in results],
            "medians": [asdict(result) for result in summary],
            "ratios": ratios(summary),
        }
        with open(json_path, "w") as handle:
            json.dump(document, handle, indent=2)


def main(argv: list[str] | None = None) -> None:
    options = parse_options(argv)
    arguments = sys.argv[1:] if argv is None else list(argv)
    if options.other_host:
        _run_on_simulated_hosts(arguments)
        return
    when = time.strftime("%Y-%m-%d %H:%M")
    print(f"# {when} on {platform.node()}: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if options.writers_namespace:
        print(f"# writers on another host ({options.writers_namespace}), the marker server at {options.server_host}")
    results = _run_all(options, options.server_host, options.writers_namespace)
    report(results, options.json, argv=arguments, when=when)


def _run_on_simulated_hosts(arguments: list[str]) -> None:
    """``--other-host``: create the hosts, then run this benchmark again inside the driver's namespace (so that
    nothing of this process, which may be a test's, moves), its writers moved into the worker's."""
    from tests.fixtures.network_namespaces import create_hosts

    rest = [argument for argument in arguments if argument != "--other-host"]
    with create_hosts() as hosts:
        assert hosts.driver.address is not None
        command = [sys.executable, str(Path(__file__).resolve()), *rest]
        command += ["--writers-namespace", hosts.worker.namespace, "--server-host", hosts.driver.address]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        subprocess.run(hosts.driver.command(command), check=True, env=environment)


def _enter_writer_host(namespace: str | None) -> None:
    """The pool's initializer: a writer process moves to the writers' host before it does anything else."""
    if namespace is not None:
        from tests.fixtures.network_namespaces import enter_network_namespace

        enter_network_namespace(namespace)


def _run_all(options: argparse.Namespace, host: str, worker_namespace: str | None) -> list[Result]:
    results = []
    context = get_context("spawn")
    with (
        ProcessPoolExecutor(
            options.processes, mp_context=context, initializer=_enter_writer_host, initargs=(worker_namespace,)
        ) as pool,
        context.Manager() as manager,
    ):
        # Warm the worker processes (imports) so that the first case does not pay for them.
        list(pool.map(time.sleep, [0.1] * options.processes))
        for name in options.stores:
            for _ in range(options.repeat):
                for case in cases_for(LOCAL if name == "local" else name, options):
                    with open_target(name, options.root, host) as target:
                        result = run_case(
                            case,
                            target,
                            processes=options.processes,
                            threads=options.threads,
                            pool=pool,
                            manager=manager,
                            server_host=host,
                        )
                    results.append(result)
                    print(json.dumps({key: value for key, value in asdict(result).items() if key != "calls"}))
                    sys.stdout.flush()
    return results


if __name__ == "__main__":
    main()
