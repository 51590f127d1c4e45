"""The worker processes of one job commit (``io.processes``): started together, each batch of calls sent to the
least busy one, and stopped in one place.

A worker that dies (killed, out of memory, crashed) breaks the pool: the calls it had in flight, and every call
after, raise ``WorkerProcessError``, so the job commit stops as it would had its own process died, and a rerun or
an abort settles the calls in doubt from the journal's evidence. A worker never outlives its pool: it exits as soon
as the committer closes its standard input, or dies (``serve``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import multiprocessing.spawn
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ...errors import WorkerProcessError
from .channel import Channel
from .serve import STOP, Reply, Request
from .setup import WorkerSetup

log = logging.getLogger(__name__)

BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from manifest_committer.store.workers.serve import main; main()"
)
"""The worker's program: the committer's ``sys.path`` (so it imports the same library and store bindings), then
``serve.main``."""
STOP_TIMEOUT = 60.0
"""Seconds a worker told to stop may take to close its store before it is killed."""


class _Worker:
    """One worker process, its channel, and the calls it has in flight (answered by its reader thread)."""

    def __init__(self, pool: WorkerPool, setup: WorkerSetup) -> None:
        self.pool = pool
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [multiprocessing.spawn.get_executable(), "-c", BOOTSTRAP, json.dumps(sys.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.channel = Channel(self.process.stdout, self.process.stdin)
        self.ready: Future[float] = Future()
        """The seconds the worker took to start and open its store; the error if it could not."""
        self.pending: dict[int, tuple[Future[Reply], int]] = {}
        self.calls_in_flight = 0
        self.stopping = False
        self.channel.send(setup)
        self._reader = threading.Thread(
            target=self._read, name=f"manifest-committer-worker-{self.process.pid}", daemon=True
        )
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def submit(self, request: Request, calls: int) -> Future[Reply]:
        future: Future[Reply] = Future()
        with self.pool.lock:
            self.pending[request.number] = (future, calls)
            self.calls_in_flight += calls
        with contextlib.suppress(OSError):  # the worker is gone: its reader fails the pending calls, this one too
            self.channel.send(request)
        return future

    def _read(self) -> None:
        try:
            first = self.channel.receive()
            if isinstance(first, tuple) and first[0] == "ready":
                seconds = time.perf_counter() - self.started
                if self.pool.on_ready is not None:
                    self.pool.on_ready(seconds)
                self.ready.set_result(seconds)
            else:
                error = first[1] if isinstance(first, tuple) else None
                self.ready.set_exception(self.pool.failed(self, f"could not open the store: {error}", error))
                return
            while True:
                message = self.channel.receive()
                if message == STOP:
                    return
                assert isinstance(message, Reply)
                with self.pool.lock:
                    future, calls = self.pending.pop(message.number)
                    self.calls_in_flight -= calls
                future.set_result(message)
        except (EOFError, OSError, ValueError):
            pass
        except Exception as error:  # an answer that would not unpickle: the worker cannot be trusted further
            log.warning("Worker process %d of the job commit sent an unreadable answer: %s", self.pid, error)
            self.process.kill()
        if self.stopping:
            return
        failure = self.pool.failed(self, _how_it_ended(self.process), None)
        if not self.ready.done():
            self.ready.set_exception(failure)
        with self.pool.lock:
            pending, self.pending = list(self.pending.values()), {}
        for future, _ in pending:
            future.set_exception(failure)

    def stop(self, *, kill: bool) -> None:
        """Stop the worker: at once (``kill``: its calls are abandoned), else once it has closed its store."""
        self.stopping = True
        try:
            if kill:
                self.process.kill()
            else:
                self.channel.send(STOP)
        except OSError:
            pass
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # the end of its input: a worker still running exits at once
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("Worker process %d of the job commit did not stop within %s s: killed", self.pid, STOP_TIMEOUT)
            self.process.kill()
            self.process.wait()
        self._reader.join(STOP_TIMEOUT)  # it reads to the end of the worker's output, then stops
        self.process.stdout.close()


def _how_it_ended(process: subprocess.Popen[bytes]) -> str:
    try:
        code = process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class WorkerPool:
    """``processes`` worker processes for the batches of store calls of one job commit of ``job``.

    Started at once (each imports the library and opens the store while the commit loads its manifests); the
    first call to a worker waits until it is ready.
    """

    def __init__(
        self, setup: WorkerSetup, processes: int, job: str, on_ready: Callable[[float], None] | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.on_ready = on_ready
        """Called with the seconds each worker took to start and open its store (in its reader thread)."""
        self._setup = setup
        self._job = job
        self._numbers = itertools.count()
        self._failure: WorkerProcessError | None = None
        self._workers: list[_Worker] = []
        try:
            for _ in range(processes):
                self._workers.append(_Worker(self, setup))
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers."""
        return [worker.pid for worker in self._workers]

    def failed(self, worker: _Worker, how: str, cause: BaseException | None) -> WorkerProcessError:
        """Break the pool: every call from now on raises the returned error, which names the worker and how it
        ended."""
        with self.lock:
            in_flight = worker.calls_in_flight
            if self._failure is None:
                failure = WorkerProcessError(
                    f"{self._setup.url}: worker process {worker.pid} of the job commit of job {self._job} {how}"
                    f"{f' with {in_flight} store calls in flight' if in_flight else ''}; the job commit stopped "
                    "(run commit_job again to finish it, or abort_job to undo it)"
                )
                failure.__cause__ = cause
                self._failure = failure
            return self._failure

    def call(self, method: str, *arguments: Any, calls: int) -> list[Any]:
        """The outcomes of a batch of ``calls`` store calls, made by the least busy worker: one per call, an
        error (from the worker, judged there: ``portable_errors``) where a call failed."""
        with self.lock:
            if self._failure is not None:
                raise self._failure
            worker = min(self._workers, key=lambda candidate: candidate.calls_in_flight)
            number = next(self._numbers)
        worker.ready.result()
        reply = worker.submit(Request(number, method, arguments), calls).result()
        if reply.error is not None:
            raise reply.error
        assert reply.outcomes is not None
        return reply.outcomes

    def close(self) -> None:
        """Stop every worker; one with calls still in flight (its caller gave up on them) is killed at once, so
        that nothing it was asked is still being done after the commit returns."""
        for worker in self._workers:
            with self.lock:
                busy = bool(worker.pending)
            worker.stop(kill=busy)
