"""A job attempt's write markers read through a stage's gate, the ``MARKERS<i>`` files in parallel on its pool.

``markers.reader.read_markers`` (the marker server's and the command line's) reads one file after another: on a
store with round-trip latency that was a large share of a transactional job commit. Every stage reads
them here instead (the task commit and abort too): every call goes through the gate (timed under its own ``op_*`` name,
retried under the store policy, counted) and the files are read and parsed as units of work on the job's pool
(``run_bounded``), so they cost one round of latency. Called from a stage's own thread, never from a unit of
work on the pool (one pool per job call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..markers.layout import MarkerPaths
from ..markers.reader import MarkerSet, read_marker_set
from ..parallel import run_bounded
from ..statistic_names import OP_LOAD_FILE
from ..store import FileStatus
from .base import Stage

R = TypeVar("R")


class GateMarkerReads:
    """``markers.reader.MarkerReads`` over a stage's gated calls and its pool."""

    def __init__(self, gate: Stage[Any, Any]) -> None:
        self._gate = gate

    def info(self, path: str) -> FileStatus | None:
        return self._gate.info(path)

    def list_dir(self, path: str) -> list[FileStatus]:
        return self._gate.list_dir(path)

    def read_bytes(self, path: str) -> bytes:
        return self._gate.read_bytes(path, OP_LOAD_FILE)

    def map_paths(self, work: Callable[[str], R], paths: Sequence[str]) -> list[R]:
        results: list[R] = []
        if len(paths) == 1:  # no pool round trip for one file (most direct-marker levels, small jobs)
            return [work(paths[0])]
        context = self._gate.context
        run_bounded(context.pool, paths, work, max_in_flight=context.max_in_flight, on_result=results.append)
        return results


def read_job_markers(gate: Stage[Any, Any], marker_paths: MarkerPaths) -> MarkerSet:
    """Every write marker of a job attempt (``markers.reader.read_marker_set``), through ``gate``."""
    return read_marker_set(GateMarkerReads(gate), marker_paths)


MAX_SKIPPED_IN_DIAGNOSTICS = 10


def skipped_diagnostics(skipped: tuple[str, ...]) -> dict[str, str]:
    """The summary's diagnostics of markers not followed: how many, and the first few, one a line."""
    if not skipped:
        return {}
    return {
        "markers.skipped": str(len(skipped)),
        "markers.skipped.detail": "\n".join(skipped[:MAX_SKIPPED_IN_DIAGNOSTICS]),
    }
