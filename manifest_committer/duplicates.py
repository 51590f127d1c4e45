"""Finding a destination claimed twice among millions, in bounded memory.

The job commit must refuse two claims on one destination file before anything in the destination changes
(docs/safety.md, "Nothing touched on a bad manifest"). Keeping every destination, or even one Python hash object per
file in a set, grows with the file count (69 MB per million files). Here each destination's 64-bit hash goes into a
fixed-size ``array('q')`` run (8 bytes a file); a full run is sorted and spilled to a local file next to the entry spill
file. At the end the sorted runs are merged (``heapq.merge``), and equal neighbours are the candidate hashes: usually
none, since two distinct paths share a 64-bit hash about once in 10^7 jobs of a million files. The caller then confirms
each candidate exactly, by comparing the paths themselves in its entry file.

Memory: one run (``run_size`` times 8 bytes, and the sort's temporary list) plus one read buffer per spilled run
during the merge; with more runs than ``MERGE_FAN_IN`` they are first merged into longer runs, so the merge too
stays bounded whatever the file count.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import Self

from .entry_file import HASHES_SUFFIX
from .parallel import slices

log = logging.getLogger(__name__)

RUN_SIZE = 1 << 17
"""Hashes kept in memory before a run is sorted and spilled: 1 MiB of ``array('q')``."""
MERGE_FAN_IN = 64
"""Runs merged at once; more are first merged in groups into longer runs."""
_READ_ITEMS = 1 << 12
"""Hashes read at a time from each run during a merge: 32 KiB a run."""
_ITEM_SIZE = array("q").itemsize


class DuplicateHashes:
    """Collect 64-bit hashes, then name those seen more than once; spill runs live in one temporary file."""

    def __init__(
        self,
        directory: str | None = None,
        run_size: int = RUN_SIZE,
        fan_in: int = MERGE_FAN_IN,
        prefix: str = "manifest-committer-",
    ) -> None:
        """``prefix``: the spill file's name starts so (``entry_file.spill_prefix``), so that a killed run's file
        is found and removed like its entry file."""
        self._directory = directory
        self._prefix = prefix
        self._run_size = run_size
        self._fan_in = fan_in
        self._current = array("q")
        self._runs: list[tuple[int, int]] = []
        """(offset, count) of each sorted run in the spill file."""
        self._spill: int | None = None
        self._spill_path: str | None = None
        self._spill_end = 0

    def add(self, value: int) -> None:
        """Record one hash (any Python ``hash()``: a signed 64-bit integer)."""
        current = self._current
        current.append(value)
        if len(current) >= self._run_size:
            self._spill_run(current)
            self._current = array("q")

    def add_all(self, values: Iterable[int]) -> None:
        """Record many hashes at once (one manifest's): the array grows in C, and spills as ``add`` would."""
        current = self._current
        current.extend(values)
        while len(current) >= self._run_size:
            self._spill_run(current[: self._run_size])
            current = current[self._run_size :]
        self._current = current

    def candidates(self) -> Iterator[int]:
        """Every hash added more than once, in ascending order, each once."""
        if not self._runs and len(set(self._current)) == len(self._current):
            return  # one run in memory, all distinct (the usual answer): a set says so faster than a sort
        runs: list[Iterable[int]] = [self._read_run(offset, count) for offset, count in self._merged_runs()]
        runs.append(sorted(self._current))
        previous: int | None = None
        reported: int | None = None
        for value in heapq.merge(*runs):
            if value == previous and value != reported:
                reported = value
                yield value
            previous = value

    def close(self) -> None:
        """Remove the spill file; safe to call more than once."""
        if self._spill is not None:
            os.close(self._spill)
            self._spill = None
        if self._spill_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._spill_path)
            self._spill_path = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs ----------------------------------------------------------------------------------------------------

    def _spill_run(self, values: Iterable[int]) -> None:
        run = array("q", sorted(values))
        self._write_run(run)

    def _write_run(self, run: array[int]) -> None:
        if self._spill is None:
            handle, self._spill_path = tempfile.mkstemp(prefix=self._prefix, suffix=HASHES_SUFFIX, dir=self._directory)
            self._spill = handle
            log.debug("spilling destination hashes to %s", self._spill_path)
        offset = self._spill_end
        data = run.tobytes()
        os.pwrite(self._spill, data, offset)
        self._spill_end += len(data)
        self._runs.append((offset, len(run)))

    def _read_run(self, offset: int, count: int) -> Iterator[int]:
        assert self._spill is not None
        position, remaining = offset, count
        while remaining:
            items = min(remaining, _READ_ITEMS)
            block = array("q")
            block.frombytes(os.pread(self._spill, items * _ITEM_SIZE, position))
            yield from block
            position += items * _ITEM_SIZE
            remaining -= items

    def _merged_runs(self) -> list[tuple[int, int]]:
        """The spilled runs, first merged in groups until at most ``fan_in`` remain."""
        spill = self._spill
        while len(self._runs) > self._fan_in:
            assert spill is not None, "more than one run means some were spilled"
            groups = slices(self._runs, self._fan_in)
            self._runs = []
            for group in groups:
                start, total = self._spill_end, 0
                buffer = array("q")
                for value in heapq.merge(*(self._read_run(offset, count) for offset, count in group)):
                    buffer.append(value)
                    if len(buffer) >= _READ_ITEMS:
                        os.pwrite(spill, buffer.tobytes(), self._spill_end)
                        self._spill_end += len(buffer) * _ITEM_SIZE
                        total += len(buffer)
                        buffer = array("q")
                if buffer:
                    os.pwrite(spill, buffer.tobytes(), self._spill_end)
                    self._spill_end += len(buffer) * _ITEM_SIZE
                    total += len(buffer)
                self._runs.append((start, total))
        return list(self._runs)


__all__ = ["MERGE_FAN_IN", "RUN_SIZE", "DuplicateHashes"]
