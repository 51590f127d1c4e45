"""The token bucket, the rate-limited store wrapper, the ``io.rate`` key, and a job commit under a limit."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.errors import ConfigError
from manifest_committer.statistic_names import COMMITTER_FILES_COMMITTED, STORE_IO_RATE_LIMITED
from manifest_committer.store import StoreOperations, open_store
from manifest_committer.store.faults import OPERATIONS, UPLOAD_OPERATIONS
from manifest_committer.store.pending_upload import open_pending_upload
from manifest_committer.store.rate_limit import RateLimitedStore, TokenBucket
from manifest_committer.store.s3 import open_s3_store
from tests.fixtures.committing import FAST, output, run_task
from tests.fixtures.emulators import Emulator
from tests.fixtures.stores import clear_memory_filesystem

RATE_KEY = "mapreduce.manifest.committer.io.rate"


@pytest.fixture
def memory_destination() -> Iterator[str]:
    clear_memory_filesystem()
    yield f"memory://rate-{uuid.uuid4().hex[:8]}/out"
    clear_memory_filesystem()


# --- the bucket ---------------------------------------------------------------------------------------------------


def test_bucket_admits_burst_at_once_then_paces() -> None:
    bucket = TokenBucket(100, burst=5)
    start = time.monotonic()
    waits = [bucket.acquire() for _ in range(5)]
    assert time.monotonic() - start < 0.04
    assert waits == [0.0] * 5
    for _ in range(15):
        bucket.acquire()
    elapsed = time.monotonic() - start
    assert elapsed >= 0.12  # 15 tokens beyond the burst at 100/s: 0.15 s, less timer slack
    assert elapsed < 2.0


def test_bucket_paces_at_rate_with_burst_one() -> None:
    bucket = TokenBucket(100, burst=1)
    start = time.monotonic()
    for _ in range(20):
        bucket.acquire()
    elapsed = time.monotonic() - start
    assert elapsed >= 0.15  # 19 waits of 10 ms
    assert elapsed < 2.0


def test_bucket_refills_while_idle_but_never_beyond_burst() -> None:
    now = [0.0]
    slept: list[float] = []
    bucket = TokenBucket(10, burst=3, clock=lambda: now[0], sleep=slept.append)
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.acquire() == pytest.approx(0.1)
    now[0] = 100.0  # a long idle spell refills only up to the burst
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.acquire() == pytest.approx(0.1)
    assert slept == [pytest.approx(0.1), pytest.approx(0.1)]


def test_bucket_queues_waiters_behind_each_other() -> None:
    now = [0.0]
    bucket = TokenBucket(10, burst=1, clock=lambda: now[0], sleep=lambda seconds: None)
    # Nobody has slept yet (the clock stands still): each waiter is promised the token after the previous one.
    assert [bucket.acquire() for _ in range(4)] == [0.0, pytest.approx(0.1), pytest.approx(0.2), pytest.approx(0.3)]


def test_bucket_is_shared_safely_by_threads() -> None:
    rate, burst, threads, per_thread = 200.0, 4, 8, 10
    bucket = TokenBucket(rate, burst=burst)
    waits: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def work() -> None:
        barrier.wait()
        for _ in range(per_thread):
            waited = bucket.acquire()
            with lock:
                waits.append(waited)

    start = time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - start

    total = threads * per_thread
    assert len(waits) == total
    # 76 tokens beyond the burst at 200/s: 0.38 s whatever the interleaving; a lost update would admit more.
    assert elapsed >= (total - burst) / rate * 0.8
    assert elapsed < 5.0
    # Waiting is spread over threads in order, so no single call waits for much more than the whole queue.
    assert max(waits) <= (total - burst) / rate + 0.01
    assert sum(1 for waited in waits if waited > 0) >= total - burst - int(elapsed * rate * 0.5)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1.0, 1), (True, 1), (1.0, 0), (1.0, 1.5), (1.0, False)])
def test_bucket_rejects_bad_settings(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="token bucket"):
        TokenBucket(rate, burst=burst)


# --- the wrapper --------------------------------------------------------------------------------------------------


def _not_offered(call: Callable[[], object]) -> None:
    """The memory store has no one-call directory rename; the token is taken before the store says so."""
    with pytest.raises(NotImplementedError):
        call()


def test_every_store_operation_takes_a_token(memory_destination: str) -> None:
    opened = open_store(memory_destination, {})
    inner, root = opened.store, opened.path
    waits: list[float] = []
    bucket = TokenBucket(1000, burst=1000)
    store: StoreOperations = RateLimitedStore(inner, bucket, waits.append)
    calls: dict[str, Callable[[], object]] = {
        "mkdirs": lambda: store.mkdirs(root + "/d"),
        "write_bytes": lambda: store.write_bytes(root + "/d/a", b"a"),
        "append_bytes": lambda: _not_offered(lambda: store.append_bytes(root + "/d/log", b"a")),
        "info": lambda: store.info(root + "/d/a"),
        "list_dir": lambda: store.list_dir(root + "/d"),
        "read_bytes": lambda: store.read_bytes(root + "/d/a"),
        "copy_file": lambda: store.copy_file(root + "/d/a", root + "/d/b"),
        "rename_file": lambda: store.rename_file(root + "/d/b", root + "/d/c"),
        "rename_dir": lambda: _not_offered(lambda: store.rename_dir(root + "/d", root + "/e")),
        "delete_file": lambda: store.delete_file(root + "/d/c"),
        "remove_empty_dir": lambda: store.remove_empty_dir(root + "/d"),
        "delete_dir": lambda: store.delete_dir(root + "/d"),
    }
    assert set(calls) == set(OPERATIONS) - set(UPLOAD_OPERATIONS)
    for count, call in enumerate(calls.values(), start=1):
        call()
        assert len(waits) == count
    assert inner.info(root + "/d") is None
    # No store call, no token.
    assert store.from_url(store.to_url(root + "/x")) == root + "/x"
    assert store.capabilities == inner.capabilities
    assert len(waits) == len(calls)


@pytest.mark.s3
def test_every_upload_operation_takes_a_token(s3_bucket: str, moto_s3: Emulator) -> None:
    """The upload protocol's S3 calls are paced by ``io.rate`` like every other store call."""
    opened = open_s3_store(f"s3://{s3_bucket}/out", moto_s3.storage_options)
    inner, root = opened.store, opened.path
    waits: list[float] = []
    store = RateLimitedStore(inner, TokenBucket(1000, burst=1000), waits.append)
    with open_pending_upload(inner.data_fs, root + "/a") as writer:
        writer.write(b"a")
    with open_pending_upload(inner.data_fs, root + "/b") as other:
        other.write(b"b")
    calls: dict[str, Callable[[], object]] = {
        "put_if_absent": lambda: store.put_if_absent(root + "/c", b"c"),
        "list_uploads": lambda: store.list_uploads(root + "/"),
        "complete_upload": lambda: store.complete_upload(writer.pending),
        "holds": lambda: store.holds(writer.pending),
        "abort_upload": lambda: store.abort_upload(other.path, other.pending.upload_id or ""),
    }
    assert set(calls) == set(UPLOAD_OPERATIONS)
    for count, call in enumerate(calls.values(), start=1):
        call()
        assert len(waits) == count
    assert inner.read_bytes(root + "/a") == b"a" and inner.list_uploads(root + "/") == []


