"""Read a job attempt's markers back from the store alone: direct, batched, or both after a fallback.

Rollback and job commit need only the files, never the marker server (Hudi's rollback needed to guess the
type when ``MARKERS.type`` was missing, and read too few files). Every name read is checked by
``layout.parse_marker``; a file that is neither a marker nor the directory's own state is an error, since a
directory not understood is a directory whose data files might not all be found.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

from ..errors import MarkerError
from ..retry import RetryPolicy
from ..store import StoreOperations
from ..store.local import is_write_in_progress
from .layout import (
    BATCHED,
    HEARTBEAT_FILE,
    MARKERS_TYPE_FILE,
    SERVER_STATE_FILE,
    Marker,
    MarkerPaths,
    MarkerStoreCalls,
    batched_file_index,
    parse_marker,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MarkerSet:
    """What a markers directory records."""

    markers: frozenset[Marker]
    data_files: frozenset[str]
    """Store paths of the data files the markers name (each under the destination)."""
    batched: bool
    """``MARKERS.type`` says ``BATCHED``."""
    direct_count: int
    """Direct markers found (a batched job holds some after a task fell back)."""
    batched_files: tuple[str, ...]
    """The ``MARKERS<i>`` files read."""


def parse_batched_lines(data: bytes, path: str) -> tuple[list[Marker], bool]:
    """The markers of one ``MARKERS<i>`` file, and whether its last line was torn (no final newline).

    The server writes each line with its ``\\n``, so a last line without one is what a write cut short leaves
    on a POSIX store: it is dropped with a warning (it may be a prefix of a real name, and a rollback must never
    delete a file a marker did not name). Any other bad line is a ``MarkerError`` naming file and line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MarkerError(f"{path}: not UTF-8 ({error})") from None
    lines = text.split("\n")
    torn = lines[-1] != ""
    if torn:
        log.warning("%s: ignoring a last line without newline (a write cut short?): %r", path, lines[-1][:200])
    markers = [parse_marker(line, f"{path} line {number}") for number, line in enumerate(lines[:-1], 1)]
    return markers, torn


def read_marker_type(calls: MarkerStoreCalls, paths: MarkerPaths) -> str | None:
    """``BATCHED`` if ``MARKERS.type`` says so, ``None`` if there is none; ``MarkerError`` for anything else."""
    if calls.info(paths.type_file) is None:
        return None
    raw = calls.read_bytes(paths.type_file)
    text = raw.decode("utf-8", errors="replace").strip()
    if text != BATCHED:
        raise MarkerError(f"{paths.type_file}: unknown marker type {text[:100]!r}; known: {BATCHED}")
    return text


def read_markers(store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> MarkerSet:
    """Every marker of the job attempt, from the files: ``MARKERS<i>`` lines and direct markers alike.

    A missing markers directory is an empty set (the job wrote no data file). Raises ``MarkerError`` naming
    the file (and line) for an unknown ``MARKERS.type``, a crafted marker name, or a stray file.
    """
    calls = MarkerStoreCalls(store, retry)
    root = paths.markers_dir
    try:
        top = calls.list_dir(root)
    except FileNotFoundError:
        return MarkerSet(frozenset(), frozenset(), batched=False, direct_count=0, batched_files=())
    marker_type = read_marker_type(calls, paths)
    found: set[Marker] = set()
    batched_files: list[str] = []
    direct = 0
    pending = [(status, True) for status in top]
    while pending:
        status, at_top = pending.pop()
        relative = _relative(root, status.path)
        if status.is_dir:
            pending.extend((child, False) for child in calls.list_dir(status.path))
            continue
        name = posixpath.basename(relative)
        if at_top and name in (MARKERS_TYPE_FILE, SERVER_STATE_FILE, HEARTBEAT_FILE):
            continue
        if is_write_in_progress(name):
            continue  # another process is writing a marker file here right now
        if at_top and batched_file_index(name) is not None:
            if marker_type is None:
                raise MarkerError(f"{status.path}: a batched marker file in a directory without {MARKERS_TYPE_FILE}")
            markers, _ = parse_batched_lines(calls.read_bytes(status.path), status.path)
            found.update(markers)
            batched_files.append(status.path)
            continue
        found.add(parse_marker(relative, status.path))
        direct += 1
    log.debug("Markers of %s: %d (%d direct, %d batched files)", root, len(found), direct, len(batched_files))
    return MarkerSet(
        markers=frozenset(found),
        data_files=frozenset(paths.data_file(marker) for marker in found),
        batched=marker_type == BATCHED,
        direct_count=direct,
        batched_files=tuple(sorted(batched_files)),
    )


def _relative(root: str, path: str) -> str:
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise MarkerError(f"{path}: listed under {root} but not inside it")
    return path[len(prefix) :]
