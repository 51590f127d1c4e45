"""Is a job's driver still alive? The heartbeat of direct-marker jobs, and the one "is this job dead?" check.

A job with batched markers is alive while its marker server answers as itself (``server.json`` token); a
job with direct markers is alive while its heartbeat, an object the driver rewrites every few seconds, is
younger than ``heartbeat.expiry.seconds`` (Hudi's heartbeats). Where no driver process outlives the job's
setup (Spark's ``format("manifest")`` plans the write in a short-lived worker), each running task attempt beats
its own object under ``heartbeats/`` (one per attempt: stores limit writes to one object, GCS to one a second),
deleted when the task ends; the newest of all beats decides. The heartbeat holds the driver's clock time
rather than relying on the store's modification times, which not every store reports the same way; the
check compares it with its own clock, so clocks must agree to well within the expiry (the default of two
minutes leaves room).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

import orjson

from ..errors import MarkerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from .client import ping, read_server_state
from .layout import MarkerPaths, MarkerStoreCalls

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_SECONDS = 120.0


class Heartbeat:
    """Rewrites the job's heartbeat every ``interval`` seconds from a daemon thread, from ``start`` to ``stop``."""

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        retry: RetryPolicy,
        *,
        expiry_seconds: float = DEFAULT_EXPIRY_SECONDS,
        interval: float | None = None,
        path: str | None = None,
    ) -> None:
        self._calls = MarkerStoreCalls(store, retry)
        self.paths = paths
        self.path = path or paths.heartbeat
        """The driver's ``heartbeat``, or a task attempt's object under ``heartbeats/``."""
        self.interval = interval if interval is not None else max(expiry_seconds / 4.0, 0.05)
        """A quarter of the expiry by default: three beats may fail before a living job looks dead."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self, now: float | None = None) -> None:
        """Write the heartbeat once (``now``: seconds since the epoch; the clock by default)."""
        moment = time.time() if now is None else now
        document = {
            "jobId": self.paths.job.job_id,
            "timestampMs": int(moment * 1000),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }
        self._calls.write_bytes(self.path, orjson.dumps(document))

    def start(self) -> Heartbeat:
        """Beat now (so the job is alive before its first marker), then keep beating in the background."""
        self.beat()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="marker-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, remove: bool = False) -> None:
        """Stop beating; ``remove`` deletes the object too (a task's beat at its end: the job lives on)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if remove:
            try:
                self._calls.delete_file(self.path)
            except Exception as error:  # an old beat only makes the job look alive a little longer
                log.warning("Heartbeat %s not removed: %s", self.path, describe_error(error))

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as error:  # a missed beat is not fatal: the next may succeed within the expiry
                log.warning("Heartbeat %s not written: %s", self.path, describe_error(error))


def read_heartbeat(store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> float | None:
    """Seconds since the epoch of the job's newest heartbeat (the driver's or a running task's), or ``None``."""
    calls = MarkerStoreCalls(store, retry)
    beats = [_read_beat(calls, paths.heartbeat)]
    try:
        task_beats = calls.list_dir(paths.task_heartbeats_dir)
    except FileNotFoundError:
        task_beats = []
    beats.extend(_read_beat(calls, status.path) for status in task_beats if not status.is_dir)
    known = [beat for beat in beats if beat is not None]
    return max(known) if known else None


def _read_beat(calls: MarkerStoreCalls, path: str) -> float | None:
    try:
        data = calls.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        raw = orjson.loads(data)
        return int(raw["timestampMs"]) / 1000.0
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise MarkerError(f"{path}: not a heartbeat ({describe_error(error)})") from None


@dataclass(frozen=True, slots=True)
class Liveness:
    """The answer to "is this job's driver gone?", with the evidence, for logs and ``status``."""

    dead: bool
    reason: str


def job_liveness(
    store: StoreOperations,
    paths: MarkerPaths,
    retry: RetryPolicy,
    *,
    expiry_seconds: float = DEFAULT_EXPIRY_SECONDS,
    timeout: float = 2.0,
    now: float | None = None,
) -> Liveness:
    """Whether the driver of a job attempt is gone, judged from what it published.

    A published marker server decides (it answers as itself: alive; it does not: dead); otherwise the
    heartbeat does (younger than ``expiry_seconds``: alive); a job that published neither is dead. Whether a
    dead job is to be rolled back (it has markers and no commit record) is the protocol's question, not this.
    """
    calls = MarkerStoreCalls(store, retry)
    state = read_server_state(calls, paths)
    if state is not None:
        if ping(state, timeout=timeout):
            return Liveness(False, f"marker server {state.host}:{state.port} answers")
        return Liveness(True, f"marker server {state.host}:{state.port} of {paths.markers_dir} does not answer")
    beat = read_heartbeat(store, paths, retry)
    if beat is None:
        return Liveness(True, f"{paths.markers_dir}: no marker server and no heartbeat published")
    age = (time.time() if now is None else now) - beat
    if age > expiry_seconds:
        return Liveness(True, f"{paths.heartbeat}: last beat {age:.1f} s ago, expiry {expiry_seconds:g} s")
    return Liveness(False, f"{paths.heartbeat}: last beat {age:.1f} s ago")
