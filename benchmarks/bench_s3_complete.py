"""Publishing task files on S3 (moto): completing pending uploads vs copy + delete per file.

Both sides start from the same state a task commit leaves: ``--files`` small files already written. The
``upload`` side wrote each as a pending multipart upload to its final key (``open_pending_upload``) and times
``S3Store.complete_upload`` of every one, in parallel. The copy side wrote each under a staging prefix, as a
rename-based committer would on S3, and times s3fs's ``cp_file`` then ``rm_file`` of every one, in parallel: what
a user without the upload protocol would write. Same thread count, same moto server, fresh buckets.

One run; it is not part of CI. ``python benchmarks/bench_s3_complete.py --help`` for the options; BENCHMARKS.md
has the result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fixtures.emulators

from manifest_committer.store.pending_upload import PendingUpload, open_pending_upload
from manifest_committer.store.s3 import S3Store, open_s3_store
from tests.fixtures.emulators import Emulator, fresh_root, fsspec_defaults, run_moto

T = TypeVar("T")


def _parallel(threads: int, function: Callable[[Any], T], items: Iterable[Any]) -> tuple[float, list[T]]:
    """Seconds to apply ``function`` to every item on ``threads`` threads, and the results in order."""
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(function, items))
    return time.perf_counter() - started, results


def _write_pending(store: S3Store, path: str, data: bytes) -> PendingUpload:
    with open_pending_upload(store.data_fs, path) as writer:
        writer.write(data)
    return writer.pending


def measure_upload(moto: Emulator, files: int, threads: int, data: bytes) -> float:
    with fresh_root(moto, "bench-upload") as bucket:
        store = open_s3_store(f"s3://{bucket}/out").store
        _, pending = _parallel(threads, lambda i: _write_pending(store, f"{bucket}/out/f-{i:05d}", data), range(files))
        seconds, _ = _parallel(threads, store.complete_upload, pending)
        assert len(store.fs.find(f"{bucket}/out")) == files
        assert not store.list_uploads(f"{bucket}/")
        return seconds


def measure_copy_delete(moto: Emulator, files: int, threads: int, data: bytes) -> float:
    with fresh_root(moto, "bench-copy") as bucket:
        store = open_s3_store(f"s3://{bucket}/out").store
        fs = store.data_fs
        names = [f"f-{i:05d}" for i in range(files)]
        _parallel(threads, lambda name: fs.pipe_file(f"{bucket}/staging/{name}", data), names)

        def move(name: str) -> None:
            fs.cp_file(f"{bucket}/staging/{name}", f"{bucket}/out/{name}")
            fs.rm_file(f"{bucket}/staging/{name}")

        seconds, _ = _parallel(threads, move, names)
        assert len(fs.find(f"{bucket}/out")) == files
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    arguments = parser.parse_args()
    data = os.urandom(arguments.size)
    with run_moto() as moto, fsspec_defaults(moto):
        upload = measure_upload(moto, arguments.files, arguments.threads, data)
        copy_delete = measure_copy_delete(moto, arguments.files, arguments.threads, data)
    result = {
        "files": arguments.files,
        "threads": arguments.threads,
        "bytes_per_file": arguments.size,
        "complete_upload_s": round(upload, 3),
        "copy_delete_s": round(copy_delete, 3),
        "ratio_upload_to_copy_delete": round(upload / copy_delete, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": [round(value, 1) for value in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
