"""The marker server: runs in the driver, takes marker requests over HTTP from every task, writes them in batches.

Why the standard library's ``ThreadingHTTPServer`` and not aiohttp: markers must work on every install, and
aiohttp only arrives with the cloud extras; every request's work is blocking (it waits for a durable flush
through the synchronous store layer), so an asyncio loop would need its own thread in the driver and a bridge
to the flush threads, for no gain at this scale: a job's concurrent clients are as many mostly idle
threads, each holding one keep-alive connection (``benchmarks/bench_markers.py`` measures it).

Lessons taken from Hudi's timeline-server markers (docs/markers.md):

- a request is answered only once its batch is durable, and a failed flush fails every request of its batch
  (Hudi answered success after a failed flush);
- ``MARKERS.type`` is written before any ``MARKERS<i>``, so the directory always says how to read it;
- a restarted server reloads what the ``MARKERS<i>`` files record, line by line (Hudi rejoined them with commas
  and corrupted the next flush), and writes into new files: it never appends to a file a crash may have torn;
- a file grows by its batches, not by rewriting everything it holds at every flush (Hudi's flush rewrites the
  whole file, so a flood of markers costs the square of their number);
- readers and rollback need only the files (``reader.read_markers``), never this server;
- the server is reachable from the cluster's other hosts (``address.py``) and answers only requests that prove
  the job's secret (``auth.py``; Hudi's timeline server trusted whoever connected).

Batching: requests wait in ``pending``; every ``batch.interval.ms`` the scheduler takes them all as one batch
and hands it, with a free *slot* (at most ``batch.threads``, each writing one ``MARKERS<i>`` at a time), to a
flush thread. Where the store appends (local disk: ``O_APPEND`` and ``fsync``) the batch's lines are appended to
the slot's file. Elsewhere (object stores replace objects whole) the slot's file is rewritten with its earlier
lines plus the batch, but a file holds at most ``MAX_LINES_PER_REWRITTEN_FILE`` lines before the slot moves on to
a new file, so a flush costs at most that many lines plus its own batch. A slot's first files are
``MARKERS0`` ... ``MARKERS<threads-1>`` (Hudi's layout); later ones take the next free index. A failed write or
append fails the batch and retires the file (a failed append may have left part of a line at its end, which the
reader drops); the slot goes on in a new file.

HTTP API (JSON bodies; every request carries ``Authorization``, every authenticated answer ``X-Marker-Proof``)::

    POST /v1/markers/create  {"marker": "dt=1/part-0.parquet.marker.CREATE"}   (one marker a request)
         200 {"created": true}   recorded by this request's batch (false: it was already recorded)
         400 {"error": ...}      not a marker this job may record (absolute, "..", NUL, ...), or a bad request
         401 {"error": ...}      no proof of the job's secret: nothing recorded
         413 / 431               a body over MAX_BODY_BYTES, a request head over MAX_HEAD_BYTES
         500 {"error": ...}      the batch's flush failed: nothing about this marker is promised
         503 {"error": ...}      the server is stopping, or holds MAX_CONNECTIONS connections already
    GET  /v1/markers/ping    200 {"serverId": ..., "markersDir": ..., "jobId": ...}   liveness and identity
    GET  /v1/markers/all     200 ["dt=1/part-0.parquet.marker.CREATE", ...]
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from ..errors import MarkerError, MarkerServerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from . import auth
from .layout import BATCHED, Marker, MarkerPaths, MarkerStoreCalls, batched_file_index, parse_marker
from .reader import parse_batched_lines, read_marker_type

log = logging.getLogger(__name__)

API_PREFIX = "/v1/markers"
CREATE_PATH = API_PREFIX + "/create"
PING_PATH = API_PREFIX + "/ping"
ALL_PATH = API_PREFIX + "/all"
MAX_BODY_BYTES = 16 * 1024
"""A request's body: one marker (a path of at most a few KiB) in JSON."""
MAX_HEAD_BYTES = 8 * 1024
"""A request's line and headers together: the client sends about 250 bytes."""
MAX_CONNECTIONS = 1024
"""Connections served at once (a thread each); beyond it a new connection is answered 503 and closed."""
IDLE_TIMEOUT = 300.0
"""Seconds a keep-alive connection may wait for its next request before the server closes it."""
MAX_LINES_PER_REWRITTEN_FILE = 2000
"""Lines a ``MARKERS<i>`` file holds, on a store that cannot append, before its slot moves on to a new file."""
MAX_HOST_LENGTH = 255


