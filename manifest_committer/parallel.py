"""Bounded parallel execution: the one way stages run work on the job's thread pool.

Unlike Hadoop's TaskPool, which submits one future per item up front (so memory grows with the
file count), at most ``max_in_flight`` items are submitted at a time; results are handed to ``on_result`` in
the calling thread, so aggregation needs no locks. After the first failure nothing new is submitted, work in
flight finishes, and the first error is raised.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from typing import Generic, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

CALLS_A_BATCH = 16
"""Independent calls of one kind (reads of manifests, deletes of task attempts) handed to the store in one batch
call where it puts a batch's calls in flight together (``concurrent_calls``): a thread a batch, not a call
(starting a hundred threads took longer than the calls)."""

CONCURRENT_DEMAND = 6
"""Where a unit's calls go out together (``CallSlots``), units in flight ask for this many times ``io.threads``
slots: enough to keep every slot busy through the units' other calls, without a unit a thread."""


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

    # Finished futures arrive through their done callbacks, one queue put each: waiting for "the first of the
    # futures in flight" (``concurrent.futures.wait``) installs and removes a waiter on every one of them per
    # completion, O(in flight) under the GIL each time; at 256 threads that was a large share of a call's CPU.
    finished: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
    in_flight = 0
    first_error: BaseException | None = None

    def take_one() -> None:
        nonlocal first_error, in_flight
        future = finished.get()
        in_flight -= 1
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
            while in_flight >= max_in_flight:
                take_one()
            if first_error is not None:
                break
            future = pool.submit(work, item)
            in_flight += 1
            future.add_done_callback(finished.put)
    except BaseException as iteration_error:
        if first_error is None:
            first_error = iteration_error
    finally:
        while in_flight:
            take_one()
    if first_error is not None:
        raise first_error


def slices(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` cut in order into slices of ``size`` (the last may be shorter): a batch, a unit of work each."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def run_together(pool: Executor | None, steps: Sequence[Callable[[], object]], *, max_in_flight: int) -> None:
    """Run independent ``steps`` (each keeps its own answer) at once, up to ``max_in_flight``: one round trip of
    the store for all of them, not one each. The first error is raised once the steps started have finished."""
    run_bounded(pool, steps, _call, max_in_flight=max_in_flight)


def _call(step: Callable[[], object]) -> object:
    return step()


class Outcome(Generic[R]):
    """A call to make among others (a step of ``run_together``) whose answer, or error, is kept for where it is
    used: a read that only one way on needs fails only that way."""

    def __init__(self, call: Callable[[], R]) -> None:
        self._call = call
        self._answer: R | None = None
        self._error: Exception | None = None
        self._made = False

    def __call__(self) -> None:
        try:
            self._answer = self._call()
        except Exception as error:
            self._error = error
        self._made = True

    def get(self) -> R:
        """The call's answer; its error raised, if it failed."""
        if not self._made:
            raise RuntimeError("the call was not made yet")
        if self._error is not None:
            raise self._error
        return cast(R, self._answer)


def start(pool: Executor | None, call: Callable[[], R]) -> Callable[[], R]:
    """``call`` started on ``pool`` (made here and now without one) while the caller goes on; the function returned
    waits for its answer, or raises its error, each time it is called."""
    if pool is None:
        answer = call()
        return lambda: answer
    return pool.submit(call).result


SMALLEST_SHARE = 16
"""A batch waits for at least this fraction of ``CallSlots``' slots (or all it wants, if fewer)..."""
ENOUGH_FOR_A_BATCH = 16
"""... but never for more slots than this: with many slots a sixteenth is many, and the slots given back while a
batch waited for so many would stand idle."""


class CallSlots:
    """At most ``limit`` store calls in flight across a job's threads, when a thread may put several in flight
    at once (``StoreCapabilities.concurrent_calls``): ``io.threads`` keeps meaning the calls a store sees at once.

    A batch takes what is free rather than waiting for all it wants (single calls would otherwise overtake a
    large batch for ever), but not less than ``1 / SMALLEST_SHARE`` of the slots (at most ``ENOUGH_FOR_A_BATCH``),
    or all it wants if fewer: each batch costs its thread a round trip, and batches that went out with the odd
    slot given back kept their units renaming in step, all then writing their journal records at once while the
    slots stood idle; the share halves that idle time.
    A call made inside another on the same thread (a gate call that times a store call under a statistic of its
    own) goes out on the slots the outer one holds: waiting for a free one would wait for itself, and with every
    slot held so, every thread would wait for ever.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._free = self.limit
        self._least = max(1, min(self.limit // SMALLEST_SHARE, ENOUGH_FOR_A_BATCH))
        lock = threading.Lock()
        self._one_free = threading.Condition(lock)
        """Where single calls (and batches wanting one) wait: any slot given back wakes them."""
        self._share_free = threading.Condition(lock)
        """Where batches wait: woken once a share is free, so that a single call is never woken in their stead."""
        self._thread = threading.local()
        """``held``: the slots this thread took for its outermost call; ``depth``: the calls it has open."""

    def take(self, wanted: int) -> int:
        """Block until the batch's least share is free (``SMALLEST_SHARE``); take up to ``wanted`` (at least one)
        and return how many. Inside a call of this thread that holds slots, take none and return up to what it
        holds."""
        thread = self._thread
        held: int = getattr(thread, "held", 0)
        if held:
            thread.depth += 1
            return min(max(1, wanted), held)
        least = min(max(1, wanted), self._least)
        waiting = self._one_free if least == 1 else self._share_free
        with waiting:
            while self._free < least:
                waiting.wait()
            taken = min(max(1, wanted), self._free)
            self._free -= taken
        thread.held, thread.depth = taken, 1
        return taken

    def give(self, count: int) -> None:
        """End a call that ``take`` began: the outermost call of a thread gives its slots back."""
        thread = self._thread
        thread.depth -= 1
        if thread.depth:
            return
        count, thread.held = thread.held, 0
        with self._one_free:
            self._free += count
            self._one_free.notify(count)
            if self._free >= self._least:
                self._share_free.notify(count)
