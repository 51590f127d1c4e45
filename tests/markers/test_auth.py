"""The marker server's door: every request proves the job's secret, answers prove it back, and what a request may
be is bounded (head, body, connections). Raw sockets and ``http.client``, as an attacker would send them."""

from __future__ import annotations

import http.client
import os
import socket
import time
from pathlib import Path

import orjson
import pytest

from manifest_committer.markers import Marker, MarkerClient, MarkerServer, auth, read_markers
from manifest_committer.markers.client import HttpConnection, request_json
from manifest_committer.markers.server import CREATE_PATH, MAX_BODY_BYTES, MAX_HEAD_BYTES, PING_PATH
from tests.markers.conftest import MarkerJob, marker_job


def raw_exchange(server: MarkerServer, request: bytes) -> bytes:
    """Send bytes as they are; everything the server answers until it closes (or 5 s)."""
    assert server.state is not None
    with socket.create_connection((server.state.host, server.state.port), timeout=5) as connection:
        connection.sendall(request)
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
    return answer


def post_as(
    server: MarkerServer, secret: str, body: bytes, mac_body: bytes | None = None
) -> tuple[int, bytes, dict[str, str]]:
    """A POST whose Authorization is computed with ``secret`` over ``mac_body`` (default: the body sent)."""
    assert server.state is not None
    _, authorization = auth.authorization(secret, "POST", CREATE_PATH, body if mac_body is None else mac_body)
    connection = http.client.HTTPConnection(server.state.host, server.state.port, timeout=5)
    connection.request("POST", CREATE_PATH, body, {auth.AUTHORIZATION: authorization})
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, data, dict(answer.getheaders())


MARKER = orjson.dumps({"marker": "a.csv.marker.CREATE"})


@pytest.mark.parametrize("how", ["no header", "another secret", "another body", "another scheme"])
def test_a_request_that_does_not_prove_the_secret_is_401_and_records_nothing(server: MarkerServer, how: str) -> None:
    assert server.state is not None
    if how == "no header":
        connection = http.client.HTTPConnection(server.state.host, server.state.port, timeout=5)
        connection.request("POST", CREATE_PATH, MARKER)
        answer = connection.getresponse()
        status, data, headers = answer.status, answer.read(), dict(answer.getheaders())
    elif how == "another secret":
        status, data, headers = post_as(server, auth.new_secret(), MARKER)
    elif how == "another body":
        status, data, headers = post_as(server, server.secret, MARKER, mac_body=b"{}")
    else:
        connection = http.client.HTTPConnection(server.state.host, server.state.port, timeout=5)
        connection.request("POST", CREATE_PATH, MARKER, {auth.AUTHORIZATION: f"Bearer {server.secret}"})
        answer = connection.getresponse()
        status, data, headers = answer.status, answer.read(), dict(answer.getheaders())

    assert status == 401
    assert auth.PROOF not in headers and headers.get("WWW-Authenticate") == auth.SCHEME
    assert server.secret.encode() not in data
    assert server.markers() == frozenset() and server.refused == 1


def test_no_answer_discloses_the_secret(job: MarkerJob, server: MarkerServer) -> None:
    assert server.state is not None
    answers = [
        request_json(server.state, "GET", PING_PATH, timeout=5, secret=server.secret),
        request_json(
            server.state, "POST", CREATE_PATH, {"marker": "a.csv.marker.CREATE"}, timeout=5, secret=server.secret
        ),
        request_json(server.state, "GET", "/v1/markers/all", timeout=5, secret=server.secret),
        request_json(server.state, "GET", PING_PATH, timeout=5),
    ]
    published = job.store.read_bytes(job.paths.server_state)
    assert all(server.secret not in orjson.dumps(answer).decode() for answer in answers)
    assert server.secret.encode() not in published
    assert answers[0] == (200, server.identity())


def test_an_answer_that_does_not_prove_the_secret_is_not_believed(server: MarkerServer) -> None:
    assert server.state is not None
    connection = HttpConnection(server.state.host, server.state.port, 5)
    status, _, proved = connection.request("GET", PING_PATH, secret=auth.new_secret())  # not the job's
    connection.close()
    assert (status, proved) == (401, False)


def test_a_request_head_over_its_bound_is_431_and_closed(server: MarkerServer) -> None:
    padding = b"X-Padding: " + b"p" * MAX_HEAD_BYTES + b"\r\n"
    answer = raw_exchange(server, b"POST " + CREATE_PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n" + padding + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert server.markers() == frozenset()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (f"Content-Length: {MAX_BODY_BYTES + 1}\r\n", b"413"),
        ("Transfer-Encoding: chunked\r\n", b"400"),
        ("Content-Length: -5\r\n", b"400"),
    ],
)
def test_a_body_over_its_bound_or_of_unknown_length_is_refused_unread(
    server: MarkerServer, headers: str, status: bytes
) -> None:
    answer = raw_exchange(server, f"POST {CREATE_PATH} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 " + status + b" ")
    assert b"Connection: close" in answer
    assert server.markers() == frozenset()


def test_connections_beyond_the_bound_are_answered_503(job: MarkerJob) -> None:
    with MarkerServer(job.store, job.paths, job.retry, batch_interval_ms=5, max_connections=2) as server:
        assert server.state is not None
        held = [socket.create_connection((server.state.host, server.state.port), timeout=5) for _ in range(2)]
        try:
            refused = raw_exchange(server, b"")
            for connection in held:  # the admitted ones are served
                connection.close()
            deadline = time.monotonic() + 5
            while server._admitted and time.monotonic() < deadline:  # their threads see them closed
                time.sleep(0.01)
            client = MarkerClient(job.store, job.paths, job.retry)
            client.create("after.csv")
            client.close()
        finally:
            for connection in held:
                connection.close()
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert server.markers() == {Marker("after.csv")}


def test_a_secret_others_may_read_is_not_used_and_the_task_writes_direct_markers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = marker_job(str(tmp_path / "out"))
    with job.server() as server:
        assert (os.stat(job.paths.secret).st_mode & 0o777) == 0o600, "the secret is the owner's alone"
        os.chmod(job.paths.secret, 0o644)
        client = MarkerClient(job.store, job.paths, job.retry)

        client.create("a.csv")

        assert server.markers() == frozenset()
    assert read_markers(job.store, job.paths, job.retry).direct_count == 1
    assert f"{job.paths.secret}: not used as the job's secret" in caplog.text
    assert "mode 644" in caplog.text


def test_a_restarted_server_never_appends_to_a_file_a_crash_may_have_torn(job: MarkerJob) -> None:
    with job.server(batch_threads=2) as first:
        first.create(Marker("before.csv")).result(timeout=5)
    (written,) = read_markers(job.store, job.paths, job.retry).batched_files
    torn = job.store.read_bytes(written) + b"half-writ"
    job.store.write_bytes(written, torn)

    with job.server(batch_threads=2) as second:
        assert second.create(Marker("after.csv")).result(timeout=5) is True

    found = read_markers(job.store, job.paths, job.retry)
    assert job.store.read_bytes(written) == torn, "the torn file is left as it is"
    assert found.markers == {Marker("before.csv"), Marker("after.csv")}
    assert len(found.batched_files) == 2
