"""A token-bucket limit on store operations per second, shared by every thread that holds the same bucket.

Cloud stores throttle (Azure ``ServerBusy``, GCS 429) once a job commit's threads exceed what a container or
bucket accepts; slowing down before the store answers with errors keeps retries and their back-off out of the
commit. Hadoop's manifest committer documents ``mapreduce.manifest.committer.io.rate`` for this; here it is built.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .operations import NO_HINTS, RenameHint, StoreOperations
from .pending_upload import PendingUpload
from .wrapping import WrappingStore


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


class RateLimitedStore(WrappingStore):
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
        super().__init__(inner)
        self.bucket = bucket
        self._on_wait = on_wait

    passes_batches = True

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        self._take_token()
        return call()

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        """A token for each rename of the batch, then the batch as the inner store runs it."""
        self._take_tokens(len(pairs))
        return self.inner.rename_files(pairs, hints)

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        """A token for each read of the batch, then the batch as the inner store runs it."""
        self._take_tokens(len(paths))
        return self.inner.read_files(paths)

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        """A token for each delete of the batch, then the batch as the inner store runs it."""
        self._take_tokens(len(paths))
        return self.inner.delete_dirs(paths)

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]:
        """A token for each completion of the batch, then the batch as the inner store runs it."""
        self._take_tokens(len(uploads))
        outcomes: list[str | Exception] = self._inner_uploads(uploads[0].path).complete_uploads(uploads)
        return outcomes

    def _take_tokens(self, count: int) -> None:
        for _ in range(count):
            self._take_token()

    def _take_token(self) -> None:
        waited = self.bucket.acquire()
        if self._on_wait is not None:
            self._on_wait(waited)
