"""IOStatistics: Hadoop's duration, counter and sample semantics, snapshots and merging."""

from __future__ import annotations

import threading
import time

import pytest

from manifest_committer._decode import FieldError
from manifest_committer.iostatistics import (
    DurationAccumulator,
    IOStatisticsSnapshot,
    MeanStatistic,
    StatisticsStore,
    elapsed_ms,
)


def test_durations_fill_counter_min_max_and_mean() -> None:
    store = StatisticsStore()
    store.add_duration("op_rename", 5)
    store.add_duration("op_rename", 2)
    store.add_duration("op_rename", 11)
    store.add_duration("op_rename", 40, failed=True)
    snap = store.snapshot()
    assert snap.counters == {"op_rename": 3, "op_rename.failures": 1}
    assert snap.minimums == {"op_rename.min": 2, "op_rename.failures.min": 40}
    assert snap.maximums == {"op_rename.max": 11, "op_rename.failures.max": 40}
    assert snap.meanstatistics["op_rename.mean"] == MeanStatistic(3, 18)
    assert snap.meanstatistics["op_rename.mean"].mean == pytest.approx(6.0)
    assert snap.meanstatistics["op_rename.failures.mean"] == MeanStatistic(1, 40)


def test_track_times_success_and_failure() -> None:
    store = StatisticsStore()
    with store.track("stage"):
        time.sleep(0.002)
    with pytest.raises(ZeroDivisionError), store.track("stage"):
        _ = 1 // 0
    snap = store.snapshot()
    assert snap.counters == {"stage": 1, "stage.failures": 1}
    assert snap.minimums["stage.min"] >= 2
    assert snap.meanstatistics["stage.mean"].samples == 1


def test_samples_sum_into_the_counter_and_keep_bare_names() -> None:
    store = StatisticsStore()
    for value in (4, 1, 7):
        store.add_sample("committer_task_file_count", value)
    snap = store.snapshot()
    assert snap.counters["committer_task_file_count"] == 12
    assert snap.minimums["committer_task_file_count"] == 1
    assert snap.maximums["committer_task_file_count"] == 7
    assert snap.meanstatistics["committer_task_file_count"] == MeanStatistic(3, 12)


def test_counters_and_gauges() -> None:
    store = StatisticsStore()
    store.increment("c")
    store.increment("c", 4)
    assert store.counter("c") == 5
    store.set_counter("c", 2)
    assert store.counter("c") == 2
    assert store.counter("missing") == 0
    store.set_gauge("g", 10)
    store.set_gauge("g", 3)
    assert store.snapshot().gauges == {"g": 3}


def test_merge_aggregates_like_hadoop() -> None:
    store = StatisticsStore()
    store.add_duration("op", 5)
    store.set_gauge("heap", 100)
    other = IOStatisticsSnapshot(
        counters={"op": 2, "new": 1},
        gauges={"heap": 50},
        minimums={"op.min": 1, "only.min": 9},
        maximums={"op.max": 3, "only.max": 9},
        meanstatistics={"op.mean": MeanStatistic(2, 4)},
    )
    store.merge(other)
    store.merge(IOStatisticsSnapshot(maximums={"op.max": 8}))
    snap = store.snapshot()
    assert snap.counters == {"op": 3, "new": 1}
    assert snap.gauges == {"heap": 150}
    assert snap.minimums == {"op.min": 1, "only.min": 9}
    assert snap.maximums == {"op.max": 8, "only.max": 9}
    assert snap.meanstatistics["op.mean"] == MeanStatistic(3, 9)


def test_accumulators_merge_once() -> None:
    accumulator = DurationAccumulator("commit_file_rename")
    for millis in (3, 1, 8):
        accumulator.record(millis)
    accumulator.failures = 2
    store = StatisticsStore()
    store.add_accumulator(accumulator)
    store.add_accumulator(DurationAccumulator("commit_file_rename"))  # empty: no change
    snap = store.snapshot()
    assert snap.counters == {"commit_file_rename": 3, "commit_file_rename.failures": 2}
    assert snap.minimums["commit_file_rename.min"] == 1
    assert snap.maximums["commit_file_rename.max"] == 8
    assert snap.meanstatistics["commit_file_rename.mean"] == MeanStatistic(3, 12)


