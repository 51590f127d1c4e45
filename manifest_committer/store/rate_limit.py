"""A token-bucket limit on store operations per second, shared by every thread that holds the same bucket.

Cloud stores throttle (Azure ``ServerBusy``, GCS 429) once a job commit's threads exceed what a container or
bucket accepts; slowing down before the store answers with errors keeps retries and their back-off out of the
commit. Hadoop's manifest committer documents ``mapreduce.manifest.committer.io.rate`` for this; here it is built.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .operations import FileStatus, StoreOperations


class TokenBucket:
    """Admits ``burst`` operations at once, then ``rate`` per second; thread-safe.

    ``acquire`` reserves a token under the lock and sleeps outside it, so waiting threads never hold the lock
    and are admitted in the order they asked. ``clock`` and ``sleep`` are injectable for tests.
    """

    def __init__(
        self,
        rate: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise ValueError(f"token bucket rate must be a number of operations per second > 0, got {rate!r}")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"token bucket burst must be an integer of at least 1, got {burst!r}")
        self.rate = float(rate)
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._updated = clock()

    def acquire(self) -> float:
        """Take one token, sleeping until it is due; returns the seconds waited (0.0 when one was at hand)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            self._tokens -= 1.0
            # A negative balance is the queue of threads already promised a token: this one waits behind them.
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


class RateLimitedStore(StoreOperations):
    """Wraps another store; every call takes one token from ``bucket`` first.

    ``on_wait`` receives the seconds each call waited for its token (0.0 included), so a caller can record the
    wait as a statistic. URL conversion and ``is_transient`` make no store call and take no token.
    """

    def __init__(
        self,
        inner: StoreOperations,
        bucket: TokenBucket,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.inner = inner
        self.fs = inner.fs
        self.scheme = inner.scheme
        self.capabilities = inner.capabilities
        self.bucket = bucket
        self._on_wait = on_wait

    def _acquire(self) -> None:
        waited = self.bucket.acquire()
        if self._on_wait is not None:
            self._on_wait(waited)

    def to_url(self, path: str) -> str:
        return self.inner.to_url(path)

    def from_url(self, url: str) -> str:
        return self.inner.from_url(url)

    def is_transient(self, error: BaseException) -> bool:
        return self.inner.is_transient(error)

    def is_auth_error(self, error: BaseException) -> bool:
        return self.inner.is_auth_error(error)

    def same_content(self, first: FileStatus, second: FileStatus) -> bool:
        return self.inner.same_content(first, second)

    def info(self, path: str) -> FileStatus | None:
        self._acquire()
        return self.inner.info(path)

    def list_dir(self, path: str) -> list[FileStatus]:
        self._acquire()
        return self.inner.list_dir(path)

    def mkdirs(self, path: str) -> None:
        self._acquire()
        self.inner.mkdirs(path)

    def rename_file(self, source: str, dest: str) -> None:
        self._acquire()
        self.inner.rename_file(source, dest)

    def delete_file(self, path: str) -> bool:
        self._acquire()
        return self.inner.delete_file(path)

    def delete_dir(self, path: str) -> bool:
        self._acquire()
        return self.inner.delete_dir(path)

    def remove_empty_dir(self, path: str) -> bool:
        self._acquire()
        return self.inner.remove_empty_dir(path)

    def read_bytes(self, path: str) -> bytes:
        self._acquire()
        return self.inner.read_bytes(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._acquire()
        self.inner.write_bytes(path, data)

    def copy_file(self, source: str, dest: str) -> None:
        self._acquire()
        self.inner.copy_file(source, dest)
