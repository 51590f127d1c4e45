"""IOStatistics: Hadoop's statistics model, its JSON form, and a thread-safe store that collects it.

Hadoop's JSON has five maps: ``counters``, ``gauges``, ``minimums``, ``maximums`` and ``meanstatistics``
(``{"samples": n, "sum": s}``). A *duration* statistic ``X`` fills ``X``/``X.failures`` counters and
``X.min``/``X.max``/``X.mean`` entries in milliseconds; a *sample* statistic adds its value to counter ``X`` and
keeps min/max/mean under ``X`` itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ._decode import child, integer, integer_map, json_object, required

FAILURES = ".failures"


@dataclass(slots=True)
class MeanStatistic:
    """A mean kept as sample count and sum, so means from many tasks merge exactly."""

    samples: int = 0
    sum: int = 0

    def add(self, other: MeanStatistic) -> None:
        self.samples += other.samples
        self.sum += other.sum

    @property
    def mean(self) -> float:
        return self.sum / self.samples if self.samples else 0.0


@dataclass(slots=True)
class IOStatisticsSnapshot:
    """A point-in-time copy of statistics, as Hadoop serializes ``IOStatisticsSnapshot``."""

    counters: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, int] = field(default_factory=dict)
    minimums: dict[str, int] = field(default_factory=dict)
    maximums: dict[str, int] = field(default_factory=dict)
    meanstatistics: dict[str, MeanStatistic] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counters": dict(sorted(self.counters.items())),
            "gauges": dict(sorted(self.gauges.items())),
            "minimums": dict(sorted(self.minimums.items())),
            "maximums": dict(sorted(self.maximums.items())),
            "meanstatistics": {k: {"samples": v.samples, "sum": v.sum} for k, v in sorted(self.meanstatistics.items())},
        }

    @classmethod
    def from_dict(cls, raw: Any, field: str = "iostatistics") -> IOStatisticsSnapshot:
        """Read Hadoop's form, as the schemas' ``iostatistics`` defines it; ``-1`` minimums/maximums (Hadoop's
        "unset") are dropped. A value of the wrong shape is a ``FieldError`` naming its path below ``field``."""
        raw = json_object(raw, field)
        means: dict[str, MeanStatistic] = {}
        means_field = child(field, "meanstatistics")
        for key, value in json_object(required(raw, "meanstatistics", field), means_field).items():
            mean_field = f"{means_field}.{key}"
            mean = json_object(value, mean_field)
            means[key] = MeanStatistic(
                integer(required(mean, "samples", mean_field), child(mean_field, "samples"), minimum=0),
                integer(required(mean, "sum", mean_field), child(mean_field, "sum")),
            )

        def longs(name: str) -> dict[str, int]:
            return integer_map(required(raw, name, field), child(field, name))

        return cls(
            counters=longs("counters"),
            gauges=longs("gauges"),
            minimums={k: v for k, v in longs("minimums").items() if v >= 0},
            maximums={k: v for k, v in longs("maximums").items() if v >= 0},
            meanstatistics=means,
        )


@dataclass(slots=True)
class DurationAccumulator:
    """Durations gathered by one worker without locking, merged into a store once per unit of work."""

    name: str
    count: int = 0
    failures: int = 0
    total_ms: int = 0
    min_ms: int = -1
    max_ms: int = -1

    def record(self, millis: int) -> None:
        self.count += 1
        self.total_ms += millis
        if self.min_ms < 0 or millis < self.min_ms:
            self.min_ms = millis
        self.max_ms = max(self.max_ms, millis)


class StatisticsStore:
    """Thread-safe statistics of one committer call, snapshotted into manifests and ``_SUCCESS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = IOStatisticsSnapshot()

    def increment(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._data.counters[name] = self._data.counters.get(name, 0) + amount

    def set_counter(self, name: str, value: int) -> None:
        with self._lock:
            self._data.counters[name] = value

    def counter(self, name: str) -> int:
        with self._lock:
            return self._data.counters.get(name, 0)

    def set_gauge(self, name: str, value: int) -> None:
        with self._lock:
            self._data.gauges[name] = value

    def _record_locked(self, key: str, count: int, total: int, low: int, high: int) -> None:
        data = self._data
        data.counters[key] = data.counters.get(key, 0) + count
        if low >= 0:
            current = data.minimums.get(key + ".min")
            data.minimums[key + ".min"] = low if current is None else min(current, low)
        if high >= 0:
            current = data.maximums.get(key + ".max")
            data.maximums[key + ".max"] = high if current is None else max(current, high)
        mean = data.meanstatistics.setdefault(key + ".mean", MeanStatistic())
        mean.samples += count
        mean.sum += total

    def add_duration(self, name: str, millis: int, failed: bool = False) -> None:
        key = name + FAILURES if failed else name
        with self._lock:
            self._record_locked(key, 1, millis, millis, millis)

    def add_accumulator(self, acc: DurationAccumulator) -> None:
        with self._lock:
            if acc.count:
                self._record_locked(acc.name, acc.count, acc.total_ms, acc.min_ms, acc.max_ms)
            if acc.failures:
                key = acc.name + FAILURES
                self._data.counters[key] = self._data.counters.get(key, 0) + acc.failures

    def add_sample(self, name: str, value: int) -> None:
        """Hadoop's sample statistic: counter sums the values; min/max/mean under the bare name."""
        with self._lock:
            data = self._data
            data.counters[name] = data.counters.get(name, 0) + value
            data.minimums[name] = min(data.minimums.get(name, value), value)
            data.maximums[name] = max(data.maximums.get(name, value), value)
            mean = data.meanstatistics.setdefault(name, MeanStatistic())
            mean.samples += 1
            mean.sum += value

    @contextmanager
    def track(self, name: str) -> Iterator[None]:
        """Time a block as duration statistic ``name``; an exception records ``name.failures`` and propagates."""
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self.add_duration(name, elapsed_ms(start), failed=True)
            raise
        self.add_duration(name, elapsed_ms(start))

    def merge(self, other: IOStatisticsSnapshot) -> None:
        """Aggregate another snapshot: counters add, minimums take the least, maximums the greatest."""
        with self._lock:
            data = self._data
            for k, v in other.counters.items():
                data.counters[k] = data.counters.get(k, 0) + v
            for k, v in other.gauges.items():
                data.gauges[k] = data.gauges.get(k, 0) + v
            for k, v in other.minimums.items():
                data.minimums[k] = min(data.minimums.get(k, v), v)
            for k, v in other.maximums.items():
                data.maximums[k] = max(data.maximums.get(k, v), v)
            for k, m in other.meanstatistics.items():
                data.meanstatistics.setdefault(k, MeanStatistic()).add(m)

    def snapshot(self) -> IOStatisticsSnapshot:
        with self._lock:
            d = self._data
            return IOStatisticsSnapshot(
                counters=dict(d.counters),
                gauges=dict(d.gauges),
                minimums=dict(d.minimums),
                maximums=dict(d.maximums),
                meanstatistics={k: MeanStatistic(v.samples, v.sum) for k, v in d.meanstatistics.items()},
            )


def elapsed_ms(start: float) -> int:
    """Milliseconds since a ``time.perf_counter()`` reading, rounded as Hadoop records durations."""
    return int((time.perf_counter() - start) * 1000)
