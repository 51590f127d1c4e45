"""A flood of markers: what each flush writes stays bounded, so N markers cost O(N) bytes, not O(N^2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from manifest_committer.markers import Marker, read_markers
from manifest_committer.markers import server as marker_server
from manifest_committer.store.wrapping import WrappingStore
from tests.markers.conftest import MarkerJob

FLOOD = 400
LINE = len(Marker("flood/part-00000.csv").name) + 1


class CountingStore(WrappingStore):
    """Counts the bytes every write and append of a ``MARKERS<i>`` file hands the store."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.bytes_written = 0

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        return call()

    def write_bytes(self, path: str, data: bytes) -> None:
        if "/MARKERS" in path and not path.endswith(".type"):
            self.bytes_written += len(data)
        super().write_bytes(path, data)

    def append_bytes(self, path: str, data: bytes) -> None:
        if "/MARKERS" in path:
            self.bytes_written += len(data)
        super().append_bytes(path, data)


def test_a_flood_of_one_marker_a_flush_writes_linear_bytes(job: MarkerJob, monkeypatch: pytest.MonkeyPatch) -> None:
    """Suspected: a flood of forged markers made each flush rewrite its whole file (Hudi's flush does)."""
    rewrite_cap = 16
    monkeypatch.setattr(marker_server, "MAX_LINES_PER_REWRITTEN_FILE", rewrite_cap, raising=False)
    counting = CountingStore(job.store)
    with job.with_store(counting).server(interval=1, batch_threads=1) as server:
        for index in range(FLOOD):  # one marker a batch: the worst case for a file rewritten at each flush
            assert server.create(Marker(f"flood/part-{index:05d}.csv")).result(timeout=5) is True

    assert len(read_markers(job.store, job.paths, job.retry).markers) == FLOOD
    assert counting.bytes_written <= FLOOD * LINE * rewrite_cap, "bounded rewrites or appends, never the whole file"
