"""The task side: record a marker before creating a data file, through the marker server or directly.

With batched markers the client finds the server through the job's ``server.json`` and its secret through the
job's ``secret`` (``auth.py``), calls it with a short timeout, and retries only lost connections, under the
committer's retry policy. Whenever the server cannot give a durable answer that proves the job's secret (no
``server.json`` or secret, refused, unroutable or lost connections after the retries, a timeout, a failed flush,
an answer without the proof: a host a crafted ``server.json`` points to) the marker is written directly instead,
so a marker is never lost: the caller gets a marker back only once one of the two kinds holds it, and an
exception otherwise (and then must not create the data file). After the server was unreachable or timed out
once, this client writes direct markers only (a dead server would otherwise cost every marker the retries or
the timeout), and the process logs one warning per server address, not one per marker or per task.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import Any

import orjson

from ..config import MARKER_TYPES, MarkerType
from ..errors import MarkerError, MarkerServerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from . import auth
from .direct import DirectMarkers
from .layout import MARKER_EXTENSION, Marker, MarkerPaths, MarkerStoreCalls, parse_marker
from .server import CREATE_PATH, PING_PATH, ServerState

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""Seconds a task waits for the server's answer: a healthy flush takes one batch interval plus one store write."""
CONNECT_TIMEOUT = 5.0
"""Seconds a task waits for a connection: a host that drops packets must not hold every task for the full
answer timeout."""
MAX_ANSWER_BYTES = 1024 * 1024

_warned_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()


def warn_once(markers_dir: str, address: str, message: str, *args: object) -> None:
    """Log ``message`` once per process for this job's markers and this server address."""
    with _warned_lock:
        if (markers_dir, address) in _warned:
            log.debug(message, *args)
            return
        _warned.add((markers_dir, address))
    log.warning(message, *args)


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


def read_secret(calls: MarkerStoreCalls, paths: MarkerPaths) -> str | None:
    """The job's secret, or ``None`` if it is missing, not one, or not private (on local disk: another user's,
    or readable by others); the reason is logged."""
    try:
        data = calls.read_private_bytes(paths.secret)
    except FileNotFoundError:
        return None
    except PermissionError as error:
        log.warning("%s: not used as the job's secret: %s", paths.secret, describe_error(error))
        return None
    secret = auth.parse_secret(data)
    if secret is None:
        log.warning("%s: not a secret of this committer (64 hex digits)", paths.secret)
    return secret