def test_snapshots_are_copies() -> None:
    store = StatisticsStore()
    store.add_duration("op", 1)
    snap = store.snapshot()
    store.add_duration("op", 1)
    snap.meanstatistics["op.mean"].samples = 99
    assert snap.counters["op"] == 1
    assert store.snapshot().meanstatistics["op.mean"].samples == 2


def test_thread_safe_increments() -> None:
    store = StatisticsStore()

    def work() -> None:
        for _ in range(2000):
            store.increment("n")
            store.add_duration("d", 1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snap = store.snapshot()
    assert snap.counters["n"] == snap.counters["d"] == 16000
    assert snap.meanstatistics["d.mean"] == MeanStatistic(16000, 16000)


def test_json_form_is_sorted_and_round_trips() -> None:
    snap = IOStatisticsSnapshot(
        counters={"b": 1, "a": 2},
        gauges={"g": 3},
        minimums={"m.min": 0},
        maximums={"m.max": 4},
        meanstatistics={"z": MeanStatistic(1, 2), "m.mean": MeanStatistic(2, 5)},
    )
    raw = snap.to_dict()
    assert list(raw) == ["counters", "gauges", "minimums", "maximums", "meanstatistics"]
    assert list(raw["counters"]) == ["a", "b"]
    assert raw["meanstatistics"] == {"m.mean": {"samples": 2, "sum": 5}, "z": {"samples": 1, "sum": 2}}
    assert IOStatisticsSnapshot.from_dict(raw) == snap


def test_reading_hadoops_form() -> None:
    snap = IOStatisticsSnapshot.from_dict(
        {
            "counters": {"op": 0},
            "gauges": {},
            "minimums": {"op.min": -1, "s": 0},
            "maximums": {"op.max": -1},
            "meanstatistics": {"op.mean": {"samples": 0, "sum": 0}},
            "histograms": {"ignored": 1},
        }
    )
    assert snap.counters == {"op": 0}
    assert snap.minimums == {"s": 0}
    assert snap.maximums == {}
    assert snap.gauges == {}
    assert snap.meanstatistics == {"op.mean": MeanStatistic(0, 0)}
    assert snap.meanstatistics["op.mean"].mean == 0.0


EMPTY: dict[str, object] = {"counters": {}, "gauges": {}, "minimums": {}, "maximums": {}, "meanstatistics": {}}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (None, "iostatistics"),
        ([], "iostatistics"),
        ({**EMPTY, "counters": []}, "iostatistics.counters"),
        ({**EMPTY, "meanstatistics": [1]}, "iostatistics.meanstatistics"),
        ({**EMPTY, "meanstatistics": {"m": 3}}, "iostatistics.meanstatistics.m"),
        ({**EMPTY, "meanstatistics": {"m": {}}}, "iostatistics.meanstatistics.m.samples"),
        ({**EMPTY, "meanstatistics": {"m": {"samples": -1, "sum": 0}}}, "iostatistics.meanstatistics.m.samples"),
        ({**EMPTY, "counters": {"c": "many"}}, "iostatistics.counters.c"),
        ({**EMPTY, "counters": {"c": None}}, "iostatistics.counters.c"),
        ({**EMPTY, "gauges": "x"}, "iostatistics.gauges"),
        ({k: v for k, v in EMPTY.items() if k != "minimums"}, "iostatistics.minimums"),
    ],
)
def test_malformed_statistics_are_field_errors_naming_the_field(raw: object, field: str) -> None:
    """Any shape, not only the expected ones: ``{"meanstatistics": [1]}`` raised a bare AttributeError."""
    with pytest.raises(FieldError) as raised:
        IOStatisticsSnapshot.from_dict(raw)
    assert raised.value.field == field


def test_helpers() -> None:
    start = time.perf_counter() - 0.25
    assert 250 <= elapsed_ms(start) < 5000
