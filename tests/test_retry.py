"""RetryPolicy: retries only what it is told to, bounded by attempts and by total time."""

from __future__ import annotations

import time

import pytest

from manifest_committer.iostatistics import StatisticsStore
from manifest_committer.retry import RetryPolicy
from manifest_committer.statistic_names import STORE_IO_RETRY


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then returns the number of calls."""

    def __init__(self, failures: int, error: type[BaseException] = ConnectionResetError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return self.calls


def policy(**changes: object) -> RetryPolicy:
    arguments: dict[str, object] = {
        "attempts": 5,
        "initial_wait": 0.0,
        "is_retryable": lambda error: isinstance(error, ConnectionError),
    }
    arguments.update(changes)
    return RetryPolicy(**arguments)  # type: ignore[arg-type]


def test_retries_until_success_and_counts_the_retries() -> None:
    stats = StatisticsStore()
    assert policy(stats=stats).call(Flaky(3)) == 4
    assert stats.snapshot().counters[STORE_IO_RETRY] == 3


def test_gives_up_after_the_attempts() -> None:
    flaky = Flaky(10)
    with pytest.raises(ConnectionResetError, match="failure 5"):
        policy().call(flaky)
    assert flaky.calls == 5


def test_an_error_it_is_not_told_to_retry_surfaces_at_once() -> None:
    flaky = Flaky(1, PermissionError)
    with pytest.raises(PermissionError):
        policy().call(flaky)
    assert flaky.calls == 1


def test_total_time_bounds_the_attempts() -> None:
    """With 1,000 attempts allowed, the time limit ends the retries: no attempt starts after 0.3 s."""
    flaky = Flaky(10_000)
    started = time.monotonic()
    with pytest.raises(ConnectionResetError):
        policy(attempts=1000, initial_wait=0.05, max_wait=0.05, max_time=0.3).call(flaky)
    assert 2 <= flaky.calls < 20
    assert time.monotonic() - started < 2.0


def test_no_time_limit_when_zero() -> None:
    assert policy(attempts=30, max_time=0.0).call(Flaky(25)) == 26
