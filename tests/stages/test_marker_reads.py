"""A job attempt's markers read through a stage's gate: every call gated, the ``MARKERS<i>`` files at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from manifest_committer.markers import BATCHED, DirectMarkers, Marker, MarkerPaths, MarkerSet
from manifest_committer.stages.base import Stage, StageContext
from manifest_committer.stages.marker_reads import read_job_markers
from manifest_committer.statistic_names import OP_GET_FILE_STATUS, OP_LIST_STATUS, OP_LOAD_FILE
from manifest_committer.store import StoreOperations, open_store
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.stage_context import make_context
from tests.fixtures.stores import clear_memory_filesystem


class SlowBatchReads(WrappingStore):
    """Reads of ``MARKERS<i>`` files take 50 ms; records how many were in flight at once."""

    def __init__(self, inner: StoreOperations) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._now = 0
        self.peak = 0
        self.operations: list[str] = []

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        self.operations.append(operation)
        if operation != "read_bytes" or "/MARKERS" not in path or path.endswith("MARKERS.type"):
            return call()
        with self._lock:
            self._now += 1
            self.peak = max(self.peak, self._now)
        try:
            time.sleep(0.05)
            return call()
        finally:
            with self._lock:
                self._now -= 1


class _ReadMarkers(Stage[MarkerPaths, MarkerSet]):
    name = "read_markers"

    def execute(self, arguments: MarkerPaths) -> MarkerSet:
        return read_job_markers(self, arguments)


def _context(pool: ThreadPoolExecutor | None) -> tuple[StageContext, SlowBatchReads, MarkerPaths]:
    clear_memory_filesystem()
    inner = open_store("memory://markers-gate/table").store
    store = SlowBatchReads(inner)
    context = make_context("memory://markers-gate/table", pool=pool, store=store)
    return context, store, MarkerPaths(context.paths)


def _write_batches(store: StoreOperations, paths: MarkerPaths, files: int) -> set[Marker]:
    store.write_bytes(paths.type_file, BATCHED.encode())
    expected = set()
    for index in range(files):
        markers = [Marker(f"dt={index}/part-{n}.csv") for n in range(3)]
        store.write_bytes(paths.batched_file(index), "".join(f"{m.name}\n" for m in markers).encode())
        expected.update(markers)
    return expected


def test_the_batched_files_are_read_at_once_on_the_pool_each_call_gated() -> None:
    with ThreadPoolExecutor(8) as pool:
        context, store, paths = _context(pool)
        expected = _write_batches(store.inner, paths, 6)
        DirectMarkers(store.inner, paths, context.store_retry).create("dt=9/fallback.csv")
        expected.add(Marker("dt=9/fallback.csv"))

        found = _ReadMarkers(context).apply(paths)

    assert found.markers == expected
    assert found.batched
    assert found.direct_count == 1
    assert len(found.batched_files) == 6
    assert store.peak > 1, "the MARKERS files were read one after another"
    counters = context.stats.snapshot().counters
    assert counters[OP_LOAD_FILE] == 7, "MARKERS.type and each MARKERS<i>, each timed as a read"
    assert counters[OP_LIST_STATUS] == 2, "the markers directory, then dt=9 below it"
    assert counters.get(OP_GET_FILE_STATUS, 0) == 0, "MARKERS.type was listed: no probe for it"


def test_without_a_pool_the_same_markers_one_after_another() -> None:
    context, store, paths = _context(None)
    expected = _write_batches(store.inner, paths, 3)

    assert _ReadMarkers(context).apply(paths).markers == expected
    assert store.peak == 1
