"""A task's marker calls: through the server, or directly when it cannot answer, and never lost."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import manifest_committer
import manifest_committer as mc
from manifest_committer.iostatistics import StatisticsStore
from manifest_committer.markers import (
    Marker,
    MarkerClient,
    MarkerError,
    MarkerServer,
    ServerState,
    read_markers,
    read_server_state,
)
from manifest_committer.markers.layout import MarkerStoreCalls
from manifest_committer.retry import RetryPolicy
from manifest_committer.statistic_names import STORE_IO_RETRY
from manifest_committer.store import Fault, FaultInjectingStore
from tests.markers.conftest import MarkerJob, marker_job


def publish(job: MarkerJob, port: int) -> None:
    """A ``server.json`` naming ``port`` on the loopback, as if a server had published it."""
    state = ServerState("127.0.0.1", port, job.paths.job.job_id, job.paths.markers_dir, 1, 0, "server-id")
    job.store.write_bytes(job.paths.server_state, state.to_json())
    job.store.write_private_bytes(job.paths.secret, b"5" * 64)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_direct_type_writes_direct_markers_without_any_server(job: MarkerJob) -> None:
    client = MarkerClient(job.store, job.paths, job.retry, marker_type=mc.MarkerType.DIRECT)

    assert client.create("dt=1/a.csv") == Marker("dt=1/a.csv")

    assert job.store.info(job.paths.markers_dir + "/dt=1/a.csv.marker.CREATE") is not None
    assert client.fallbacks == 0


def test_an_unknown_marker_type_is_refused(job: MarkerJob) -> None:
    with pytest.raises(MarkerError, match="unknown marker type 'timeline'"):
        MarkerClient(job.store, job.paths, job.retry, marker_type="timeline")  # type: ignore[arg-type]


def test_no_published_server_falls_back_to_direct(job: MarkerJob) -> None:
    client = MarkerClient(job.store, job.paths, job.retry)

    client.create("a.csv")

    assert read_markers(job.store, job.paths, job.retry).direct_count == 1


def test_a_refused_connection_falls_back_at_once_and_for_good(job: MarkerJob) -> None:
    """Nothing listens where the published server was (its driver is gone; a restarted server publishes a new
    address): retrying under the policy only delayed every task's first marker by the backoff."""
    publish(job, free_port())
    stats = StatisticsStore()
    retry = RetryPolicy(attempts=3, initial_wait=0.001, is_retryable=job.store.is_transient, stats=stats)
    client = MarkerClient(job.store, job.paths, retry)

    client.create("a.csv")
    client.create("b.csv")  # no second round of retries: the server is known gone

    assert stats.snapshot().counters.get(STORE_IO_RETRY) is None
    assert client.fallbacks == 1
    assert read_markers(job.store, job.paths, job.retry).markers == {Marker("a.csv"), Marker("b.csv")}


def test_a_server_that_never_answers_costs_one_timeout_then_direct(job: MarkerJob) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections (the kernel does), never answers
        publish(job, silent.getsockname()[1])
        client = MarkerClient(job.store, job.paths, job.retry, timeout=0.2)

        start = time.perf_counter()
        for index in range(5):
            client.create(f"{index}.csv")
        elapsed = time.perf_counter() - start

    assert elapsed < 1.5
    assert client.fallbacks == 1
    assert len(read_markers(job.store, job.paths, job.retry).markers) == 5


def test_a_failed_flush_falls_back_to_direct_for_that_marker_only(job: MarkerJob) -> None:
    faulty = FaultInjectingStore(job.store)
    with job.with_store(faulty).server() as server:
        flush = "append_bytes" if job.store.capabilities.appendable else "write_bytes"
        faulty.add_fault(Fault(flush, path_contains="/MARKERS", times=3))  # every attempt of one flush
        client = MarkerClient(job.store, job.paths, job.retry)

        client.create("a.csv")  # the server answers 500: written directly
        client.create("b.csv")  # the server is alive, so it is asked again

        assert client.fallbacks == 1
        assert server.markers() == {Marker("b.csv")}
    found = read_markers(job.store, job.paths, job.retry)
    assert found.markers == {Marker("a.csv"), Marker("b.csv")}
    assert found.direct_count == 1


def test_a_marker_that_neither_kind_can_record_raises(job: MarkerJob) -> None:
    faulty = FaultInjectingStore(job.store, [Fault("write_bytes", times=None)])
    client = MarkerClient(faulty, job.paths, job.retry)  # no server, and the direct write fails too

    with pytest.raises(TimeoutError, match="injected"):
        client.create("a.csv")


