"""Client CPU and store requests per committed file of a job commit: a git ref's code beside the working tree.

For each store, a job of ``--files`` small files (``--tasks`` tasks, five partitions) is prepared and committed
by a child process that imports ``manifest_committer`` from one side: the code of ``--ref`` (exported with
``git archive`` into a temporary directory) or the working tree. The child uses only the public API
(``create_committer``, ``setup_job``, ``setup_task``, ``commit_task``, ``commit_job``; ``store_wrapper`` and
``FaultInjectingStore`` for the memory case), so it runs against the code of any ref since ``create_committer``.

- **Client CPU a committed file**: the child's CPU time (every thread, user and system) from the return of the
  ``create_committer`` of a fresh committer (as a job driver builds one) to the end of its ``commit_job``,
  divided by the files committed.
- **Requests a committed file**: the HTTP requests the store received in that window, counted by a small
  forwarding proxy (its own process) between the child and the emulator, whatever client library sends them.

Stores: Azurite + adlfs (``manifest``), fake-gcs-server + gcsfs (``manifest``), moto + s3fs (``upload``): the
emulators of ``tests/fixtures/emulators.py``, each job in a fresh container or bucket. The memory case:
``memory://`` with O(1) probes (``indexed_memory_store``) wrapped in ``FaultInjectingStore`` with ``--latency``
a call during ``commit_job`` only, at each of ``--memory-files`` and ``--in-flight`` (``io.threads``); it reports
wall time against the protocol's critical path: the calls that must follow one another (``PROTOCOL_CHAIN``, 15 for
this job) x latency, plus every other call x latency / calls in flight.

Sides alternate (the order rotates per run); medians of ``--runs``. ``python benchmarks/bench_store_cpu.py
--help`` for the options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_REF = "8dca19f"
"""The code as landed before the store work of issue 24 began."""
PARTITIONS = 5
STORES = ("azure", "gcs", "s3", "memory")
DETAIL = bool(os.environ.get("BENCH_STORE_CPU_DETAIL"))
"""Also count requests by method, ``_temporary`` or not, and query keys (a diagnosis, not a table)."""
PROTOCOL_OF = {"azure": "manifest", "gcs": "manifest", "s3": "upload", "memory": "manifest"}

# --- the counting proxy (its own process) ------------------------------------------------------------------------


async def _forward_requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counts: Counter[str]) -> None:
    """Copy HTTP/1.1 requests from a client to the server, counting each by method."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method, _, rest = head.split(b"\r\n", 1)[0].decode("ascii", "replace").partition(" ")
            counts[method] += 1
            if DETAIL:
                target = rest.rsplit(" ", 1)[0]
                query = target.partition("?")[2]
                where = "_temporary" if "_temporary" in target or "%2Ftemporary" in target else "dest"
                keys = ",".join(sorted(part.split("=", 1)[0] for part in query.split("&") if part))
                counts[f"{method} {where} ?{keys}"] += 1
            headers = {}
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            writer.write(head)
            if b"content-length" in headers:
                remaining = int(headers[b"content-length"])
                while remaining:
                    chunk = await reader.read(min(remaining, 1 << 16))
                    if not chunk:
                        return
                    writer.write(chunk)
                    remaining -= len(chunk)
            elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    size = int(line.split(b";", 1)[0], 16)
                    if size == 0:
                        while True:  # trailers, up to the empty line
                            trailer = await reader.readuntil(b"\r\n")
                            writer.write(trailer)
                            if trailer == b"\r\n":
                                break
                        break
                    writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve_proxy(upstream_port: int) -> None:
    counts: Counter[str] = Counter()

    async def connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(
            _forward_requests(client_reader, server_writer, counts), _copy(server_reader, client_writer)
        )

    async def control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(json.dumps(dict(counts)).encode())
        await writer.drain()
        writer.close()

    forward = await asyncio.start_server(connection, "127.0.0.1", 0, backlog=1024)
    answer = await asyncio.start_server(control, "127.0.0.1", 0)
    ports = (forward.sockets[0].getsockname()[1], answer.sockets[0].getsockname()[1])
    print(json.dumps({"port": ports[0], "control": ports[1]}), flush=True)
    await asyncio.Event().wait()


