"""Retry policies (tenacity), built once per committer call and applied inside each unit of work.

One store call gets one policy: callers never wrap a retried call in another retry, so the number of attempts
a user configured is the number the store sees.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

from .iostatistics import StatisticsStore
from .statistic_names import STORE_IO_RETRY

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFINITE_ERRORS: tuple[type[BaseException], ...] = (
    PermissionError,
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
)
"""Answers, not accidents: retrying them repeats the same answer (and a ``PermissionError`` ten times over)."""


def describe_error(error: BaseException | None) -> str:
    """``Type: message``; some errors (asyncio timeouts) stringify to "", which alone would say nothing."""
    if error is None:
        return "no error"
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class RetryPolicy:
    """Calls a function, retrying the errors ``is_retryable`` accepts, with exponential backoff and jitter."""

    def __init__(
        self,
        *,
        attempts: int,
        initial_wait: float,
        is_retryable: Callable[[BaseException], bool],
        stats: StatisticsStore | None = None,
        statistic: str = STORE_IO_RETRY,
        max_wait: float = 30.0,
        max_time: float = 0.0,
    ) -> None:
        """``max_time``: seconds after the first attempt began when no further attempt starts; 0: no limit."""
        self.attempts = attempts
        self._stats = stats
        self._statistic = statistic
        self._is_retryable = is_retryable
        self._max_time = max_time
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_exponential_jitter(multiplier=initial_wait, max=max_wait, jitter=initial_wait),
            retry=tenacity.retry_if_exception(is_retryable),
            reraise=True,
        )

    def call(self, function: Callable[[], T], what: str = "store call") -> T:
        """Run ``function`` until it succeeds, fails with a non-retryable error, or attempts run out.

        ``what`` names the operation and path in the warning logged before each retry. The first attempt is a
        plain call: tenacity's machinery (a copy of the policy, its call state) is built only once a retryable
        error has happened, so the common call costs a ``try`` (building the machinery up front was most of
        the CPU a store call spent in the gate under many threads). Attempts, waits and the time limit are
        counted from that first attempt.
        """
        started = time.monotonic()
        try:
            return function()
        except BaseException as error:
            if self.attempts <= 1 or not self._is_retryable(error):
                raise
            first_error: BaseException | None = error
        # The first attempt failed retryably: tenacity takes over from here, shown that failure as its attempt 1.

        def attempt() -> T:
            nonlocal first_error
            if first_error is not None:
                error, first_error = first_error, None
                raise error
            return function()

        return self._retrying_after_first(started, what)(attempt)

    def _retrying_after_first(self, started: float, what: str) -> tenacity.Retrying:
        """A copy of the policy for one call whose first attempt began at ``started`` (``time.monotonic``)."""
        max_time = self._max_time
        limit = self._retrying.stop

        def stop(state: tenacity.RetryCallState) -> bool:
            if limit(state):
                return True
            if max_time <= 0:
                return False
            return time.monotonic() - started + state.upcoming_sleep >= max_time  # tenacity's stop_before_delay

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self._stats is not None:
                self._stats.increment(self._statistic)
            error = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            log.warning(
                "%s failed (attempt %d of %d), retrying in %.2f s: %s",
                what,
                state.attempt_number,
                self.attempts,
                wait,
                describe_error(error),
            )

        return self._retrying.copy(before_sleep=before_sleep, stop=stop)