@dataclass(frozen=True, slots=True)
class ServerState:
    """What ``server.json`` publishes: where tasks find the server, and which server it is. Never the secret."""

    host: str
    port: int
    job_id: str
    markers_dir: str
    pid: int
    started_ms: int
    server_id: str = ""
    """A random id of this server, which it answers ``ping`` with: a restarted server is another one."""

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "host": self.host,
                "port": self.port,
                "serverId": self.server_id,
                "jobId": self.job_id,
                "markersDir": self.markers_dir,
                "pid": self.pid,
                "startedMs": self.started_ms,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, path: str) -> ServerState:
        """Parse ``server.json``; ``MarkerError`` naming the file if it is not one (an address with a line
        break or space, a port out of range)."""
        try:
            raw = orjson.loads(data)
            state = cls(
                host=str(raw["host"]),
                port=int(raw["port"]),
                job_id=str(raw["jobId"]),
                markers_dir=str(raw["markersDir"]),
                pid=int(raw.get("pid", 0)),
                started_ms=int(raw.get("startedMs", 0)),
                server_id=str(raw.get("serverId", "")),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise MarkerError(f"{path}: not a marker server state ({describe_error(error)})") from None
        if not 0 < state.port < 65536:
            raise MarkerError(f"{path}: port {state.port} out of range")
        if not state.host or len(state.host) > MAX_HOST_LENGTH or not state.host.isprintable() or " " in state.host:
            raise MarkerError(f"{path}: {state.host[:100]!r} is not a host name or address")
        return state


class _HeadTooLargeError(Exception):
    """The request line and headers exceed ``MAX_HEAD_BYTES``."""


class _BoundedInput:
    """The connection's input, with a budget for the request line and headers of each request."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.remaining = MAX_HEAD_BYTES

    def readline(self, limit: int = -1) -> bytes:
        if self.remaining <= 0:
            raise _HeadTooLargeError
        allowed = self.remaining if limit is None or limit < 0 else min(limit, self.remaining)
        line: bytes = self._raw.readline(allowed)
        self.remaining -= len(line)
        if self.remaining <= 0 and not line.endswith(b"\n"):
            raise _HeadTooLargeError
        return line

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._raw.read(size)
        return data

    def close(self) -> None:
        self._raw.close()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # every task's clients connect at once; a small backlog makes them wait on SYN retries
    marker_server: MarkerServer

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.marker_server._admit_connection():
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            super().shutdown_request(request)  # never admitted: nothing to release
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        """The end of every admitted connection (its thread's, or a thread that could not start)."""
        super().shutdown_request(request)
        self.marker_server._release_connection()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone, or a connection cut by stop(): nothing for stderr.
        log.debug("marker server: connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread, not one per marker
    disable_nagle_algorithm = True  # headers and body go out in two writes: Nagle + delayed ACK would stall each answer
    timeout = IDLE_TIMEOUT
    server: _HTTPServer
    _nonce: str | None = None

    def setup(self) -> None:
        super().setup()
        self.rfile = _BoundedInput(self.rfile)  # type: ignore[assignment]
        self.server.marker_server._connection_opened(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.marker_server._connection_closed(self.connection)

    def handle_one_request(self) -> None:
        self.rfile.remaining = MAX_HEAD_BYTES  # type: ignore[attr-defined]
        self._nonce = None
        try:
            super().handle_one_request()
        except _HeadTooLargeError:
            self.close_connection = True
            self._answer(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, {"error": "request head too large"})

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("marker server %s: " + format, self.address_string(), *args)

    def _answer(self, status: HTTPStatus, body: Any) -> None:
        owner = self.server.marker_server
        data = orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self._nonce is not None:
            self.send_header(auth.PROOF, auth.answer_proof(owner.secret, self._nonce, status, data))
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", auth.SCHEME)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes | None:
        """The request's body (``b""`` without one); ``None`` after answering a body that is refused unread."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._answer(HTTPStatus.BAD_REQUEST, {"error": "a body needs a Content-Length"})
            return None
        text = self.headers.get("Content-Length") or "0"
        length = int(text) if text.isdigit() else -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True
            status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > 0 else HTTPStatus.BAD_REQUEST
            self._answer(status, {"error": f"a body of at most {MAX_BODY_BYTES} bytes, with its Content-Length"})
            return None
        return self.rfile.read(length) if length else b""

    def _authenticated(self, method: str, body: bytes) -> bool:
        owner = self.server.marker_server
        nonce = auth.check_authorization(owner.secret, self.headers.get(auth.AUTHORIZATION), method, self.path, body)
        if nonce is None:
            owner.refused += 1
            log.warning(
                "Marker server of %s: refused %s %s from %s without the job's secret",
                owner.paths.markers_dir,
                method,
                self.path[:100],
                self.client_address[0],
            )
            self._answer(HTTPStatus.UNAUTHORIZED, {"error": "this request does not prove the job's secret"})
            return False
        self._nonce = nonce
        return True

    def do_GET(self) -> None:
        body = self._body()
        if body is None or not self._authenticated("GET", body):
            return
        owner = self.server.marker_server
        if self.path == PING_PATH:
            self._answer(HTTPStatus.OK, owner.identity())
        elif self.path == ALL_PATH:
            self._answer(HTTPStatus.OK, sorted(marker.name for marker in owner.markers()))
        else:
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint {self.path[:100]}"})

    def do_POST(self) -> None:
        body = self._body()
        if body is None or not self._authenticated("POST", body):
            return
        owner = self.server.marker_server
        if self.path != CREATE_PATH:
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"expected POST {CREATE_PATH}"})
            return
        where = f"marker request from {self.client_address[0]}:{self.client_address[1]}"
        try:
            raw = orjson.loads(body)
            marker = parse_marker(raw["marker"] if isinstance(raw, dict) else None, where)
        except (orjson.JSONDecodeError, KeyError, MarkerError) as error:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": describe_error(error)})
            return
        try:
            created = owner.create(marker).result()
        except MarkerServerError as error:
            status = HTTPStatus.SERVICE_UNAVAILABLE if owner.closed else HTTPStatus.INTERNAL_SERVER_ERROR
            self._answer(status, {"error": str(error)})
            return
        self._answer(HTTPStatus.OK, {"created": created})


@dataclass(slots=True)
class _Slot:
    """One writer of ``MARKERS`` files: the index of its current file and, where files are rewritten, its lines."""

    index: int
    lines: list[str] = field(default_factory=list)
    written: int = 0
    """Lines in the current file."""


class MarkerServer:
    """Batches markers of one job attempt into ``MARKERS<i>`` files, ``batch_threads`` at a time; see the module.

    ``create`` is the in-process entry point (the HTTP handler calls it); the returned future completes with
    ``True`` once the marker's batch is durable, ``False`` at once if the marker was already recorded, and
    ``MarkerServerError`` if its batch's flush failed (after the store retry policy gave up). ``secret``: the
    job's secret every request must prove, written to the job's state at ``start`` (a new one when not given).
    ``host`` is where it listens, ``advertised_host`` (default: ``host``) what ``server.json`` publishes.
    """

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        retry: RetryPolicy,
        *,
        secret: str | None = None,
        batch_interval_ms: int = 50,
        batch_threads: int = 20,
        host: str = "127.0.0.1",
        port: int = 0,
        advertised_host: str | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if batch_threads < 1 or batch_interval_ms < 1:
            raise ValueError("batch_threads and batch_interval_ms must be at least 1")
        self._calls = MarkerStoreCalls(store, retry)
        self._append = store.capabilities.appendable
        self.paths = paths
        self.secret = secret or auth.new_secret()
        self.batch_interval = batch_interval_ms / 1000.0
        self.batch_threads = batch_threads
        self.max_connections = max_connections
        self._host = host
        self._port = port
        self._advertised = advertised_host or host
        self._lock = threading.Lock()
        self._recorded: set[Marker] = set()
        self._pending: dict[Marker, Future[bool]] = {}
        self._in_flight: dict[Marker, Future[bool]] = {}
        self._free_slots: queue.Queue[_Slot] = queue.Queue()
        self._next_index = 0
        self._connections: set[socket.socket] = set()
        self._admitted = 0
        self._stopping = threading.Event()
        self.closed = False
        self._server_id = uuid.uuid4().hex
        self._http: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._flushers: ThreadPoolExecutor | None = None
        self.state: ServerState | None = None
        self.flushes = 0
        """Flushes that completed durably (for tests and the benchmark)."""
        self.refused = 0
        """Requests answered 401: they did not prove the secret."""

    # --- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> MarkerServer:
        """Reload what the files hold, keep the secret in the job's state (private), declare the directory
        batched, listen, and publish the address (never the secret)."""
        self._calls.write_private_bytes(self.paths.secret, self.secret.encode("ascii"))
        self._reload()
        if read_marker_type(self._calls, self.paths) is None:
            self._calls.write_bytes(self.paths.type_file, BATCHED.encode())
        http = _HTTPServer((self._host, self._port), _Handler)
        http.marker_server = self
        self._http = http
        port = int(http.server_address[1])
        self.state = ServerState(
            host=self._advertised,
            port=port,
            job_id=self.paths.job.job_id,
            markers_dir=self.paths.markers_dir,
            pid=os.getpid(),
            started_ms=int(time.time() * 1000),
            server_id=self._server_id,
        )
        self._flushers = ThreadPoolExecutor(self.batch_threads, thread_name_prefix="marker-flush")
        serve = lambda: http.serve_forever(poll_interval=0.05)  # noqa: E731  (shutdown waits one poll)
        for target, name in ((serve, "marker-http"), (self._schedule, "marker-batches")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self._calls.write_bytes(self.paths.server_state, self.state.to_json())
        log.info(
            "Marker server for %s listening on %s:%d, published as %s:%d (%d markers reloaded)",
            self.paths.markers_dir,
            self._host,
            port,
            self._advertised,
            port,
            len(self._recorded),
        )
        return self

    def stop(self, *, flush: bool = True) -> None:
        """Stop serving; with ``flush`` the waiting markers are written first (their requests answered).

        ``flush=False`` drops everything at once, answering nobody: what a killed driver looks like to tasks.
        """
        if self.closed:
            return
        if flush:
            self._drain()
        self.closed = True
        self._stopping.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        with self._lock:
            connections = list(self._connections)
            orphans = list(self._pending.values())
            self._pending.clear()
        for connection in connections:  # keep-alive connections would otherwise go on being served
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for future in orphans:
            if not future.done():
                future.set_exception(MarkerServerError(f"marker server of {self.paths.markers_dir} stopped"))
        if self._flushers is not None:
            self._flushers.shutdown(wait=flush)
        for thread in self._threads:
            thread.join(timeout=5)
        log.info("Marker server for %s stopped (%d markers)", self.paths.markers_dir, len(self._recorded))

    def __enter__(self) -> MarkerServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        if self.state is None:
            raise MarkerServerError(f"marker server of {self.paths.markers_dir} not started")
        return self.state.host, self.state.port

    def identity(self) -> dict[str, str]:
        return {"serverId": self._server_id, "markersDir": self.paths.markers_dir, "jobId": self.paths.job.job_id}

    def markers(self) -> frozenset[Marker]:
        """The markers recorded durably."""
        with self._lock:
            return frozenset(self._recorded)

    # --- requests -----------------------------------------------------------------------------------------------

    def create(self, marker: Marker) -> Future[bool]:
        """Queue a marker for the next batch; a marker already recorded or queued is not written twice."""
        with self._lock:
            if self.closed:
                future: Future[bool] = Future()
                future.set_exception(MarkerServerError(f"marker server of {self.paths.markers_dir} stopped"))
                return future
            if marker in self._recorded:
                future = Future()
                future.set_result(False)
                return future
            existing = self._pending.get(marker) or self._in_flight.get(marker)
            if existing is not None:
                return existing
            future = Future()
            self._pending[marker] = future
            return future

    # --- batches ------------------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        """Every interval, hand what is pending to a flush thread with a free slot."""
        while not self._stopping.wait(self.batch_interval):
            self._dispatch()

    def _dispatch(self) -> bool:
        """Start one flush of everything pending, if anything is; waits for a free slot first."""
        with self._lock:
            if not self._pending:
                return False
        slot = self._free_slots.get()
        with self._lock:
            batch = self._pending
            self._pending = {}
            self._in_flight.update(batch)
        if not batch:
            self._free_slots.put(slot)
            return False
        assert self._flushers is not None
        self._flushers.submit(self._flush, slot, batch)
        return True

    def _drain(self) -> None:
        """Flush what is pending and wait until every flush is done (a graceful stop)."""
        while True:
            self._dispatch()
            with self._lock:
                if not self._pending and not self._in_flight:
                    return
            time.sleep(min(self.batch_interval, 0.005))

    def _flush(self, slot: _Slot, batch: dict[Marker, Future[bool]]) -> None:
        """Write the batch into the slot's file (see the module), then answer the batch's requests."""
        new = [marker.name for marker in batch]
        try:
            self._calls.retry.call(lambda: self._write(slot, new), f"markers flush MARKERS{slot.index}")
        except Exception as error:
            path = self.paths.batched_file(slot.index)
            log.error("Marker flush of %d markers to %s failed: %s", len(batch), path, describe_error(error))
            failure = MarkerServerError(
                f"{path}: flushing {len(batch)} markers failed, none is recorded: {describe_error(error)}"
            )
            with self._lock:
                for marker in batch:
                    self._in_flight.pop(marker, None)
            for future in batch.values():
                future.set_exception(failure)
            self._free_slots.put(slot)
            return
        with self._lock:
            self._recorded.update(batch)
            for marker in batch:
                self._in_flight.pop(marker, None)
            self.flushes += 1
        self._free_slots.put(slot)
        for future in batch.values():
            future.set_result(True)
        log.debug("Flushed %d markers to MARKERS%d (%d lines)", len(batch), slot.index, slot.written)

    def _write(self, slot: _Slot, new: list[str]) -> None:
        """One attempt to make ``new`` durable in the slot's file; a failure retires the file (the next attempt
        writes a new one), since what a failed append or write left there is unknown."""
        data = "".join(line + "\n" for line in new).encode("utf-8")
        try:
            if self._append:
                self._calls.append_bytes(self.paths.batched_file(slot.index), data)
                slot.written += len(new)
                return
            if slot.written and slot.written + len(new) > MAX_LINES_PER_REWRITTEN_FILE:
                self._retire(slot)
            lines = slot.lines + new
            self._calls.store.write_bytes(
                self.paths.batched_file(slot.index), "".join(line + "\n" for line in lines).encode("utf-8")
            )
            slot.lines = lines
            slot.written = len(lines)
        except BaseException:
            self._retire(slot)
            raise

    def _retire(self, slot: _Slot) -> None:
        """Move the slot on to a new file: the next free index."""
        with self._lock:
            slot.index = self._next_index
            self._next_index += 1
        slot.lines = []
        slot.written = 0

    def _reload(self) -> None:
        """Rebuild the recorded set from the ``MARKERS<i>`` files; new batches go into new files."""
        try:
            listing = self._calls.list_dir(self.paths.markers_dir)
        except FileNotFoundError:
            listing = []
        names = sorted(
            status.path
            for status in listing
            if not status.is_dir and batched_file_index(_name(status.path)) is not None
        )
        highest = -1
        for path in names:
            index = batched_file_index(_name(path))
            assert index is not None
            highest = max(highest, index)
            markers, _, rejected = parse_batched_lines(self._calls.read_bytes(path), path)
            for problem in rejected:
                log.warning("Marker server reload: skipping %s", problem)
            self._recorded.update(markers)
        self._next_index = highest + 1
        for _ in range(self.batch_threads):
            self._free_slots.put(_Slot(self._next_index))
            self._next_index += 1
        if names:
            log.info("Marker server reloaded %d markers from %d files", len(self._recorded), len(names))

    # --- connections, so that a stop cuts keep-alive clients off ----------------------------------------------------

    def _admit_connection(self) -> bool:
        with self._lock:
            if self._admitted >= self.max_connections:
                return False
            self._admitted += 1
            return True

    def _release_connection(self) -> None:
        with self._lock:
            self._admitted -= 1

    def _connection_opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _connection_closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
