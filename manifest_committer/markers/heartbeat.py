"""Is a job's driver still alive? The job's lease, and the one "is this job dead?" check.

Every job with markers holds a lease: ``markers/heartbeat``, an object the driver rewrites every quarter of
``heartbeat.expiry.seconds`` (Hudi's heartbeats), written by ``setup_job`` before anything else of the job's
marker state, so a job in setup is never without one. A job is alive while its newest beat is younger than the
expiry: the shorter of the expiry the job declared in its lease and the checker's own. So a driver paused (a
long garbage collection, SIGSTOP) is not taken for dead while its lease is fresh, whatever its marker server
answers meanwhile. Once the lease has expired, a job with batched markers is still alive if its marker server
answers and proves the job's secret (the store refused the beats, say); otherwise it is dead.

Where no driver process outlives the job's setup (Spark's ``format("manifest")`` plans the write in a
short-lived worker), each running task attempt beats its own object under ``heartbeats/`` (one per attempt:
stores limit writes to one object, GCS to one a second), deleted when the task ends; the newest of all beats
decides. A beat holds the writer's clock time rather than relying on the store's modification times, which not
every store reports the same way; the check compares it with its own clock, so clocks must agree to well within
the expiry (the default of two minutes leaves room).
"""

from __future__ import annotations

import logging
import os
import posixpath
import socket
import threading
import time
from dataclasses import dataclass

import orjson

from ..errors import MarkerError
from ..retry import RetryPolicy, describe_error
from ..store import StoreOperations
from .client import ping, read_secret, read_server_state
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
        self.expiry_seconds = expiry_seconds
        self.interval = interval if interval is not None else max(expiry_seconds / 4.0, 0.05)
        """A quarter of the expiry by default: three beats may fail before a living job looks dead."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self, now: float | None = None) -> None:
        """Write the heartbeat once (``now``: seconds since the epoch; the clock by default)."""
        self._calls.write_bytes(self.path, lease_document(self.paths.job.job_id, self.expiry_seconds, now))

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
        directory = posixpath.dirname(self.path)
        while not self._stop.wait(self.interval):
            try:
                if self._calls.info(directory) is None:
                    # The job ended while this process still held it (its commit ran in another process, as
                    # Spark's data source commits): a beat now would bring back a piece of its deleted state.
                    log.info("Heartbeat %s: the job's state is gone; no more beats", self.path)
                    return
                self.beat()
            except Exception as error:  # a missed beat is not fatal: the next may succeed within the expiry
                log.warning("Heartbeat %s not written: %s", self.path, describe_error(error))


def lease_document(job_id: str, expiry_seconds: float, now: float | None = None) -> bytes:
    """A beat of the job's lease: when it was written, and for how long it holds (``now``: the clock by default)."""
    moment = time.time() if now is None else now
    document = {
        "jobId": job_id,
        "timestampMs": int(moment * 1000),
        "expirySeconds": expiry_seconds,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
    }
    return orjson.dumps(document)


@dataclass(frozen=True, slots=True)
class Lease:
    """The newest beat of a job's lease (the driver's or a running task's) and the expiry it declared."""

    beat: float
    """Seconds since the epoch."""
    expiry_seconds: float | None
    """What the job declared (its ``heartbeat.expiry.seconds``); ``None`` in a beat that declares none."""
    path: str


def read_lease(store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> Lease | None:
    """The job's newest beat, or ``None`` if it has none; ``MarkerError`` naming a beat that is not one."""
    calls = MarkerStoreCalls(store, retry)
    leases = [_read_beat(calls, paths.heartbeat)]
    try:
        task_beats = calls.list_dir(paths.task_heartbeats_dir)
    except FileNotFoundError:
        task_beats = []
    leases.extend(_read_beat(calls, status.path) for status in task_beats if not status.is_dir)
    known = [lease for lease in leases if lease is not None]
    return max(known, key=lambda lease: lease.beat) if known else None


def read_heartbeat(store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> float | None:
    """Seconds since the epoch of the job's newest heartbeat (the driver's or a running task's), or ``None``."""
    lease = read_lease(store, paths, retry)
    return None if lease is None else lease.beat


def _read_beat(calls: MarkerStoreCalls, path: str) -> Lease | None:
    try:
        data = calls.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        raw = orjson.loads(data)
        expiry = raw.get("expirySeconds")
        declared = float(expiry) if isinstance(expiry, int | float) and not isinstance(expiry, bool) else None
        if declared is not None and not 0 < declared < float("inf"):
            declared = None
        return Lease(int(raw["timestampMs"]) / 1000.0, declared, path)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
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
    """Whether the driver of a job attempt is gone, judged from what it published (see the module).

    Alive while its lease is younger than the shorter of ``expiry_seconds`` and the expiry it declared; once
    the lease expired (or where it has none), alive only while its published marker server answers and proves
    the job's secret. Whether a dead job is to be rolled back (it has markers and no commit record) is the
    protocol's question, not this.
    """
    calls = MarkerStoreCalls(store, retry)
    moment = time.time() if now is None else now
    lease = read_lease(store, paths, retry)
    age = None if lease is None else moment - lease.beat
    if lease is not None and age is not None:
        expiry = min(expiry_seconds, lease.expiry_seconds or expiry_seconds)
        if age <= expiry:
            return Liveness(False, f"{lease.path}: lease renewed {max(age, 0.0):.1f} s ago, expiry {expiry:g} s")
    state = read_server_state(calls, paths)
    if state is not None:
        if ping(state, read_secret(calls, paths), timeout=timeout):
            return Liveness(False, f"marker server {state.host}:{state.port} answers")
        beat = "" if age is None else f"; last beat {age:.1f} s ago"
        return Liveness(True, f"marker server {state.host}:{state.port} of {paths.markers_dir} does not answer{beat}")
    if lease is None or age is None:
        return Liveness(True, f"{paths.markers_dir}: no marker server and no heartbeat published")
    expiry = min(expiry_seconds, lease.expiry_seconds or expiry_seconds)
    return Liveness(True, f"{lease.path}: last beat {age:.1f} s ago, expiry {expiry:g} s")
