"""A commit leaves the process's garbage collector as its caller set it: enabled while enabled, disabled when a
thread of the caller disables it meanwhile, and collecting the cycles other threads make during the commit."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import StoreOperations, open_store
from manifest_committer.store.wrapping import WrappingStore

TASKS = 4
FILES_A_TASK = 50


class Watched(WrappingStore):
    """Runs ``during`` (once, or at every call) inside the committer's store calls, in whichever thread makes them."""

    def __init__(self, inner: StoreOperations, during: Callable[[str], None]) -> None:
        super().__init__(inner)
        self.during = during

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        self.during(operation)
        return call()


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    """The collector enabled at the start, and as pytest had it at the end, whatever the test did."""
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def commit_a_job(destination: Path, during: Callable[[str], None], protocol: str = "manifest") -> mc.SuccessData:
    """A job of a few tasks, each writing a few files, committed with ``during`` run inside every store call."""
    config = mc.CommitterConfig(markers_type=mc.MarkerType.DIRECT)
    with mc.create_committer(
        str(destination), "job-gc", protocol, config=config, store_wrapper=lambda inner: Watched(inner, during)
    ) as committer:
        committer.setup_job()
        for number in range(TASKS):
            task = committer.setup_task(f"task_{number:05d}", f"attempt_{number:05d}_0")
            for file in range(FILES_A_TASK):
                with task.fs.open(f"{task.work_path}/dt={file % 7}/part-{number:05d}-{file:03d}.csv", "wb") as stream:
                    stream.write(b"x\n")
            committer.commit_task(task)
        return committer.commit_job()


@pytest.mark.parametrize("protocol", ["manifest", "transactional"])
def test_an_enabled_collector_stays_enabled_through_every_store_call_of_a_commit(tmp_path: Path, protocol: str) -> None:
    seen: list[bool] = []
    summary = commit_a_job(tmp_path, lambda operation: seen.append(gc.isenabled()), protocol)
    assert summary.success and len(seen) > TASKS * FILES_A_TASK
    assert all(seen), f"the collector was off during {seen.count(False)} of {len(seen)} store calls"
    assert gc.isenabled()


def test_a_collector_another_thread_disables_during_a_commit_stays_disabled(tmp_path: Path) -> None:
    disabled = threading.Event()

    def disable_once(operation: str) -> None:
        if operation.startswith("rename") and not disabled.is_set():
            user = threading.Thread(target=gc.disable)  # the caller's own thread, deciding for its process
            user.start()
            user.join()
            disabled.set()

    summary = commit_a_job(tmp_path, disable_once)
    assert summary.success and disabled.is_set()
    assert not gc.isenabled(), "the commit turned back on a collector the caller had turned off"


def test_a_cycle_another_thread_makes_during_a_commit_is_collected_during_it(tmp_path: Path) -> None:
    """The other thread makes a cycle, drops it, then goes on allocating as a program does: the collector, run by
    those allocations, frees the cycle while the commit is still running."""
    outcomes: list[bool] = []

    class Node:
        partner: Node | None = None

    def allocate_beside_a_cycle() -> None:
        first, second = Node(), Node()
        first.partner, second.partner = second, first
        gone = weakref.ref(first)
        del first, second
        kept: list[list[int]] = []
        for count in range(200_000):
            kept.append([count])
            if gone() is None:
                break
        outcomes.append(gone() is None)

    def during(operation: str) -> None:
        if operation.startswith("rename") and not outcomes:
            user = threading.Thread(target=allocate_beside_a_cycle)
            user.start()
            user.join()

    summary = commit_a_job(tmp_path, during)
    assert summary.success and outcomes == [True], "a cycle of another thread waited for the commit to end"


def test_the_errors_of_a_batch_of_failed_calls_are_freed_without_the_collector(tmp_path: Path) -> None:
    """A batch whose calls fail (a throttled store answers every call so) hands back its errors; dropped, they
    are freed at once by reference counting, none left in a cycle for the collector to find."""
    store = WrappingStore(open_store(str(tmp_path)).store)
    missing = [f"{tmp_path}/missing-{number}" for number in range(3)]
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable is kept in gc.garbage, to look at
    try:
        outcomes = store.read_files(missing)
        assert all(isinstance(outcome, FileNotFoundError) for outcome in outcomes)
        del outcomes
        gc.collect()
        left = [found for found in gc.garbage if isinstance(found, FileNotFoundError) and found.filename in missing]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == [], "errors of the batch were left in cycles"