# --- configuration ------------------------------------------------------------------------------------------------


def test_io_rate_key() -> None:
    assert mc.CommitterConfig().io_rate_limit == 0.0
    assert mc.CommitterConfig.from_hadoop_conf({RATE_KEY: "250"}).io_rate_limit == 250.0
    assert mc.CommitterConfig.from_hadoop_conf({"spark.hadoop." + RATE_KEY: " 0.5 "}).io_rate_limit == 0.5
    assert mc.CommitterConfig.from_hadoop_conf({RATE_KEY: "0"}).io_rate_limit == 0.0
    config = mc.CommitterConfig(io_rate_limit=12.5)
    assert config.to_hadoop_conf()[RATE_KEY] == "12.5"
    assert mc.CommitterConfig.from_hadoop_conf(config.to_hadoop_conf()) == config


@pytest.mark.parametrize("value", ["-1", "fast", "", "nan", "inf", "1e400"])
def test_io_rate_key_rejects_bad_values(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        mc.CommitterConfig.from_hadoop_conf({RATE_KEY: value})
    assert RATE_KEY in str(raised.value)
    assert repr(value) in str(raised.value)


@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf"), True, "10"])
def test_io_rate_field_rejects_bad_values(value: object) -> None:
    with pytest.raises(ConfigError, match="io_rate_limit"):
        mc.CommitterConfig(io_rate_limit=value)  # type: ignore[arg-type]


# --- a job under a limit ------------------------------------------------------------------------------------------


def test_job_commit_under_a_rate_limit(memory_destination: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    config = mc.CommitterConfig.from_hadoop_conf(
        {RATE_KEY: "40", "mapreduce.manifest.committer.summary.report.directory": str(reports)},
        io_threads=4,
        save_retry_interval=0,
        store_retry_interval=0,
    )
    committer = mc.ManifestCommitter(memory_destination, "job-rate", config=config)
    committer.setup_job()
    expected: dict[str, bytes] = {}
    manifests = []
    for index in range(4):
        files = {f"part={index}/file-{number}.csv": f"{index}-{number}".encode() for number in range(3)}
        task = run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", files, commit=False)
        manifests.append(committer.commit_task(task))
        expected.update(files)
    # Each task records its own waits, and they reach the job through its manifest.
    task_samples = sum(manifest.iostatistics.counters[STORE_IO_RATE_LIMITED] for manifest in manifests)
    assert task_samples >= 4

    success = committer.commit_job()

    assert output(committer) == expected
    assert success.iostatistics.counters[COMMITTER_FILES_COMMITTED] == len(expected)
    report = mc.SuccessData.load(str(reports / "summary-job-rate.json"))
    assert report.success is True
    statistics = report.iostatistics
    samples = statistics.meanstatistics[STORE_IO_RATE_LIMITED + ".mean"].samples
    # One sample per store call of the job commit plus those of the tasks, merged from their manifests:
    # far more than the 40-token burst, so some calls had to wait.
    assert samples > 40
    assert statistics.counters[STORE_IO_RATE_LIMITED] == samples
    assert statistics.maximums[STORE_IO_RATE_LIMITED + ".max"] > 0
    assert samples > task_samples


def test_no_limit_no_statistic(memory_destination: str) -> None:
    committer = mc.ManifestCommitter(memory_destination, "job-free", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    success = committer.commit_job()
    assert STORE_IO_RATE_LIMITED not in success.iostatistics.counters
    assert output(committer) == {"a.csv": b"a"}
