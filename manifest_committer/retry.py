"""Retry policies (tenacity), built once per committer call and applied inside each unit of work."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import tenacity

from .iostatistics import StatisticsStore
from .statistic_names import STORE_IO_RETRY

log = logging.getLogger(__name__)
T = TypeVar("T")


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

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self._stats is not None:
                self._stats.increment(self._statistic)
            error = state.outcome.exception() if state.outcome else None
            log.warning("Attempt %d failed, retrying: %s", state.attempt_number, error)

        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(attempts)
        if max_time > 0:
            stop = stop | tenacity.stop_before_delay(max_time)
        self._retrying = tenacity.Retrying(
            stop=stop,
            wait=tenacity.wait_exponential_jitter(multiplier=initial_wait, max=max_wait, jitter=initial_wait),
            retry=tenacity.retry_if_exception(is_retryable),
            before_sleep=before_sleep,
            reraise=True,
        )

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` until it succeeds, fails with a non-retryable error, or attempts run out."""
        return self._retrying.copy()(function)
