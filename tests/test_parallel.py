"""run_bounded: at most max_in_flight items queued, first error raised, nothing new submitted after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from manifest_committer.parallel import ENOUGH_FOR_A_BATCH, CallSlots, Outcome, run_bounded, run_together


class CountingPool(ThreadPoolExecutor):
    """Counts futures submitted and not yet finished, and remembers the most there ever were."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self._lock = threading.Lock()
        self.outstanding = 0
        self.most_outstanding = 0
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            self.submitted += 1
            self.outstanding += 1
            self.most_outstanding = max(self.most_outstanding, self.outstanding)
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: Future[Any]) -> None:
        with self._lock:
            self.outstanding -= 1


def slow_square(item: int) -> int:
    time.sleep(0.001)
    return item * item


def test_serial_mode_runs_in_order_in_the_calling_thread() -> None:
    caller = threading.get_ident()
    seen: list[tuple[int, int]] = []

    def work(item: int) -> int:
        seen.append((item, threading.get_ident()))
        return item + 1

    results: list[int] = []
    run_bounded(None, range(5), work, max_in_flight=8, on_result=results.append)
    assert results == [1, 2, 3, 4, 5]
    assert seen == [(n, caller) for n in range(5)]


def test_one_in_flight_means_serial_even_with_a_pool() -> None:
    with CountingPool(4) as pool:
        results: list[int] = []
        run_bounded(pool, range(6), slow_square, max_in_flight=1, on_result=results.append)
    assert results == [0, 1, 4, 9, 16, 25]
    assert pool.submitted == 0


@pytest.mark.parametrize("max_in_flight", [2, 5, 16])
def test_never_more_than_max_in_flight_submitted(max_in_flight: int) -> None:
    consumed = 0

    def items() -> Iterator[int]:
        nonlocal consumed
        for n in range(200):
            consumed += 1
            yield n

    results: list[int] = []
    with CountingPool(8) as pool:
        run_bounded(pool, items(), slow_square, max_in_flight=max_in_flight, on_result=results.append)
    assert sorted(results) == [n * n for n in range(200)]
    assert consumed == pool.submitted == 200
    assert 1 < pool.most_outstanding <= max_in_flight


def test_results_are_handed_over_in_the_calling_thread() -> None:
    caller = threading.get_ident()
    threads: set[int] = set()

    def absorb(_: int) -> None:
        threads.add(threading.get_ident())

    with ThreadPoolExecutor(4) as pool:
        run_bounded(pool, range(50), slow_square, max_in_flight=4, on_result=absorb)
    assert threads == {caller}


def test_the_first_error_is_raised_serially() -> None:
    def work(item: int) -> int:
        if item in (3, 5):
            raise ValueError(f"item {item}")
        return item

    done: list[int] = []
    with pytest.raises(ValueError, match="item 3"):
        run_bounded(None, range(10), work, max_in_flight=1, on_result=done.append)
    assert done == [0, 1, 2]


def test_the_error_of_a_failed_item_is_raised_from_the_pool() -> None:
    def work(item: int) -> int:
        if item == 7:
            raise KeyError("seven")
        return item

    with ThreadPoolExecutor(4) as pool, pytest.raises(KeyError, match="seven"):
        run_bounded(pool, range(40), work, max_in_flight=4)


def test_nothing_is_submitted_after_a_failure_and_work_in_flight_finishes() -> None:
    running = 0
    lock = threading.Lock()

    def work(item: int) -> int:
        nonlocal running
        with lock:
            running += 1
        try:
            if item == 0:
                raise RuntimeError("first item fails")
            time.sleep(0.002)
            return item
        finally:
            with lock:
                running -= 1

    with CountingPool(4) as pool:
        with pytest.raises(RuntimeError, match="first item fails"):
            run_bounded(pool, range(10_000), work, max_in_flight=4)
        assert running == 0, "every submitted item finished before the error was raised"
        assert pool.outstanding == 0
    assert pool.submitted <= 2 * 4


def test_an_error_of_the_item_iterator_is_raised_after_work_in_flight() -> None:
    def items() -> Iterator[int]:
        yield from range(5)
        raise OSError("listing failed")

    executed: list[int] = []
    lock = threading.Lock()

    def work(item: int) -> int:
        time.sleep(0.002)
        with lock:
            executed.append(item)
        return item

    with ThreadPoolExecutor(2) as pool, pytest.raises(OSError, match="listing failed"):
        run_bounded(pool, items(), work, max_in_flight=3)
    assert sorted(executed) == [0, 1, 2, 3, 4], "items submitted before the error all ran to the end"


def test_an_error_of_the_result_handler_is_raised() -> None:
    def absorb(value: int) -> None:
        if value == 9:
            raise ArithmeticError("handler")

    with ThreadPoolExecutor(2) as pool, pytest.raises(ArithmeticError, match="handler"):
        run_bounded(pool, range(20), slow_square, max_in_flight=2, on_result=absorb)


def test_no_items() -> None:
    with CountingPool(2) as pool:
        run_bounded(pool, [], slow_square, max_in_flight=4)
    assert pool.submitted == 0


class _CountingList(list[Any]):
    appended = 0

    def append(self, item: Any) -> None:
        _CountingList.appended += 1
        super().append(item)


