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


def test_a_call_that_succeeds_at_once_never_builds_tenacitys_machinery(monkeypatch: pytest.MonkeyPatch) -> None:
    """The common store call costs a ``try``: tenacity takes over only after a retryable failure."""
    retrying = policy()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tenacity copied for a call that needed no retry")

    monkeypatch.setattr(retrying._retrying, "copy", refuse)
    assert retrying.call(Flaky(0)) == 1
    with pytest.raises(PermissionError):
        retrying.call(Flaky(1, PermissionError))


def test_the_first_failure_is_attempt_one_of_the_policy(caplog: pytest.LogCaptureFixture) -> None:
    stats = StatisticsStore()
    flaky = Flaky(2)
    with caplog.at_level("WARNING", logger="manifest_committer.retry"):
        assert policy(stats=stats).call(flaky, "op_rename /x") == 3
    assert flaky.calls == 3
    assert stats.snapshot().counters[STORE_IO_RETRY] == 2
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("op_rename /x failed (attempt 1 of 5)") and "failure 1" in messages[0]
    assert messages[1].startswith("op_rename /x failed (attempt 2 of 5)")


def test_the_time_limit_counts_from_the_first_attempt() -> None:
    """A slow first attempt uses up the time: no retry starts once first attempt + wait would pass the limit."""
    calls = 0

    def slow_then_failing() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            time.sleep(0.25)
        raise ConnectionResetError(f"failure {calls}")

    with pytest.raises(ConnectionResetError, match="failure 1"):
        policy(attempts=10, initial_wait=0.1, max_wait=0.1, max_time=0.3).call(slow_then_failing)
    assert calls == 1
