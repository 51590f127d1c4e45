"""Work a committer leaves running after a call returned (the delete of a committed job's state), and waits for
in ``close()``: kept by the committer, never by the module, so two committers never wait on each other's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

THREAD_PREFIX = "manifest-committer-background-"
"""Every background thread's name starts so: what a test waits for, whichever committer started it."""


class BackgroundWork:
    """Non-daemon threads one committer started: the interpreter's exit waits for them, as ``wait`` does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, name: str, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, name=THREAD_PREFIX + name)
        with self._lock:
            self._threads = [*(t for t in self._threads if t.is_alive()), thread]
            thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for everything started here; ``True`` when nothing is still running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            return not self._threads


def wait_for_all_background_work(timeout: float | None = None) -> bool:
    """Wait for the background threads of every committer of this process (tests: before the next test's state);
    ``True`` when none is still running."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_PREFIX):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not any(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())