class WatchedPool(ThreadPoolExecutor):
    """Its futures count the waiters installed on them (``concurrent.futures.wait`` installs one per future)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        with future._condition:
            future._waiters = _CountingList(future._waiters)
        return future


def test_a_completion_costs_the_same_however_many_are_in_flight() -> None:
    """Finished work is taken from a queue its done callback fills, never by waiting on every future in flight
    (O(in flight) per completion: a large share of a store call's CPU at 256 threads)."""
    _CountingList.appended = 0
    results: list[int] = []
    with WatchedPool(8) as pool:
        run_bounded(pool, range(500), slow_square, max_in_flight=256, on_result=results.append)
    assert sorted(results) == [n * n for n in range(500)]
    assert _CountingList.appended == 0


def test_call_slots_give_a_batch_what_is_free_and_block_when_none_is() -> None:
    slots = CallSlots(4)
    other: list[int] = []
    holder = threading.Thread(target=lambda: other.append(slots.take(3)))  # another thread's batch, still out
    holder.start()
    holder.join(5)
    assert other == [3]
    assert slots.take(5) == 1, "a batch takes what is free rather than wait for all it wants"
    taken: list[int] = []

    def take_then_give() -> None:
        taken.append(slots.take(2))
        slots.give(taken[-1])

    waiter = threading.Thread(target=take_then_give)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not taken, "no slot free: the batch waits"
    slots.give(1)
    waiter.join(5)
    assert taken == [1], "the one slot given back"


def _finishes(work: Callable[[], object], seconds: float = 10.0) -> bool:
    """Whether ``work`` returns within ``seconds`` in a thread of its own (a daemon: one that hangs is left)."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def test_a_call_made_inside_a_call_uses_the_slot_its_thread_holds() -> None:
    """A gate call inside another (a statistic around a delete) would wait for a slot its own caller holds: with
    every slot held so, by one thread or by all of them, nothing would ever move again."""
    slots = CallSlots(1)

    def nested() -> None:
        assert slots.take(1) == 1
        assert slots.take(3) == 1, "the inner call goes out on the slot the outer one holds"
        slots.give(1)
        slots.give(1)

    assert _finishes(nested), "the inner call waited for the slot its own thread held"

    def once() -> None:
        slots.give(slots.take(1))

    assert _finishes(once), "the slot was given back once, not lost or doubled"
    assert slots.take(2) == 1, "the one slot is free again, and only one"


def test_the_slots_of_one_thread_do_not_serve_another() -> None:
    slots = CallSlots(1)
    assert slots.take(1) == 1
    assert not _finishes(lambda: slots.take(1), 0.2), "another thread still waits for the held slot"
    slots.give(1)


def test_a_batch_waits_for_its_share_of_the_slots_rather_than_go_out_with_a_few() -> None:
    """A batch sent with the odd slot given back costs its thread a whole round trip for a call or two: it waits
    for a sixteenth of the slots, or all it wants if fewer; a single call takes the one slot free."""
    slots = CallSlots(64)  # a share of 4
    release = threading.Event()

    def hold() -> None:
        slots.take(61)
        release.wait(10)
        slots.give(61)

    holder = threading.Thread(target=hold)
    holder.start()
    taken: dict[str, int] = {}

    def take(name: str, wanted: int) -> Callable[[], None]:
        def run() -> None:
            taken[name] = slots.take(wanted)
            slots.give(taken[name])

        return run

    assert _finishes(take("single", 1)) and taken["single"] == 1, "one call goes out on a free slot"
    assert _finishes(take("small", 3)) and taken["small"] == 3, "a batch wanting less than its share takes it all"
    batch = threading.Thread(target=take("batch", 10))
    batch.start()
    batch.join(0.2)
    assert batch.is_alive() and "batch" not in taken, "3 slots free, fewer than the share: the batch waits"
    release.set()
    batch.join(5)
    holder.join(5)
    assert taken["batch"] == 10


def test_with_many_slots_a_batch_waits_for_sixteen_not_a_sixteenth() -> None:
    """At 1,024 slots a sixteenth is 64: slots given back while a batch waited for so many stood idle."""
    slots = CallSlots(1024)
    slots.take(1024 - ENOUGH_FOR_A_BATCH)
    taken: list[int] = []
    batch = threading.Thread(target=lambda: taken.append(slots.take(100)), daemon=True)
    batch.start()
    batch.join(5)
    waited = batch.is_alive()
    slots.give(1024 - ENOUGH_FOR_A_BATCH)  # lets a batch that waited for more go, so the thread ends either way
    batch.join(5)
    assert not waited and taken == [ENOUGH_FOR_A_BATCH], "sixteen free slots are enough for a batch to go out"


def test_steps_run_together_each_keeping_its_answer() -> None:
    meeting = threading.Barrier(3, timeout=5)
    answers: dict[str, int] = {}

    def step(name: str, value: int) -> Callable[[], None]:
        def run() -> None:
            meeting.wait()  # breaks unless all three are running at once
            answers[name] = value

        return run

    with ThreadPoolExecutor(4) as pool:
        run_together(pool, [step("a", 1), step("b", 2), step("c", 3)], max_in_flight=4)
    assert answers == {"a": 1, "b": 2, "c": 3}


def test_the_first_error_of_steps_run_together_is_raised_after_the_others_finish() -> None:
    finished: list[str] = []

    def fail() -> None:
        raise PermissionError("refused")

    def slow() -> None:
        time.sleep(0.2)
        finished.append("slow")

    with ThreadPoolExecutor(4) as pool, pytest.raises(PermissionError, match="refused"):
        run_together(pool, [fail, slow], max_in_flight=4)
    assert finished == ["slow"]


def test_an_outcome_keeps_its_answer_or_its_error_for_where_it_is_used() -> None:
    def refused() -> int:
        raise PermissionError("refused")

    answered, failed = Outcome(lambda: 42), Outcome(refused)
    with pytest.raises(RuntimeError, match="not made yet"):
        answered.get()
    with ThreadPoolExecutor(2) as pool:
        run_together(pool, [answered, failed], max_in_flight=2)  # the failure is not raised here
    assert answered.get() == 42
    with pytest.raises(PermissionError, match="refused"):
        failed.get()
