"""The marker server: runs in the driver, takes marker requests over HTTP from every task, writes them in batches.

Why the standard library's ``ThreadingHTTPServer`` and not aiohttp: markers must work on every install, and
aiohttp only arrives with the cloud extras; every request's work is blocking (it waits for a durable flush
through the synchronous store layer), so an asyncio loop would need its own thread in the driver and a bridge
to the flush threads, for no gain at this scale: 64 concurrent clients are 64 mostly idle threads, each
holding one keep-alive connection (measured in ``benchmarks/bench_markers.py``).

Lessons taken from Hudi's timeline-server markers (``reference/hudi-write-markers.txt``):

- a request is answered only once its batch is durable, and a failed flush fails every request of its batch
  (Hudi answered success after a failed flush, PR #19368);
- ``MARKERS.type`` is written before any ``MARKERS<i>``, so the directory always says how to read it;
- a restarted server reloads its state from the ``MARKERS<i>`` files, line by line (Hudi rejoined them with
  commas and corrupted the next flush);
- readers and rollback need only the files (``reader.read_markers``), never this server.

Batching: requests wait in ``pending``; every ``batch.interval.ms`` the scheduler takes them all as one batch
and hands it, with a free file index ``i < batch.threads``, to a flush thread, which rewrites ``MARKERS<i>``
whole with its earlier lines plus the batch (one file is touched by one thread at a time). Every store's
``write_bytes`` replaces a file whole (the local store writes beside it and renames), so no acknowledged marker
is ever only in a half-written file.

HTTP API (JSON bodies)::

    POST /v1/markers/create  {"marker": "dt=1/part-0.parquet.marker.CREATE"}
         200 {"created": true}   recorded by this request's batch (false: it was already recorded)
         400 {"error": ...}      not a marker this job may record (absolute, "..", NUL, ...)
         500 {"error": ...}      the batch's flush failed: nothing about this marker is promised
         503 {"error": ...}      the server is stopping
    GET  /v1/markers/ping    200 {"token": ..., "markersDir": ..., "jobId": ...}   liveness and identity
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
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from ..errors import MarkerError, MarkerServerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from .layout import BATCHED, Marker, MarkerPaths, MarkerStoreCalls, batched_file_index, parse_marker
from .reader import parse_batched_lines, read_marker_type

log = logging.getLogger(__name__)

API_PREFIX = "/v1/markers"
CREATE_PATH = API_PREFIX + "/create"
PING_PATH = API_PREFIX + "/ping"
ALL_PATH = API_PREFIX + "/all"
_MAX_BODY = 64 * 1024


@dataclass(frozen=True, slots=True)
class ServerState:
    """What ``server.json`` publishes: where tasks find the server, and how a checker knows it is the same one."""

    host: str
    port: int
    token: str
    job_id: str
    markers_dir: str
    pid: int
    started_ms: int

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "host": self.host,
                "port": self.port,
                "token": self.token,
                "jobId": self.job_id,
                "markersDir": self.markers_dir,
                "pid": self.pid,
                "startedMs": self.started_ms,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, path: str) -> ServerState:
        """Parse ``server.json``; ``MarkerError`` naming the file if it is not one."""
        try:
            raw = orjson.loads(data)
            state = cls(
                host=str(raw["host"]),
                port=int(raw["port"]),
                token=str(raw["token"]),
                job_id=str(raw["jobId"]),
                markers_dir=str(raw["markersDir"]),
                pid=int(raw.get("pid", 0)),
                started_ms=int(raw.get("startedMs", 0)),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise MarkerError(f"{path}: not a marker server state ({describe_error(error)})") from None
        if not 0 < state.port < 65536:
            raise MarkerError(f"{path}: port {state.port} out of range")
        return state


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # 64+ clients connect at once; the default backlog of 5 costs 1 s SYN retries
    marker_server: MarkerServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone, or a connection cut by stop(): nothing for stderr.
        log.debug("marker server: connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread, not one per marker
    disable_nagle_algorithm = True  # headers and body go out in two writes: Nagle + delayed ACK would add 40 ms
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.marker_server._connection_opened(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.marker_server._connection_closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("marker server %s: " + format, self.address_string(), *args)

    def _answer(self, status: HTTPStatus, body: Any) -> None:
        data = orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        owner = self.server.marker_server
        if self.path == PING_PATH:
            self._answer(HTTPStatus.OK, owner.identity())
        elif self.path == ALL_PATH:
            self._answer(HTTPStatus.OK, sorted(marker.name for marker in owner.markers()))
        else:
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint {self.path}"})

    def do_POST(self) -> None:
        owner = self.server.marker_server
        length = int(self.headers.get("Content-Length") or 0)
        if self.path != CREATE_PATH or not 0 < length <= _MAX_BODY:
            self.rfile.read(min(max(length, 0), _MAX_BODY))
            self.close_connection = True
            self._answer(HTTPStatus.BAD_REQUEST, {"error": f"expected POST {CREATE_PATH} with a JSON body"})
            return
        body = self.rfile.read(length)
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


class MarkerServer:
    """Batches markers of one job attempt into at most ``batch_threads`` ``MARKERS<i>`` files; see the module.

    ``create`` is the in-process entry point (the HTTP handler calls it); the returned future completes with
    ``True`` once the marker's batch is durable, ``False`` at once if the marker was already recorded, and
    ``MarkerServerError`` if its batch's flush failed (after the store retry policy gave up).
    """

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        retry: RetryPolicy,
        *,
        batch_interval_ms: int = 50,
        batch_threads: int = 20,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if batch_threads < 1 or batch_interval_ms < 1:
            raise ValueError("batch_threads and batch_interval_ms must be at least 1")
        self._calls = MarkerStoreCalls(store, retry)
        self.paths = paths
        self.batch_interval = batch_interval_ms / 1000.0
        self.batch_threads = batch_threads
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._recorded: set[Marker] = set()
        self._pending: dict[Marker, Future[bool]] = {}
        self._in_flight: dict[Marker, Future[bool]] = {}
        self._file_lines: dict[int, list[str]] = {}
        self._free_files: queue.Queue[int] = queue.Queue()
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self.closed = False
        self._token = uuid.uuid4().hex
        self._http: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._flushers: ThreadPoolExecutor | None = None
        self.state: ServerState | None = None
        self.flushes = 0
        """Flushes that completed durably (for tests and the benchmark)."""

    # --- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> MarkerServer:
        """Reload what the files hold, declare the directory batched, listen, and publish the address."""
        self._reload()
        if read_marker_type(self._calls, self.paths) is None:
            self._calls.write_bytes(self.paths.type_file, BATCHED.encode())
        http = _HTTPServer((self._host, self._port), _Handler)
        http.marker_server = self
        self._http = http
        host, port = http.server_address[0], http.server_address[1]
        self.state = ServerState(
            host=str(host),
            port=int(port),
            token=self._token,
            job_id=self.paths.job.job_id,
            markers_dir=self.paths.markers_dir,
            pid=os.getpid(),
            started_ms=int(time.time() * 1000),
        )
        self._flushers = ThreadPoolExecutor(self.batch_threads, thread_name_prefix="marker-flush")
        serve = lambda: http.serve_forever(poll_interval=0.05)  # noqa: E731  (shutdown waits one poll)
        for target, name in ((serve, "marker-http"), (self._schedule, "marker-batches")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self._calls.write_bytes(self.paths.server_state, self.state.to_json())
        log.info(
            "Marker server for %s listening on %s:%d (%d markers reloaded)",
            self.paths.markers_dir,
            host,
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
        return {"token": self._token, "markersDir": self.paths.markers_dir, "jobId": self.paths.job.job_id}

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
        """Every interval, hand what is pending to a flush thread with a free ``MARKERS<i>``."""
        while not self._stopping.wait(self.batch_interval):
            self._dispatch()

    def _dispatch(self) -> bool:
        """Start one flush of everything pending, if anything is; waits for a free file index first."""
        with self._lock:
            if not self._pending:
                return False
        index = self._free_files.get()
        with self._lock:
            batch = self._pending
            self._pending = {}
            self._in_flight.update(batch)
        if not batch:
            self._free_files.put(index)
            return False
        assert self._flushers is not None
        self._flushers.submit(self._flush, index, batch)
        return True

    def _drain(self) -> None:
        """Flush what is pending and wait until every flush is done (a graceful stop)."""
        while True:
            self._dispatch()
            with self._lock:
                if not self._pending and not self._in_flight:
                    return
            time.sleep(min(self.batch_interval, 0.005))

    def _flush(self, index: int, batch: dict[Marker, Future[bool]]) -> None:
        """Rewrite ``MARKERS<index>`` with its earlier lines plus the batch, then answer the batch's requests."""
        path = self.paths.batched_file(index)
        lines = self._file_lines.get(index, []) + [marker.name for marker in batch]
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        try:
            self._write(path, data)
        except Exception as error:
            log.error("Marker flush of %d markers to %s failed: %s", len(batch), path, describe_error(error))
            failure = MarkerServerError(
                f"{path}: flushing {len(batch)} markers failed, none is recorded: {describe_error(error)}"
            )
            with self._lock:
                for marker in batch:
                    self._in_flight.pop(marker, None)
            for future in batch.values():
                future.set_exception(failure)
            self._free_files.put(index)
            return
        with self._lock:
            self._file_lines[index] = lines
            self._recorded.update(batch)
            for marker in batch:
                self._in_flight.pop(marker, None)
            self.flushes += 1
        self._free_files.put(index)
        for future in batch.values():
            future.set_result(True)
        log.debug("Flushed %d markers to %s (%d lines)", len(batch), path, len(lines))

    def _write(self, path: str, data: bytes) -> None:
        self._calls.write_bytes(path, data)

    def _reload(self) -> None:
        """Rebuild the per-file lines and the recorded set from the ``MARKERS<i>`` files."""
        try:
            listing = self._calls.list_dir(self.paths.markers_dir)
        except FileNotFoundError:
            listing = []
        names = sorted(
            status.path
            for status in listing
            if not status.is_dir and batched_file_index(_name(status.path)) is not None
        )
        for path in names:
            index = batched_file_index(_name(path))
            assert index is not None
            markers, _ = parse_batched_lines(self._calls.read_bytes(path), path)
            lines = self._file_lines.setdefault(index, [])
            _append_new(lines, (marker.name for marker in markers))
            self._recorded.update(markers)
        for index in range(self.batch_threads):
            self._free_files.put(index)
        if names:
            log.info("Marker server reloaded %d markers from %d files", len(self._recorded), len(names))

    # --- connections, so that a stop cuts keep-alive clients off ----------------------------------------------------

    def _connection_opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _connection_closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _append_new(lines: list[str], new: Iterable[str]) -> None:
    seen = set(lines)
    for line in new:
        if line not in seen:
            seen.add(line)
            lines.append(line)
