"""The worker process: opens the destination's store as the committer did and makes the batches of store calls
the job commit hands it, each on a thread of its own, answering in any order.

Started by ``pool.WorkerPool`` as ``python -c BOOTSTRAP`` (never forked from the committer, whose threads and
event loops a fork would copy half-way, and never through multiprocessing, which runs the caller's main script
again in the child). Its standard input brings requests; a reply goes out on what was standard output, which is
pointed at standard error so that a library's print cannot corrupt the replies. The end of standard input means
the committer closed it or died: the worker exits at once, abandoning the calls it is making, as the committer's
own process would have had it been killed. Interrupts (Ctrl-C reaches the whole process group) are the
committer's to handle, and ignored here.
"""

from __future__ import annotations

import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..operations import StoreOperations
from .channel import Channel
from .portable_errors import portable
from .setup import WorkerSetup

RENAME_FILES = "rename_files"
COMPLETE_UPLOADS = "complete_uploads"
STOP = "stop"


@dataclass(frozen=True, slots=True)
class Request:
    """A batch of store calls: ``method`` of the store with ``arguments``; answered under ``number``."""

    number: int
    method: str
    arguments: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Reply:
    """``outcomes`` of request ``number`` (one per call, errors made portable), or ``error`` if it failed whole."""

    number: int
    outcomes: list[Any] | None
    error: BaseException | None = None


def answer(store: StoreOperations, request: Request) -> Reply:
    """Make the calls of ``request``; never raises an ``Exception`` (it becomes the reply's ``error``)."""
    try:
        if request.method == RENAME_FILES:
            pairs, hints = request.arguments
            outcomes: list[Any] = store.rename_files(pairs, hints)
        elif request.method == COMPLETE_UPLOADS:
            (uploads,) = request.arguments
            outcomes = store.complete_uploads(uploads)  # type: ignore[attr-defined]
        else:
            raise ValueError(f"a worker process has no store call {request.method!r}")
    except Exception as error:
        return Reply(request.number, None, portable(error, store))
    return Reply(
        request.number,
        [portable(outcome, store) if isinstance(outcome, Exception) else outcome for outcome in outcomes],
    )


def main() -> None:
    """The worker's life: set up, open the store, say ready (or why not), then answer until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.dup(1)
    os.dup2(2, 1)
    channel = Channel(os.fdopen(0, "rb"), os.fdopen(replies, "wb"))
    setup = channel.receive()
    assert isinstance(setup, WorkerSetup)
    try:
        store = setup.open_store()
    except Exception as error:
        channel.send(("failed", portable(error, _NoStore())))
        return
    channel.send(("ready", os.getpid()))
    with ThreadPoolExecutor(setup.threads, thread_name_prefix="manifest-committer-worker") as pool:
        while True:
            try:
                request = channel.receive()
            except EOFError:
                os._exit(0)  # the committer is gone: abandon the calls in flight, as its own death would have
            if request == STOP:
                break
            assert isinstance(request, Request)
            pool.submit(_answer_on, channel, store, request)
    store.close()
    channel.send(STOP)
    sys.stdout.flush()


def _answer_on(channel: Channel, store: StoreOperations, request: Request) -> None:
    channel.send(answer(store, request))


class _NoStore:
    """What judges an error raised while opening the store: nothing is transient or an auth error but by class."""

    @staticmethod
    def is_transient(error: BaseException) -> bool:
        return isinstance(error, TimeoutError | ConnectionError)

    @staticmethod
    def is_auth_error(error: BaseException) -> bool:
        return isinstance(error, PermissionError)