class HttpConnection:
    """A minimal HTTP/1.1 keep-alive client for the marker server's JSON answers.

    ``http.client`` costs several times a raw socket exchange with the same server per request, most of it
    parsing headers through the email package; a task sends one request per data file, so the few lines below
    are worth it. Socket errors pass through (``ConnectionError``,
    ``TimeoutError``: the retry policy's business); a malformed answer is a ``MarkerServerError``.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._socket: socket.socket | None = None
        self._buffer = b""

    def request(self, method: str, path: str, body: Any = None, *, secret: str | None = None) -> tuple[int, Any, bool]:
        """Send one request and read its answer: the HTTP status, the decoded JSON body (or ``None``), and
        whether the answer proves ``secret`` (always ``False`` without one)."""
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), timeout=min(self.timeout, CONNECT_TIMEOUT))
            self._socket.settimeout(self.timeout)
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._buffer = b""
        payload = b"" if body is None else orjson.dumps(body)
        authorization = ""
        nonce = ""
        if secret is not None:
            nonce, value = auth.authorization(secret, method, path, payload)
            authorization = f"{auth.AUTHORIZATION}: {value}\r\n"
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{authorization}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self._socket.sendall(head.encode("ascii") + payload)
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > MAX_ANSWER_BYTES:
                raise MarkerServerError(f"marker server {self.host}:{self.port}: answer head too large")
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
        if not 0 <= length <= MAX_ANSWER_BYTES:
            raise MarkerServerError(f"marker server {self.host}:{self.port}: answer of {length} bytes")
        while len(self._buffer) < length:
            self._receive()
        data, self._buffer = self._buffer[:length], self._buffer[length:]
        if headers.get("connection", "").lower() == "close":
            self.close()
        status = int(parts[1])
        proved = secret is not None and auth.check_answer(secret, nonce, status, data, headers.get(auth.PROOF.lower()))
        try:
            return status, orjson.loads(data) if data else None, proved
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


def request_json(
    state: ServerState, method: str, path: str, body: Any = None, *, timeout: float, secret: str | None = None
) -> tuple[int, Any]:
    """One HTTP exchange with a marker server on a fresh connection. Returns status and JSON body; with
    ``secret``, an answer that does not prove it is a ``MarkerServerError``."""
    connection = HttpConnection(state.host, state.port, timeout)
    try:
        status, answer, proved = connection.request(method, path, body, secret=secret)
    finally:
        connection.close()
    if secret is not None and not proved and status != 401:
        raise MarkerServerError(f"marker server {state.host}:{state.port}: the answer does not prove the job's secret")
    return status, answer


def ping(state: ServerState, secret: str | None, *, timeout: float) -> bool:
    """True when the server ``state`` publishes answers as that server, proving the job's ``secret``. A checker
    that cannot read the secret cannot tell the server from an impostor: ``False`` (the lease decides)."""
    if secret is None:
        return False
    try:
        status, body = request_json(state, "GET", PING_PATH, timeout=timeout, secret=secret)
    except (OSError, MarkerServerError) as error:
        log.debug("Marker server %s:%d does not answer: %s", state.host, state.port, describe_error(error))
        return False
    return (
        status == 200
        and isinstance(body, dict)
        and body.get("markersDir") == state.markers_dir
        and body.get("serverId") == state.server_id
    )


class MarkerClient:
    """Creates markers for one task (any number of threads) of one job attempt."""

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        retry: RetryPolicy,
        *,
        marker_type: MarkerType = MarkerType.BATCHED,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if marker_type not in MARKER_TYPES:
            raise MarkerError(f"{paths.markers_dir}: unknown marker type {marker_type!r}; use direct or batched")
        self.paths = paths
        self.marker_type: MarkerType = marker_type
        self.timeout = timeout
        self._calls = MarkerStoreCalls(store, retry)
        self._direct = DirectMarkers(store, paths, retry)
        self._lock = threading.Lock()
        self._server: ServerState | None = None
        self._secret: str | None = None
        self._server_looked_up = False
        self._server_gone = marker_type is MarkerType.DIRECT
        self._local = threading.local()
        self.fallbacks = 0
        """Markers written directly because the server could not record them."""

    def create(self, data_file: str, io_type: str = "CREATE") -> Marker:
        """Record a marker for ``data_file`` (relative to the destination); returns once it is durable."""
        where = f"marker for {data_file!r} in {self.paths.markers_dir}"
        marker = parse_marker(f"{data_file}{MARKER_EXTENSION}{io_type}", where)
        state = None if self._server_gone else self._find_server()
        if state is not None:
            address = f"{state.host}:{state.port}"
            try:
                self._calls.retry.call(lambda: self._post(state, marker), f"marker server {address}")
                return marker
            except _ServerRefusedError as error:
                log.warning("%s: the marker server did not record it (%s); writing a direct marker", where, error)
                if error.status in (401, 503):  # refused or stopping: it will not record the next marker either
                    self._server_gone = True
            except (OSError, MarkerServerError) as error:
                warn_once(
                    self.paths.markers_dir,
                    address,
                    "Marker server %s of %s unreachable (%s); tasks of this process write direct markers instead",
                    address,
                    self.paths.markers_dir,
                    describe_error(error),
                )
                self._server_gone = True
            with self._lock:
                self.fallbacks += 1
        return self._direct.create(marker.data_file, marker.io_type)

    def _find_server(self) -> ServerState | None:
        with self._lock:
            if not self._server_looked_up:
                self._server_looked_up = True
                self._server = read_server_state(self._calls, self.paths)
                self._secret = read_secret(self._calls, self.paths) if self._server is not None else None
                if self._server is None or self._secret is None:
                    what = "no marker server published" if self._server is None else "no secret of the job readable"
                    warn_once(
                        self.paths.markers_dir, "", "%s: %s; writing direct markers", self.paths.markers_dir, what
                    )
                    self._server = None
                    self._server_gone = True
            return self._server

    def _post(self, state: ServerState, marker: Marker) -> None:
        """One request on this thread's keep-alive connection; a lost connection is dropped, then retried."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = HttpConnection(state.host, state.port, self.timeout)
            self._local.connection = connection
        try:
            status, body, proved = connection.request("POST", CREATE_PATH, {"marker": marker.name}, secret=self._secret)
        except TimeoutError as error:
            self._drop_connection()
            # Not retried: a server too slow to answer once will not be faster for this task's next try.
            raise MarkerServerError(f"no answer within {self.timeout} s") from error
        except ConnectionRefusedError as error:
            self._drop_connection()
            # Not retried either: nothing listens there (the driver that published it is gone). Retrying cost
            # every task seconds of backoff before its first direct marker.
            raise MarkerServerError("connection refused: no marker server listens there") from error
        except OSError as error:
            self._drop_connection()
            if not isinstance(error, ConnectionError):  # no route to the host, network unreachable: not lost
                raise MarkerServerError(f"cannot reach it: {describe_error(error)}") from error
            raise
        except BaseException:
            self._drop_connection()
            raise
        if status == 401:
            raise _ServerRefusedError(status, "the server did not accept the job's secret")
        if not proved:
            self._drop_connection()
            raise MarkerServerError("its answer does not prove the job's secret: not this job's marker server")
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
