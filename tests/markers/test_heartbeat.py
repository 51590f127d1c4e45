"""Is a job's driver gone? The heartbeat of direct-marker jobs, and the marker server's answer for batched."""

from __future__ import annotations

import time

import orjson
import pytest

from manifest_committer.markers import Heartbeat, MarkerError, ServerState, job_liveness, read_heartbeat
from manifest_committer.store import Fault, FaultInjectingStore
from tests.markers.conftest import MarkerJob


def test_heartbeat_is_an_object_in_the_jobs_state_holding_the_drivers_time(job: MarkerJob) -> None:
    Heartbeat(job.store, job.paths, job.retry).beat(now=1_000.5)

    document = orjson.loads(job.store.read_bytes(job.paths.heartbeat))
    assert document["timestampMs"] == 1_000_500
    assert document["jobId"] == job.paths.job.job_id
    assert read_heartbeat(job.store, job.paths, job.retry) == 1_000.5


def test_a_running_heartbeat_keeps_the_job_alive_and_a_stopped_one_expires(job: MarkerJob) -> None:
    # Generous expiry: on a loaded 2-core machine a beat thread may wait well beyond its interval.
    with Heartbeat(job.store, job.paths, job.retry, expiry_seconds=5.0, interval=0.02):
        first = read_heartbeat(job.store, job.paths, job.retry)
        time.sleep(0.3)
        assert not job_liveness(job.store, job.paths, job.retry, expiry_seconds=5.0).dead
        last = read_heartbeat(job.store, job.paths, job.retry)
        assert first is not None and last is not None and last > first
    stopped = read_heartbeat(job.store, job.paths, job.retry)
    time.sleep(0.1)
    assert read_heartbeat(job.store, job.paths, job.retry) == stopped, "no beat after the heartbeat stopped"
    assert stopped is not None

    liveness = job_liveness(job.store, job.paths, job.retry, expiry_seconds=5.0, now=stopped + 5.1)

    assert liveness.dead
    assert "expiry 5 s" in liveness.reason


@pytest.mark.parametrize(("age", "dead"), [(119.0, False), (121.0, True)])
def test_expiry_decides(job: MarkerJob, age: float, dead: bool) -> None:
    Heartbeat(job.store, job.paths, job.retry).beat(now=10_000.0)
    assert job_liveness(job.store, job.paths, job.retry, now=10_000.0 + age).dead is dead


def test_a_job_that_published_nothing_is_dead(job: MarkerJob) -> None:
    liveness = job_liveness(job.store, job.paths, job.retry)
    assert liveness.dead
    assert "no marker server and no heartbeat" in liveness.reason


def test_a_missed_beat_is_logged_not_fatal(job: MarkerJob, caplog: pytest.LogCaptureFixture) -> None:
    faulty = FaultInjectingStore(job.store)
    with Heartbeat(faulty, job.paths, job.with_store(faulty).retry, interval=0.02):
        faulty.add_fault(Fault("write_bytes", path_contains="heartbeat", times=6))
        time.sleep(0.3)
        assert faulty.injected["write_bytes"] == 6
    assert "not written" in caplog.text
    assert not job_liveness(job.store, job.paths, job.retry).dead


def test_a_corrupt_heartbeat_is_an_error_naming_it(job: MarkerJob) -> None:
    job.store.write_bytes(job.paths.heartbeat, b"yesterday")
    with pytest.raises(MarkerError, match=r"heartbeat: not a heartbeat"):
        job_liveness(job.store, job.paths, job.retry)


def test_a_batched_job_is_alive_while_its_server_answers(job: MarkerJob) -> None:
    server = job.server().start()
    assert not job_liveness(job.store, job.paths, job.retry).dead
    server.stop()

    liveness = job_liveness(job.store, job.paths, job.retry, timeout=0.5)

    assert liveness.dead
    assert "does not answer" in liveness.reason


def test_another_server_on_the_published_port_does_not_keep_the_job_alive(job: MarkerJob) -> None:
    """After a driver died, its port may be reused by another server: the server id tells them apart."""
    other = job.server().start()
    try:
        assert other.state is not None
        stale = ServerState(other.state.host, other.state.port, "job", job.paths.markers_dir, 1, 0, "dead-drivers-id")
        job.store.write_bytes(job.paths.server_state, stale.to_json())
        assert job_liveness(job.store, job.paths, job.retry).dead
    finally:
        other.stop()


def test_a_heartbeat_never_brings_back_the_state_of_a_job_that_ended_elsewhere(job: MarkerJob) -> None:
    """The driver still holds the job while another process commits it and deletes its state (Spark's data
    source): the next beat finds the state gone and stops, instead of writing a heartbeat into nothing."""
    heartbeat = Heartbeat(job.store, job.paths, job.retry, interval=0.02).start()
    job.store.delete_dir(job.paths.markers_dir)  # the commit's cleanup, in another process
    time.sleep(0.2)
    heartbeat.stop()

    assert job.store.info(job.paths.markers_dir) is None
