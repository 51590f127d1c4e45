"""The task side: record a marker before creating a data file, through the marker server or directly.

With batched markers the client finds the server through the job's ``server.json``, calls it with a short
timeout, and retries only lost connections, under the committer's retry policy. Whenever the server cannot
give a durable answer (no ``server.json``, refused or lost connections after the retries, a timeout, a failed
flush) the marker is written directly instead, so a marker is never lost: the caller gets a marker back only
once one of the two kinds holds it, and an exception otherwise (and then must not create the data file).
After the server was unreachable or timed out once, this client writes direct markers only (a dead server
would otherwise cost every marker the retries or the timeout); a failed flush is per batch and does not.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import Any, Literal

import orjson

from ..errors import MarkerError, MarkerServerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from .direct import DirectMarkers
from .layout import MARKER_EXTENSION, Marker, MarkerPaths, MarkerStoreCalls, parse_marker
from .server import CREATE_PATH, PING_PATH, ServerState

log = logging.getLogger(__name__)

MarkerType = Literal["direct", "batched"]
DEFAULT_TIMEOUT = 10.0
"""Seconds a task waits for the server's answer: a healthy flush takes one batch interval plus one store write."""


class _ServerRefusedError(Exception):
    """An HTTP answer other than 200: the server is alive but did not record the marker."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def read_server_state(calls: MarkerStoreCalls, paths: MarkerPaths) -> ServerState | None:
    """The published marker server of a job attempt, or ``None`` if it never published one."""
    try:
        data = calls.read_bytes(paths.server_state)
    except FileNotFoundError:
        return None
    return ServerState.from_json(data, paths.server_state)


class HttpConnection:
    """A minimal HTTP/1.1 keep-alive client for the marker server's JSON answers.

    ``http.client`` costs about 0.6 ms per request here (measured: a raw socket exchange with the same server
    takes 0.1 ms), most of it parsing headers through the email package; a task sends one request per data
    file, so the few lines below are worth it. Socket errors pass through (``ConnectionError``,
    ``TimeoutError``: the retry policy's business); a malformed answer is a ``MarkerServerError``.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._socket: socket.socket | None = None
        self._buffer = b""

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one request and read its answer: the HTTP status and the decoded JSON body (or ``None``)."""
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._buffer = b""
        payload = b"" if body is None else orjson.dumps(body)
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self._socket.sendall(head.encode("ascii") + payload)
        while b"\r\n\r\n" not in self._buffer:
            self._receive()
        header_block, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        lines = header_block.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise MarkerServerError(f"marker server {self.host}:{self.port}: bad status line {lines[0][:100]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise MarkerServerError(f"marker server {self.host}:{self.port}: bad Content-Length") from None
        while len(self._buffer) < length:
            self._receive()
        data, self._buffer = self._buffer[:length], self._buffer[length:]
        if headers.get("connection", "").lower() == "close":
            self.close()
        try:
            return int(parts[1]), orjson.loads(data) if data else None
        except orjson.JSONDecodeError as error:
            raise MarkerServerError(f"marker server {self.host}:{self.port}: answer is not JSON ({error})") from None

    def _receive(self) -> None:
        assert self._socket is not None
        chunk = self._socket.recv(65536)
        if not chunk:
            raise ConnectionResetError(f"marker server {self.host}:{self.port} closed the connection")
        self._buffer += chunk

    def close(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
            self._buffer = b""


def request_json(state: ServerState, method: str, path: str, body: Any = None, *, timeout: float) -> tuple[int, Any]:
    """One HTTP exchange with a marker server on a fresh connection. Returns status and JSON body."""
    connection = HttpConnection(state.host, state.port, timeout)
    try:
        return connection.request(method, path, body)
    finally:
        connection.close()


def ping(state: ServerState, *, timeout: float) -> bool:
    """True when the server ``state`` publishes answers, as the same server (token and markers directory)."""
    try:
        status, body = request_json(state, "GET", PING_PATH, timeout=timeout)
    except (OSError, MarkerServerError) as error:
        log.debug("Marker server %s:%d does not answer: %s", state.host, state.port, describe_error(error))
        return False
    return (
        status == 200
        and isinstance(body, dict)
        and body.get("token") == state.token
        and body.get("markersDir") == state.markers_dir
    )


class MarkerClient:
    """Creates markers for one task (any number of threads) of one job attempt."""

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        retry: RetryPolicy,
        *,
        marker_type: MarkerType = "batched",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if marker_type not in ("direct", "batched"):
            raise MarkerError(f"{paths.markers_dir}: unknown marker type {marker_type!r}; use direct or batched")
        self.paths = paths
        self.marker_type: MarkerType = marker_type
        self.timeout = timeout
        self._calls = MarkerStoreCalls(store, retry)
        self._direct = DirectMarkers(store, paths, retry)
        self._lock = threading.Lock()
        self._server: ServerState | None = None
        self._server_looked_up = False
        self._server_gone = marker_type == "direct"
        self._local = threading.local()
        self.fallbacks = 0
        """Markers written directly because the server could not record them."""

    def create(self, data_file: str, io_type: str = "CREATE") -> Marker:
        """Record a marker for ``data_file`` (relative to the destination); returns once it is durable."""
        where = f"marker for {data_file!r} in {self.paths.markers_dir}"
        marker = parse_marker(f"{data_file}{MARKER_EXTENSION}{io_type}", where)
        state = None if self._server_gone else self._find_server()
        if state is not None:
            try:
                self._calls.retry.call(lambda: self._post(state, marker), f"marker server {state.host}:{state.port}")
                return marker
            except _ServerRefusedError as error:
                log.warning("%s: the marker server did not record it (%s); writing a direct marker", where, error)
                if error.status == 503:  # stopping: it will not answer the next marker either
                    self._server_gone = True
            except (OSError, MarkerServerError) as error:
                log.warning(
                    "%s: marker server %s:%d unreachable (%s); this task writes direct markers from now on",
                    where,
                    state.host,
                    state.port,
                    describe_error(error),
                )
                self._server_gone = True
            with self._lock:
                self.fallbacks += 1
        return self._direct.create(marker.data_file, marker.io_type)

    def _find_server(self) -> ServerState | None:
        with self._lock:
            if not self._server_looked_up:
                self._server = read_server_state(self._calls, self.paths)
                self._server_looked_up = True
                if self._server is None:
                    log.warning("%s: no marker server published; writing direct markers", self.paths.server_state)
                    self._server_gone = True
            return self._server

    def _post(self, state: ServerState, marker: Marker) -> None:
        """One request on this thread's keep-alive connection; a lost connection is dropped, then retried."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = HttpConnection(state.host, state.port, self.timeout)
            self._local.connection = connection
        try:
            status, body = connection.request("POST", CREATE_PATH, {"marker": marker.name})
        except TimeoutError as error:
            self._drop_connection()
            # Not retried: a server too slow to answer once will not be faster for this task's next try.
            raise MarkerServerError(f"no answer within {self.timeout} s") from error
        except ConnectionRefusedError as error:
            self._drop_connection()
            # Not retried either: nothing listens there (the driver that published it is gone). Retrying cost
            # every task about 3.5 s of backoff before its first direct marker (measured under Spark).
            raise MarkerServerError("connection refused: no marker server listens there") from error
        except BaseException:
            self._drop_connection()
            raise
        if status != 200:
            message = body.get("error", "") if isinstance(body, dict) else ""
            raise _ServerRefusedError(status, str(message))

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """Close this thread's connection (other threads' connections close when their threads end)."""
        self._drop_connection()
