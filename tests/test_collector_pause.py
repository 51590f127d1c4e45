"""The collector's pause: off inside, back as it was after, however callers nest, overlap or fail."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from manifest_committer.collector_pause import collector_paused


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_nested_pause_leaves_the_collector_off_until_the_outer_one_ends() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_still_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("failed commit")
    assert gc.isenabled()


def test_overlapping_pauses_of_two_threads_resume_the_collector_when_the_last_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with collector_paused():
            second_in.set()
            first_out.wait(10)
            seen["after the first left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after the first left": False}
    assert gc.isenabled()
