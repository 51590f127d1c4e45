"""Bounded parallel execution: the one way stages run work on the job's thread pool.

Unlike Hadoop's TaskPool, which submits one future per item up front (its defect D8: memory grows with the
file count), at most ``max_in_flight`` items are submitted at a time; results are handed to ``on_result`` in
the calling thread, so aggregation needs no locks. After the first failure nothing new is submitted, work in
flight finishes, and the first error is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_bounded(
    pool: Executor | None,
    items: Iterable[T],
    work: Callable[[T], R],
    *,
    max_in_flight: int,
    on_result: Callable[[R], None] | None = None,
) -> None:
    """Run ``work`` over ``items`` on ``pool`` (serially if ``None``), keeping at most ``max_in_flight`` queued."""
    if pool is None or max_in_flight <= 1:
        for item in items:
            result = work(item)
            if on_result is not None:
                on_result(result)
        return

    in_flight: set[Future[R]] = set()
    first_error: BaseException | None = None

    def drain(done: set[Future[R]]) -> None:
        nonlocal first_error
        for future in done:
            error = future.exception()
            if error is not None:
                if first_error is None:
                    first_error = error
            elif on_result is not None and first_error is None:
                try:
                    on_result(future.result())
                except BaseException as callback_error:
                    first_error = callback_error

    try:
        for item in items:
            if first_error is not None:
                break
            if len(in_flight) >= max_in_flight:
                done, pending = wait(in_flight, return_when=FIRST_COMPLETED)
                in_flight = set(pending)
                drain(done)
                if first_error is not None:
                    break
            in_flight.add(pool.submit(work, item))
    except BaseException as iteration_error:
        if first_error is None:
            first_error = iteration_error
    finally:
        if in_flight:
            done, _ = wait(in_flight)
            drain(done)
    if first_error is not None:
        raise first_error