def test_server_stopped_mid_job_every_returned_marker_is_read_back(job: MarkerJob) -> None:
    server = job.server().start()
    client = MarkerClient(job.store, job.paths, job.retry, timeout=2)
    returned: list[Marker] = []
    lock = threading.Lock()
    half = threading.Barrier(9)

    def write(task: int) -> None:
        for number in range(40):
            if number == 20:
                half.wait(10)
                half.wait(10)  # the server dies between the two waits
            marker = client.create(f"dt={task}/part-{number}.csv")
            with lock:
                returned.append(marker)

    with ThreadPoolExecutor(8) as pool:
        done = [pool.submit(write, task) for task in range(8)]
        half.wait(10)
        server.stop(flush=False)
        half.wait(10)
        for future in done:
            future.result()

    found = read_markers(job.store, job.paths, job.retry)
    assert found.markers == set(returned)
    assert len(returned) == 320
    assert found.batched_files and found.direct_count >= 160  # both kinds in one directory


def _server_process(destination: str, job_id: str) -> subprocess.Popen[bytes]:
    code = (
        "import sys, time\n"
        "from manifest_committer.markers import MarkerPaths, MarkerServer\n"
        "from manifest_committer.paths import JobPaths\n"
        "from manifest_committer.retry import RetryPolicy\n"
        "from manifest_committer.store import open_store\n"
        "opened = open_store(sys.argv[1])\n"
        "store, dest = opened.store, opened.path\n"
        "retry = RetryPolicy(attempts=3, initial_wait=0.001, is_retryable=store.is_transient)\n"
        "MarkerServer(store, MarkerPaths(JobPaths(dest, sys.argv[2], 0)), retry, batch_interval_ms=5).start()\n"
        "time.sleep(120)\n"
    )
    package_root = str(Path(manifest_committer.__file__).resolve().parent.parent)
    environment = {**os.environ, "PYTHONPATH": package_root}
    return subprocess.Popen([sys.executable, "-c", code, destination, job_id], env=environment)


def test_a_driver_killed_mid_job_loses_no_marker_of_tasks_in_other_processes(tmp_path: Path) -> None:
    """The server runs in its own process (the driver), found through server.json; SIGKILL it mid-job."""
    job = marker_job(str(tmp_path / "out"))
    driver = _server_process(str(tmp_path / "out"), job.paths.job.job_id)
    try:
        calls = MarkerStoreCalls(job.store, job.retry)
        deadline = time.monotonic() + 30
        while read_server_state(calls, job.paths) is None:
            assert time.monotonic() < deadline, "the marker server never published its address"
            time.sleep(0.05)
        client = MarkerClient(job.store, job.paths, job.retry, timeout=2)
        before = [client.create(f"dt={index % 3}/before-{index}.csv") for index in range(30)]
        assert client.fallbacks == 0
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        after = [client.create(f"dt={index % 3}/after-{index}.csv") for index in range(30)]
    finally:
        driver.kill()
        driver.wait(10)

    found = read_markers(job.store, job.paths, job.retry)
    assert found.markers == set(before) | set(after)
    assert found.batched and found.direct_count == 30
    assert client.fallbacks == 1


def test_tasks_in_other_processes_find_the_server(tmp_path: Path) -> None:
    job = marker_job(str(tmp_path / "out"))
    code = (
        "import sys\n"
        "from manifest_committer.markers import MarkerClient, MarkerPaths\n"
        "from manifest_committer.paths import JobPaths\n"
        "from manifest_committer.retry import RetryPolicy\n"
        "from manifest_committer.store import open_store\n"
        "opened = open_store(sys.argv[1])\n"
        "store, dest = opened.store, opened.path\n"
        "retry = RetryPolicy(attempts=3, initial_wait=0.001, is_retryable=store.is_transient)\n"
        "client = MarkerClient(store, MarkerPaths(JobPaths(dest, sys.argv[2], 0)), retry)\n"
        "for n in range(25):\n"
        "    client.create(f'task-{sys.argv[3]}/part-{n}.csv')\n"
        "sys.exit(client.fallbacks)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(Path(manifest_committer.__file__).resolve().parent.parent)}
    with MarkerServer(job.store, job.paths, job.retry, batch_interval_ms=5):
        tasks = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(tmp_path / "out"), job.paths.job.job_id, str(task)], env=environment
            )
            for task in range(3)
        ]
        assert [task.wait(60) for task in tasks] == [0, 0, 0]  # no task fell back

    found = read_markers(job.store, job.paths, job.retry)
    assert len(found.markers) == 75
    assert found.direct_count == 0


def test_both_kinds_on_the_cloud_emulators(cloud_destination: str) -> None:
    """Azurite and fake-gcs-server: batched through the server, direct after it stopped, all read back."""
    job = marker_job(cloud_destination)
    client = MarkerClient(job.store, job.paths, job.retry, timeout=5)
    with job.server() as server:
        batched = [client.create(f"dt={index % 2}/part-{index}.csv") for index in range(12)]
        assert server.markers() == set(batched)
    direct = client.create("dt=9/after-the-server.csv")

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {*batched, direct}
    assert found.batched and found.direct_count == 1
    assert found.data_files == {f"{job.paths.dest}/{marker.data_file}" for marker in found.markers}
    assert not [path for path in found.batched_files if path.endswith(".next")]  # no staged copies, on any store
