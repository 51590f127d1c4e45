"""The ``upload`` protocol's job commit on S3 (moto) vs the copy-based commit a user would otherwise write.

Both sides start from what the tasks leave. The ``upload`` side runs a real job through ``mc.create_committer(...,
protocol="upload")``: ``--tasks`` tasks write ``--files`` files between them through ``task.fs`` (pending multipart
uploads to the final keys) and commit; only ``commit_job`` is timed (completing every upload with
``If-None-Match: *``, ``_SUCCESS``, cleanup). The copy side has the same files under a staging prefix, as a
rename-based committer leaves them, and times s3fs's ``cp_file`` then ``rm_file`` of each on the same number of
threads. With ``--latency`` every store call of both sides first sleeps that long (the committer's calls through
``FaultInjectingStore``, the copy side's two calls per file by hand), and the report adds the ideal
``calls x latency / io.threads`` of the job commit and measured / ideal.

One run; not part of CI. ``python benchmarks/bench_s3_upload.py --help``; BENCHMARKS.md has the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

import manifest_committer as mc
from benchmarks.bench_s3_complete import _parallel
from manifest_committer.store import StoreOperations
from manifest_committer.store.faults import FaultInjectingStore
from manifest_committer.store.s3 import open_s3_store
from tests.fixtures.emulators import Emulator, fresh_root, fsspec_defaults, run_moto


def _name(index: int) -> str:
    return f"dt={index % 10}/part-{index:06d}.bin"


def measure_upload_job(
    moto: Emulator, files: int, tasks: int, threads: int, data: bytes, *, latency: float
) -> dict[str, Any]:
    """Seconds of ``commit_job`` of a real ``upload`` job, its store calls and its ideal under ``latency``."""
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
            started = time.perf_counter()
            success = committer.commit_job()
            commit_s = time.perf_counter() - started
            wrapper.latency = 0.0
            calls = dict(wrapper.calls)
        finally:
            committer.close()
        store, _ = open_s3_store(url, moto.storage_options)
        visible = [path for path in store.fs.find(f"{bucket}/out") if "/_" not in path.split("out", 1)[1]]
        if not success.success or len(visible) != files or store.list_uploads(f"{bucket}/"):
            raise RuntimeError(f"{url}: the job did not commit exactly {files} files and no pending upload")
    total_calls = sum(calls.values())
    ideal = total_calls * latency / threads
    return {
        "commit_job_s": round(commit_s, 3),
        "tasks_s": round(prepare_s, 3),
        "calls": calls,
        "total_calls": total_calls,
        "ideal_s": round(ideal, 3),
        "measured_to_ideal": round(commit_s / ideal, 2) if ideal else None,
    }


def measure_copy_delete(moto: Emulator, files: int, threads: int, data: bytes, *, latency: float) -> float:
    """Seconds to copy then delete every staged file, ``latency`` slept before each of the two calls."""
    with fresh_root(moto, "bench-copy-job") as bucket:
        store, _ = open_s3_store(f"s3://{bucket}/out", moto.storage_options)
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
    parser.add_argument("--threads", type=int, default=32, help="io.threads of the job commit and the copy side")
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every store call")
    parser.add_argument("--skip-copy", action="store_true", help="time the upload job commit only")
    arguments = parser.parse_args()
    data = os.urandom(arguments.size)
    with run_moto() as moto, fsspec_defaults(moto):
        upload = measure_upload_job(
            moto, arguments.files, arguments.tasks, arguments.threads, data, latency=arguments.latency
        )
        copy_delete = (
            None
            if arguments.skip_copy
            else measure_copy_delete(moto, arguments.files, arguments.threads, data, latency=arguments.latency)
        )
    result: dict[str, Any] = {
        "files": arguments.files,
        "tasks": arguments.tasks,
        "threads": arguments.threads,
        "bytes_per_file": arguments.size,
        "latency_s": arguments.latency,
        "upload": upload,
        "copy_delete_s": None if copy_delete is None else round(copy_delete, 3),
        "ratio_upload_to_copy_delete": None if copy_delete is None else round(upload["commit_job_s"] / copy_delete, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": [round(value, 1) for value in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
