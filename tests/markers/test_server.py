"""The marker server: batched, durable before answering, failing a failed flush, reloading, 64 clients."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from manifest_committer.markers import (
    BATCHED,
    Marker,
    MarkerClient,
    MarkerServer,
    MarkerServerError,
    read_markers,
    read_server_state,
)
from manifest_committer.markers.client import HttpConnection, request_json
from manifest_committer.markers.layout import MarkerStoreCalls
from manifest_committer.markers.server import ALL_PATH, CREATE_PATH
from manifest_committer.store import Fault, FaultInjectingStore
from manifest_committer.store.wrapping import WrappingStore
from tests.markers.conftest import MarkerJob


def lines_in_files(job: MarkerJob) -> Counter[str]:
    """Every line of every MARKERS<i> file, counted: a marker recorded twice shows as 2."""
    counts: Counter[str] = Counter()
    for path in read_markers(job.store, job.paths, job.retry).batched_files:
        counts.update(line for line in job.store.read_bytes(path).decode().split("\n") if line)
    return counts


def post(server: MarkerServer, body: Any, path: str = CREATE_PATH) -> tuple[int, Any]:
    """A request proving the job's secret, as a task sends it."""
    assert server.state is not None
    return request_json(server.state, "POST", path, body, timeout=5, secret=server.secret)


def flush_operation(job: MarkerJob) -> str:
    """The store call a flush makes: an append where the store appends (local disk), else a whole write."""
    return "append_bytes" if job.store.capabilities.appendable else "write_bytes"


