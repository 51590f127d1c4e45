"""Direct markers: one empty object per data file, written by the task itself before it creates the file.

Hudi's legacy kind, and this project's fallback whenever a task cannot reach the marker server: it needs
nothing but the store, at the price of one store call per data file (and one listing per directory to read).
"""

from __future__ import annotations

import logging

from ..retry import RetryPolicy
from ..store import StoreOperations
from .layout import MARKER_EXTENSION, Marker, MarkerPaths, MarkerStoreCalls, parse_marker

log = logging.getLogger(__name__)


class DirectMarkers:
    """Writes direct markers into one job attempt's markers directory."""

    def __init__(self, store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> None:
        self._calls = MarkerStoreCalls(store, retry)
        self.paths = paths

    def create(self, data_file: str, io_type: str = "CREATE") -> Marker:
        """Record that ``data_file`` (relative to the destination) is about to be written; returns its marker.

        Writing an empty object again is harmless, so no existence probe is spent: a retried task simply
        rewrites its marker (Hudi's direct markers failed such a task with "marker already exists").
        """
        marker = parse_marker(f"{data_file}{MARKER_EXTENSION}{io_type}", f"marker for {data_file!r}")
        path = self.paths.direct_marker(marker)
        self._calls.write_bytes(path, b"")
        log.debug("Direct marker %s", path)
        return marker
