"""The ``upload`` protocol's job commit on S3 (moto) vs the copy-based commit a user would otherwise write.

Both sides start from what the tasks leave. The ``upload`` side runs a real job through ``mc.create_committer(...,
protocol="upload")``: ``--tasks`` tasks write ``--files`` files between them through ``task.fs`` (pending multipart
uploads to the final keys) and commit; only ``commit_job`` is timed (completing every upload with
``If-None-Match: *``, ``_SUCCESS``, cleanup). The copy side has the same files under a staging prefix, as a
rename-based committer leaves them, and times s3fs's ``cp_file`` then ``rm_file`` of each on the same number of
threads. With ``--latency`` every store call of both sides first sleeps that long (the committer's calls through
``FaultInjectingStore``, the copy side's two calls per file by hand), and the report adds the ideal
``calls x latency / io.threads`` of the job commit and measured / ideal.

The CPU columns (issue 13): the committer process's CPU during ``commit_job`` (``time.process_time``, every
thread; moto runs in its own process, whose CPU is reported apart), split into fsspec's event-loop thread (where
s3fs and aiobotocore build, sign and parse every request) and the rest (the job's pool: our gate, statistics,
and the wait on the sync-over-async bridge), per store call; from it the ceiling on calls per second that one
interpreter allows (``1 / CPU a call``) against what ``io.threads`` at 20 ms a call would need
(``threads / 0.02``). ``--threads`` takes several counts, each a fresh job on the same moto; ``--profile`` prints
where the pool threads' CPU went (cProfile of every pool thread, merged).

One run; not part of CI. ``python benchmarks/bench_s3_upload.py --help``; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fsspec.asyn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

import manifest_committer as mc
from benchmarks.bench_s3_complete import _parallel
from manifest_committer.store import StoreOperations
from manifest_committer.store.faults import FaultInjectingStore
from manifest_committer.store.s3 import open_s3_store
from tests.fixtures.emulators import Emulator, fresh_root, fsspec_defaults, run_moto


def _name(index: int) -> str:
    return f"dt={index % 10}/part-{index:06d}.bin"


def _thread_cpu_s(thread: threading.Thread | None) -> float:
    """CPU seconds of one thread of this process so far (0 for none)."""
    if thread is None or thread.ident is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def _process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of another process so far, from ``/proc`` (Linux); 0 where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _profiled_threads(enabled: bool, report: list[str]) -> Iterator[None]:
    """cProfile every thread started inside (the job's pool), merged into ``report`` by own time."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_: object) -> None:
        profile = cProfile.Profile()
        with lock:
            profiles.append(profile)
        sys.setprofile(None)
        profile.enable()

    loop_profile = cProfile.Profile()
    loop = fsspec.asyn.get_loop()
    if enabled:
        threading.setprofile(start)
        _on_loop(loop, loop_profile.enable)  # a profiler profiles the thread that enables it
    try:
        yield
    finally:
        if enabled:
            threading.setprofile(None)
            _on_loop(loop, loop_profile.disable)
            for profile in profiles:
                profile.disable()
            for name, merged in (("the job's pool threads", profiles), ("fsspec's IO thread", [loop_profile])):
                text = io.StringIO()
                stats = pstats.Stats(merged[0], stream=text)
                for profile in merged[1:]:
                    stats.add(profile)
                stats.sort_stats("tottime").print_stats(30)
                report.append(f"--- {name} ---\n{text.getvalue()}")


def _on_loop(loop: Any, function: Any) -> None:
    """Run ``function`` on the event loop's thread and wait for it."""
    done = threading.Event()

    def run() -> None:
        function()
        done.set()

    loop.call_soon_threadsafe(run)
    done.wait(10)


def measure_upload_job(
    moto: Emulator, files: int, tasks: int, threads: int, data: bytes, *, latency: float, profile: bool = False
) -> dict[str, Any]:
    """Seconds of ``commit_job`` of a real ``upload`` job, its store calls and its ideal under ``latency``, and
    the CPU of this process (and of moto's) during it."""
    wrappers: list[FaultInjectingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapper = FaultInjectingStore(inner)
        wrappers.append(wrapper)
        return wrapper

    with fresh_root(moto, "bench-upload-job") as bucket:
        url = f"s3://{bucket}/out"
        committer = mc.create_committer(
            url,
            f"job-{uuid.uuid4().hex[:8]}",
            "upload",
            config=mc.CommitterConfig(io_threads=threads),
            storage_options=moto.storage_options,
            store_wrapper=wrap,
        )
        try:
            committer.setup_job()

            def task(index: int) -> None:
                attempt = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
                for file_index in range(index, files, tasks):
                    with attempt.fs.open(f"{attempt.work_path}/{_name(file_index)}", "wb") as stream:
                        stream.write(data)
                committer.commit_task(attempt)

            prepared_start = time.perf_counter()
            with ThreadPoolExecutor(min(tasks, threads)) as pool:
                list(pool.map(task, range(tasks)))
            prepare_s = time.perf_counter() - prepared_start
            wrapper = wrappers[0]
            wrapper.calls.clear()
            wrapper.latency = latency
            io_thread = fsspec.asyn.iothread[0]
            moto_cpu = _process_cpu_s(moto.process.pid)
            io_cpu, cpu = _thread_cpu_s(io_thread), time.process_time()
            report: list[str] = []
            started = time.perf_counter()
            with _profiled_threads(profile, report):
                success = committer.commit_job()
            commit_s = time.perf_counter() - started
            cpu, io_cpu = time.process_time() - cpu, _thread_cpu_s(io_thread) - io_cpu
            moto_cpu = _process_cpu_s(moto.process.pid) - moto_cpu
            load = os.getloadavg()[0]
            wrapper.latency = 0.0
            calls = dict(wrapper.calls)
        finally:
            committer.close()
        store = open_s3_store(url, moto.storage_options).store
        visible = [path for path in store.fs.find(f"{bucket}/out") if "/_" not in path.split("out", 1)[1]]
        if not success.success or len(visible) != files or store.list_uploads(f"{bucket}/"):
            raise RuntimeError(f"{url}: the job did not commit exactly {files} files and no pending upload")
    total_calls = sum(calls.values())
    ideal = total_calls * latency / threads
    cpu_per_call = cpu / max(1, total_calls)
    if report:
        print(f"=== where the CPU went, {threads} threads ===\n" + "\n".join(report), file=sys.stderr)
    return {
        "threads": threads,
        "commit_job_s": round(commit_s, 3),
        "tasks_s": round(prepare_s, 3),
        "calls": calls,
        "total_calls": total_calls,
        "ideal_s": round(ideal, 3),
        "measured_to_ideal": round(commit_s / ideal, 2) if ideal else None,
        "cpu_s": round(cpu, 3),
        "cpu_per_call_us": round(cpu_per_call * 1e6),
        "io_thread_cpu_s": round(io_cpu, 3),
        "other_threads_cpu_per_call_us": round((cpu - io_cpu) / max(1, total_calls) * 1e6),
        "io_thread_cpu_per_call_us": round(io_cpu / max(1, total_calls) * 1e6),
        "calls_per_s": round(total_calls / commit_s),
        "one_interpreter_ceiling_calls_per_s": round(1 / cpu_per_call) if cpu_per_call else None,
        "needed_at_20ms_calls_per_s": round(threads / 0.020),
        "moto_cpu_s": round(moto_cpu, 3),
        "load_average_after": round(load, 1),
    }


def measure_copy_delete(moto: Emulator, files: int, threads: int, data: bytes, *, latency: float) -> float:
    """Seconds to copy then delete every staged file, ``latency`` slept before each of the two calls."""
    with fresh_root(moto, "bench-copy-job") as bucket:
        store = open_s3_store(f"s3://{bucket}/out", moto.storage_options).store
        fs = store.data_fs
        names = [_name(index) for index in range(files)]
        _parallel(threads, lambda name: fs.pipe_file(f"{bucket}/staging/{name}", data), names)

        def move(name: str) -> None:
            time.sleep(latency)
            fs.cp_file(f"{bucket}/staging/{name}", f"{bucket}/out/{name}")
            time.sleep(latency)
            fs.rm_file(f"{bucket}/staging/{name}")

        seconds, _ = _parallel(threads, move, names)
        if len(fs.find(f"{bucket}/out")) != files:
            raise RuntimeError(f"s3://{bucket}/out: the copy side did not move {files} files")
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[32], help="io.threads of the job commit (each a job) and copy side"
    )
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every store call")
    parser.add_argument("--skip-copy", action="store_true", help="time the upload job commit only")
    parser.add_argument("--profile", action="store_true", help="print where the pool threads' CPU went (stderr)")
    arguments = parser.parse_args()
    data = os.urandom(arguments.size)
    with run_moto() as moto, fsspec_defaults(moto):
        uploads = [
            measure_upload_job(
                moto,
                arguments.files,
                arguments.tasks,
                threads,
                data,
                latency=arguments.latency,
                profile=arguments.profile,
            )
            for threads in arguments.threads
        ]
        upload = uploads[0]
        copy_delete = (
            None
            if arguments.skip_copy
            else measure_copy_delete(moto, arguments.files, arguments.threads[0], data, latency=arguments.latency)
        )
    result: dict[str, Any] = {
        "files": arguments.files,
        "tasks": arguments.tasks,
        "threads": arguments.threads,
        "bytes_per_file": arguments.size,
        "latency_s": arguments.latency,
        "upload": upload,
        "uploads_by_threads": uploads,
        "copy_delete_s": None if copy_delete is None else round(copy_delete, 3),
        "ratio_upload_to_copy_delete": None if copy_delete is None else round(upload["commit_job_s"] / copy_delete, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": [round(value, 1) for value in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))
    print(
        "| io.threads | calls | commit_job (s) | calls/s | CPU (s) | CPU a call (us) | of it fsspec IO thread (us) | "
        "ceiling calls/s (1 / CPU a call) | needed at 20 ms | moto CPU (s) | load |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in uploads:
        print(
            f"| {row['threads']} | {row['total_calls']:,} | {row['commit_job_s']:.1f} | {row['calls_per_s']:,} | "
            f"{row['cpu_s']:.2f} | {row['cpu_per_call_us']:,} | {row['io_thread_cpu_per_call_us']:,} | "
            f"{row['one_interpreter_ceiling_calls_per_s']:,} | {row['needed_at_20ms_calls_per_s']:,} | "
            f"{row['moto_cpu_s']:.1f} | {row['load_average_after']} |"
        )


if __name__ == "__main__":
    main()