class GatedStore(WrappingStore):
    """Holds every write of a MARKERS file until ``release`` is set."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.release = threading.Event()

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        if operation in ("write_bytes", "append_bytes") and "/MARKERS" in path and not path.endswith("MARKERS.type"):
            assert self.release.wait(10)
        return call()


def test_server_publishes_its_address_and_declares_the_directory_batched(job: MarkerJob, server: MarkerServer) -> None:
    state = read_server_state(MarkerStoreCalls(job.store, job.retry), job.paths)

    assert state == server.state
    assert state is not None
    assert (state.host, state.port) == server.address
    assert job.store.read_bytes(job.paths.type_file) == BATCHED.encode()


def test_markers_over_http_land_in_markers_files(job: MarkerJob, server: MarkerServer) -> None:
    assert server.state is not None
    assert post(server, {"marker": "dt=1/a.csv.marker.CREATE"}) == (200, {"created": True})
    assert post(server, {"marker": "b.csv.marker.CREATE"}) == (200, {"created": True})

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("dt=1/a.csv"), Marker("b.csv")}
    assert found.direct_count == 0
    assert request_json(server.state, "GET", ALL_PATH, timeout=5, secret=server.secret) == (
        200,
        ["b.csv.marker.CREATE", "dt=1/a.csv.marker.CREATE"],
    )


def test_a_request_is_answered_only_once_its_batch_is_durable(job: MarkerJob) -> None:
    gated = GatedStore(job.store)
    with job.with_store(gated).server() as server:
        future = server.create(Marker("a.csv"))
        answered = threading.Event()
        future.add_done_callback(lambda _: answered.set())

        assert not answered.wait(0.3)  # many batch intervals: the flush is held, so no answer
        assert Marker("a.csv") not in read_markers(job.store, job.paths, job.retry).markers
        gated.release.set()

        assert future.result(timeout=5) is True
        assert Marker("a.csv") in read_markers(job.store, job.paths, job.retry).markers


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_flush_fails_every_request_of_its_batch(job: MarkerJob, when: str) -> None:
    """Hudi answered success after a failed flush (PR #19368): here the whole batch fails, even when the
    write took effect but its answer was lost."""
    faulty = FaultInjectingStore(job.store)
    with job.with_store(faulty).server(interval=50) as server:
        faulty.add_fault(Fault(flush_operation(job), path_contains="/MARKERS", when=when, times=None))  # type: ignore[arg-type]
        futures = [server.create(Marker(f"part-{index}.csv")) for index in range(5)]

        for future in futures:
            with pytest.raises(MarkerServerError, match="flushing 5 markers failed, none is recorded"):
                future.result(timeout=5)
        assert server.markers() == frozenset()
        assert faulty.injected[flush_operation(job)] == 3  # the retry policy's attempts, then the batch failed

        faulty.clear_faults()  # the same markers asked again are recorded: none is stuck "in flight"
        assert server.create(Marker("part-0.csv")).result(timeout=5) is True


def test_a_failed_flush_answers_500_over_http(job: MarkerJob) -> None:
    faulty = FaultInjectingStore(job.store)
    with job.with_store(faulty).server() as server:
        assert server.state is not None
        faulty.add_fault(Fault(flush_operation(job), path_contains="/MARKERS", times=None))

        status, body = post(server, {"marker": "a.csv.marker.CREATE"})

        assert status == 500
        assert "injected timeout" in body["error"]


def test_a_marker_already_recorded_is_not_written_again(job: MarkerJob, server: MarkerServer) -> None:
    assert server.create(Marker("a.csv")).result(timeout=5) is True
    assert server.create(Marker("a.csv")).result(timeout=5) is False
    same_batch = [server.create(Marker("b.csv")) for _ in range(3)]
    assert [future.result(timeout=5) for future in same_batch] == [True, True, True]

    assert lines_in_files(job) == {"a.csv.marker.CREATE": 1, "b.csv.marker.CREATE": 1}


def test_a_restarted_server_reloads_its_state_from_the_files(job: MarkerJob) -> None:
    with job.server(batch_threads=4) as first:
        for index in range(40):
            first.create(Marker(f"dt={index % 3}/first-{index}.csv"))
        first.create(Marker("last.csv")).result(timeout=5)

    with job.server(batch_threads=4) as second:
        assert len(second.markers()) == 41  # reloaded before serving
        again = [second.create(Marker(f"dt={index % 3}/first-{index}.csv")) for index in range(40)]
        assert not any(future.result(timeout=5) for future in again)
        new = [second.create(Marker(f"second-{index}.csv")) for index in range(40)]
        assert all(future.result(timeout=5) for future in new)

    counts = lines_in_files(job)
    assert len(counts) == 81
    assert set(counts.values()) == {1}  # reload then more creates corrupted nothing (Hudi's comma join)
    assert len(read_markers(job.store, job.paths, job.retry).markers) == 81


def test_at_most_batch_threads_markers_files(job: MarkerJob) -> None:
    with job.server(batch_threads=3, interval=1) as server, ThreadPoolExecutor(16) as pool:
        futures = list(pool.map(lambda index: server.create(Marker(f"p-{index}.csv")), range(400)))
        assert all(future.result(timeout=10) for future in futures)

    found = read_markers(job.store, job.paths, job.retry)
    assert len(found.markers) == 400
    assert {path.rsplit("/", 1)[1] for path in found.batched_files} <= {"MARKERS0", "MARKERS1", "MARKERS2"}


@pytest.mark.parametrize(
    ("body", "path", "status"),
    [
        ({"marker": "/abs.csv.marker.CREATE"}, CREATE_PATH, 400),
        ({"marker": "../x.csv.marker.CREATE"}, CREATE_PATH, 400),
        ({"marker": 7}, CREATE_PATH, 400),
        ({"name": "a.csv.marker.CREATE"}, CREATE_PATH, 400),
        (["a.csv.marker.CREATE"], CREATE_PATH, 400),
        ({"marker": "a.csv.marker.CREATE"}, "/v1/markers/other", 404),
    ],
)
def test_bad_requests_are_refused_and_record_nothing(
    job: MarkerJob, server: MarkerServer, body: Any, path: str, status: int
) -> None:
    answer, _ = post(server, body, path)
    assert answer == status
    assert server.markers() == frozenset()


def test_a_body_that_is_not_json_is_refused(server: MarkerServer) -> None:
    assert server.state is not None
    connection = HttpConnection(server.state.host, server.state.port, 5)
    # The client sends JSON; a body of raw text through the same authenticated path:
    status, _, proved = connection.request("POST", CREATE_PATH, "{not json", secret=server.secret)
    connection.close()
    assert (status, proved) == (400, True)
    assert server.markers() == frozenset()


def test_stopping_without_flush_fails_what_waits(job: MarkerJob) -> None:
    gated = GatedStore(job.store)
    server = job.with_store(gated).server().start()
    waiting = server.create(Marker("a.csv"))
    server.stop(flush=False)
    gated.release.set()

    late = server.create(Marker("b.csv"))
    with pytest.raises(MarkerServerError, match="stopped"):
        late.result(timeout=5)
    # The batch held at the store when the server died may complete or not; it never reports a false success.
    if waiting.exception(timeout=5) is None:
        assert Marker("a.csv") in read_markers(job.store, job.paths, job.retry).markers


def test_stop_flushes_what_is_pending(job: MarkerJob) -> None:
    server = job.server(interval=10_000).start()  # no batch before the stop
    futures = [server.create(Marker(f"{index}.csv")) for index in range(10)]
    server.stop()
    assert all(future.result(timeout=5) for future in futures)
    assert len(read_markers(job.store, job.paths, job.retry).markers) == 10


def test_64_concurrent_clients_every_marker_exactly_once(job: MarkerJob) -> None:
    clients, per_client = 64, 40
    with job.server(interval=10) as server:
        client = MarkerClient(job.store, job.paths, job.retry)

        def write(index: int) -> None:
            for number in range(per_client):
                client.create(f"dt={number % 4}/task-{index}-part-{number}.csv")
            client.close()

        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(write, range(clients)))
        assert client.fallbacks == 0
        flushes = server.flushes

    counts = lines_in_files(job)
    assert len(counts) == clients * per_client
    assert set(counts.values()) == {1}
    assert flushes < clients * per_client / 4  # batched, not one write per marker
    found = read_markers(job.store, job.paths, job.retry)
    assert found.direct_count == 0
    assert len(found.data_files) == clients * per_client


def test_server_state_file_is_checked(job: MarkerJob) -> None:
    from manifest_committer.markers import MarkerError

    job.store.write_bytes(job.paths.server_state, orjson.dumps({"host": "127.0.0.1"}))
    with pytest.raises(MarkerError, match=r"server\.json: not a marker server state"):
        read_server_state(MarkerStoreCalls(job.store, job.retry), job.paths)