def request_counts(control_port: int) -> Counter[str]:
    """The proxy's requests so far, by HTTP method."""
    import socket

    with socket.create_connection(("127.0.0.1", control_port)) as sock:
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return Counter({key: value for key, value in json.loads(data).items() if " " not in key})


def detailed_counts(control_port: int) -> Counter[str]:
    """The proxy's requests by method, place and query keys (``BENCH_STORE_CPU_DETAIL``)."""
    import socket

    with socket.create_connection(("127.0.0.1", control_port)) as sock:
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return Counter({key: value for key, value in json.loads(data).items() if " " in key})


@contextlib.contextmanager
def counting_proxy(upstream_port: int) -> Iterator[tuple[int, int]]:
    """A counting proxy in front of ``upstream_port``: (its port, its control port)."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--proxy", str(upstream_port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        ports = json.loads(process.stdout.readline())
        yield ports["port"], ports["control"]
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- the child: one job on one side ----------------------------------------------------------------------------


def _relative_files(task: int, files: int) -> list[str]:
    return [f"dt=2024-01-0{1 + n % PARTITIONS}/part-{task:05d}-{n:04d}.csv" for n in range(files)]


def _prepare(mc: Any, destination: str, job_id: str, spec: dict[str, Any], wrapper: Any = None) -> None:
    """Set up the job and run its tasks (writes and task commits), outside the measured window."""
    config = mc.CommitterConfig(io_threads=spec["io_threads"])
    committer = mc.create_committer(
        destination,
        job_id,
        spec["protocol"],
        config=config,
        storage_options=spec["storage_options"],
        store_wrapper=wrapper,
    )
    committer.setup_job()
    per_task = spec["files"] // spec["tasks"]

    def task(index: int) -> None:
        attempt = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
        for relative in _relative_files(index, per_task):
            with attempt.fs.open(f"{attempt.work_path}/{relative}", "wb") as handle:
                handle.write(b"a,b\n1,2\n")
        committer.commit_task(attempt)

    with ThreadPoolExecutor(spec["task_threads"]) as pool:
        list(pool.map(task, range(spec["tasks"])))
    with contextlib.suppress(AttributeError):
        committer.close()


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """One step of a job in this process: ``prepare`` (setup and tasks) or ``commit`` (the measured window)."""
    if spec["store"] == "memory":
        return _run_memory_child(spec)
    import manifest_committer as mc

    destination = spec["destination"]
    if spec["step"] == "prepare":
        _prepare(mc, destination, spec["job_id"], spec)
        return {}
    config = mc.CommitterConfig(io_threads=spec["io_threads"])
    committer = mc.create_committer(
        destination, spec["job_id"], spec["protocol"], config=config, storage_options=spec["storage_options"]
    )
    before = request_counts(spec["control_port"])
    detail_before = detailed_counts(spec["control_port"]) if DETAIL else Counter()
    wall, cpu = time.perf_counter(), time.process_time()
    success = committer.commit_job()
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    requests = request_counts(spec["control_port"]) - before
    if DETAIL:
        for key, count in sorted((detailed_counts(spec["control_port"]) - detail_before).items()):
            print(f"{count:8d} {key}", file=sys.stderr)
    with contextlib.suppress(AttributeError):
        committer.close()
    committed = success.iostatistics.counters.get("committer_files_committed", 0)
    if committed != spec["files"]:
        raise RuntimeError(f"{destination}: committed {committed} files of {spec['files']}")
    return {"cpu_s": cpu, "wall_s": wall, "files": committed, "requests": dict(requests)}


def _run_memory_child(spec: dict[str, Any]) -> dict[str, Any]:
    import fsspec

    # From the script's directory, not the package: the ref's ``benchmarks`` has no such module.
    indexed_memory_store = importlib.import_module("indexed_memory_store")

    import manifest_committer as mc
    from manifest_committer.store import FaultInjectingStore

    main_thread = threading.main_thread()

    class ThreadCountingStore(FaultInjectingStore):
        """Counts the calls made on the job's own thread (one after another) apart from the pool's."""

        sequential = 0
        parallel = 0
        peak_threads = 0

        def _count(self, calls: int) -> None:
            cls = type(self)
            cls.peak_threads = max(cls.peak_threads, threading.active_count())
            if threading.current_thread() is main_thread:
                type(self).sequential += calls
            else:
                type(self).parallel += calls

        def around(self, operation: str, path: str, call: Any) -> Any:
            self._count(1)
            return super().around(operation, path, call)

        def rename_files(self, pairs: Any, *hints: Any) -> Any:  # the ref has no hints
            if self.capabilities.concurrent_calls:
                self._count(len(pairs))
            return super().rename_files(pairs, *hints)

        def read_files(self, paths: Any) -> Any:  # not called by a ref without batched reads
            if self.capabilities.concurrent_calls:
                self._count(len(paths))
            return super().read_files(paths)

        def delete_dirs(self, paths: Any) -> Any:  # nor by one without batched deletes
            if self.capabilities.concurrent_calls:
                self._count(len(paths))
            return super().delete_dirs(paths)

    wrappers: list[ThreadCountingStore] = []

    def wrap(inner: Any) -> Any:
        wrapper = ThreadCountingStore(indexed_memory_store.IndexedMemoryStore(inner.fs))
        wrappers.append(wrapper)
        return wrapper

    fsspec.filesystem("memory").store.clear()
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    destination = f"memory://bench-{job_id}/out"
    _prepare(mc, destination, job_id, spec, wrap)
    config = mc.CommitterConfig(io_threads=spec["io_threads"])
    committer = mc.create_committer(destination, job_id, spec["protocol"], config=config, store_wrapper=wrap)
    # The index of the benchmark's store is rebuilt at its first call after the tasks wrote through the
    # filesystem (100,000 keys: a third of a second at 50,000 files): built here, outside the measured window.
    wrappers[-1].inner.info(committer.paths.dest)
    wrappers[-1].latency = spec["latency"]
    ThreadCountingStore.sequential = ThreadCountingStore.parallel = 0
    wall, cpu = time.perf_counter(), time.process_time()
    success = committer.commit_job()
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    committed = success.iostatistics.counters.get("committer_files_committed", 0)
    if committed != spec["files"]:
        raise RuntimeError(f"{destination}: committed {committed} files of {spec['files']}")
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "files": committed,
        "sequential_calls": ThreadCountingStore.sequential,
        "parallel_calls": ThreadCountingStore.parallel,
        "threads_peak": ThreadCountingStore.peak_threads,
    }


# --- the parent ------------------------------------------------------------------------------------------------


@dataclass
class Case:
    store: str
    files: int
    io_threads: int
    latency: float = 0.0
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.store == "memory":
            return f"memory {self.latency * 1000:g} ms, {self.files:,} files, {self.io_threads} in flight"
        return f"{self.store} ({PROTOCOL_OF[self.store]}), {self.files:,} files"


@contextlib.contextmanager
def exported_ref(ref: str) -> Iterator[Path]:
    """The tree of ``ref`` in a temporary directory (``git archive``: symlinks kept, no worktree registered)."""
    with tempfile.TemporaryDirectory(prefix="bench-ref-") as directory:
        archive = subprocess.run(["git", "archive", ref], cwd=REPOSITORY, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", directory], input=archive, check=True)
        yield Path(directory)


def run_side(root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": str(root), "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    command = [sys.executable, __file__, "--child", json.dumps(spec)]
    sampled = os.environ.get("BENCH_STORE_CPU_PYSPY")
    if sampled and spec.get("step") != "prepare":
        # py-spy samples every thread (cProfile sees one): collapsed stacks, for a profile of the call path
        output = f"{sampled}.{spec['store']}.{root.name}.{os.getpid()}.{time.monotonic_ns()}"
        command = [
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "-r",
            "250",
            "-f",
            "raw",
            "-o",
            output,
            "--",
            *command,
        ]
    completed = subprocess.run(  # noqa: PLW1510 (the return code is checked below, with the child's stderr)
        command,
        env=environment,
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=tempfile.gettempdir(),
    )
    if completed.returncode != 0:
        raise RuntimeError(f"child on {root} failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
    if DETAIL:
        print(completed.stderr[-8000:], end="")
    result: dict[str, Any] = json.loads(
        [line for line in completed.stdout.splitlines() if line.startswith("{")][-1]  # py-spy prints too
    )
    return result


def _emulator(store: str) -> Any:
    from tests.fixtures import emulators

    return {"azure": emulators.run_azurite, "gcs": emulators.run_fake_gcs_server, "s3": emulators.run_moto}[store]


def _through_proxy(store: str, options: dict[str, Any], upstream: int, port: int) -> dict[str, Any]:
    if store == "azure":
        return {"connection_string": options["connection_string"].replace(f":{upstream}/", f":{port}/")}
    return {**options, "endpoint_url": f"http://127.0.0.1:{port}"}


def run_emulator_case(case: Case, sides: dict[str, Path], args: argparse.Namespace) -> None:
    from tests.fixtures.emulators import fresh_root

    with _emulator(case.store)() as emulator, counting_proxy(emulator.port) as (port, control):
        options = _through_proxy(case.store, emulator.storage_options, emulator.port, port)
        for run in range(args.runs):
            names = list(sides)
            names = names[run % len(names) :] + names[: run % len(names)]
            for side in names:
                with fresh_root(emulator, "bench") as root:
                    spec = {
                        "store": case.store,
                        "protocol": PROTOCOL_OF[case.store],
                        "destination": f"{emulator.protocol}://{root}/out",
                        "storage_options": options,
                        "control_port": control,
                        "files": case.files,
                        "tasks": args.tasks,
                        "task_threads": args.task_threads,
                        "io_threads": case.io_threads,
                    }
                    spec["job_id"] = f"job-{uuid.uuid4().hex[:8]}"
                    run_side(sides[side], {**spec, "step": "prepare"})
                    result = run_side(sides[side], {**spec, "step": "commit"})
                case.results.setdefault(side, []).append(result)
                _print_run(case, side, run, result)


def run_memory_case(case: Case, sides: dict[str, Path], args: argparse.Namespace) -> None:
    for run in range(args.runs):
        names = list(sides)
        names = names[run % len(names) :] + names[: run % len(names)]
        for side in names:
            spec = {
                "store": "memory",
                "protocol": "manifest",
                "storage_options": {},
                "files": case.files,
                "tasks": max(1, case.files // args.memory_files_per_task),
                "task_threads": 1,
                "io_threads": case.io_threads,
                "latency": case.latency,
            }
            result = run_side(sides[side], spec)
            case.results.setdefault(side, []).append(result)
            _print_run(case, side, run, result)


PROTOCOL_CHAIN = 15
"""The calls of the manifest protocol's job commit that must follow one another, for the memory case's job (every
destination directory new), each waiting for the one before: (1) the job's records read and its manifests listed;
(2) a manifest read; (3) the destination's directories probed, ``commit-started`` written meanwhile; (4) the
directories' journal record; (5) a ``mkdirs``; (6) a unit's intent record; (7) one of its renames; (8) its
``done`` record; (9) ``_SUCCESS.tmp`` written, ``_SUCCESS`` probed meanwhile; (10) the rename into place;
(11) ``commit-finished``; the cleanup's (12) probes and listings, (13) deletes, (14) delete of the job directory
with its record last, (15) removal of ``_temporary`` if empty. Every other call can go out beside these."""


def _critical_path(result: dict[str, Any], case: Case) -> float:
    """The protocol's critical path: its chain one call after another, every other call spread over the calls in
    flight; a property of the protocol and the job, the same for both sides."""
    calls = result["sequential_calls"] + result["parallel_calls"]
    return float((PROTOCOL_CHAIN + max(0, calls - PROTOCOL_CHAIN) / case.io_threads) * case.latency)


def _print_run(case: Case, side: str, run: int, result: dict[str, Any]) -> None:
    extra = ""
    if "requests" in result:
        extra = f", requests {sum(result['requests'].values())} {result['requests']}"
    else:
        extra = (
            f", calls {result['sequential_calls']} on the job's thread + {result['parallel_calls']} on others, "
            f"critical path "
            f"{_critical_path(result, case):.2f} s, peak threads {result['threads_peak']}"
        )
    print(
        f"{case.name} | {side} run {run}: CPU {result['cpu_s']:.2f} s "
        f"({result['cpu_s'] / result['files'] * 1000:.2f} ms a file), wall {result['wall_s']:.2f} s{extra}",
        flush=True,
    )


def _median(case: Case, side: str, key: Any) -> float:
    return float(statistics.median(key(result) for result in case.results[side]))


def print_tables(cases: list[Case], ref: str) -> None:
    emulator_cases = [case for case in cases if case.store != "memory"]
    if emulator_cases:
        print(
            f"\n| store | protocol | files | requests a file, {ref} | requests a file, tree | CPU a file, {ref} (ms) "
            "| CPU a file, tree (ms) | tree / ref | files/s on one core, tree |"
        )
        print("|---|---|---:|---|---|---:|---:|---:|---:|")
        for case in emulator_cases:
            per_file = {side: _median(case, side, lambda r: r["cpu_s"] / r["files"] * 1000) for side in case.results}
            requests = {
                side: _median(case, side, lambda r: sum(r["requests"].values()) / r["files"]) for side in case.results
            }
            methods = {side: _methods(case, side) for side in case.results}
            print(
                f"| {case.store} | {PROTOCOL_OF[case.store]} | {case.files:,} "
                f"| {requests['ref']:.2f} ({methods['ref']}) | {requests['tree']:.2f} ({methods['tree']}) "
                f"| {per_file['ref']:.2f} | {per_file['tree']:.2f} | {per_file['tree'] / per_file['ref']:.2f} "
                f"| {1000 / per_file['tree']:.0f} |"
            )
    memory_cases = [case for case in cases if case.store == "memory"]
    if memory_cases:
        print(
            f"\n| files | calls in flight | latency (ms) | wall, {ref} (s) | wall, tree (s) | critical path, tree (s) "
            f"| tree / critical path | {ref} / its critical path | CPU, tree (s) | peak threads, tree |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for case in memory_cases:
            wall = {side: _median(case, side, lambda r: r["wall_s"]) for side in case.results}
            path = {side: _median(case, side, lambda r, case=case: _critical_path(r, case)) for side in case.results}
            print(
                f"| {case.files:,} | {case.io_threads} | {case.latency * 1000:g} | {wall['ref']:.2f} "
                f"| {wall['tree']:.2f} | {path['tree']:.2f} | {wall['tree'] / path['tree']:.2f} "
                f"| {wall['ref'] / path['ref']:.2f} | {_median(case, 'tree', lambda r: r['cpu_s']):.2f} "
                f"| {max(r['threads_peak'] for r in case.results['tree'])} |"
            )


def _methods(case: Case, side: str) -> str:
    """The median run's requests a file by HTTP method, e.g. ``PUT 1.00, DELETE 1.00``."""
    runs = sorted(case.results[side], key=lambda r: sum(r["requests"].values()))
    middle = runs[len(runs) // 2]
    return ", ".join(f"{method} {count / middle['files']:.2f}" for method, count in sorted(middle["requests"].items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--ref", default=DEFAULT_REF, help=f"git ref of the code to compare with (default {DEFAULT_REF})"
    )
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--files", type=int, default=1000, help="files of an emulator job (default 1000)")
    parser.add_argument("--tasks", type=int, default=20, help="tasks of an emulator job (default 20)")
    parser.add_argument("--task-threads", type=int, default=4, help="tasks prepared at once (default 4)")
    parser.add_argument("--io-threads", type=int, default=32, help="io.threads of the emulator jobs (default 32)")
    parser.add_argument("--runs", type=int, default=3, help="runs a side and case (default 3)")
    parser.add_argument("--latency", type=float, default=0.020, help="memory case: seconds a call (default 0.020)")
    parser.add_argument("--memory-files", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--memory-files-per-task", type=int, default=100)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[256, 1024], help="memory case: io.threads")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--proxy", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.proxy is not None:
        asyncio.run(_serve_proxy(args.proxy))
        return 0
    if args.child is not None:
        print(json.dumps(_run_child(json.loads(args.child))), flush=True)
        return 0

    sys.path.insert(0, str(REPOSITORY))  # the parent only (children import one side's code): tests.fixtures
    cases: list[Case] = []
    for store in args.stores:
        if store == "memory":
            cases += [Case("memory", n, k, args.latency) for n in args.memory_files for k in args.in_flight]
        else:
            cases.append(Case(store, args.files, args.io_threads))
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                "load_average": [round(value, 1) for value in os.getloadavg()],
                "date": time.strftime("%Y-%m-%d"),
                "ref": args.ref,
            }
        ),
        flush=True,
    )
    with exported_ref(args.ref) as ref_root:
        sides = {"ref": ref_root, "tree": REPOSITORY}
        for case in cases:
            if case.store == "memory":
                run_memory_case(case, sides, args)
            else:
                run_emulator_case(case, sides, args)
    print_tables(cases, args.ref)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([case.__dict__ for case in cases], handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
