"""Read a job attempt's markers back from the store alone: direct, batched, or both after a fallback.

Rollback and job commit need only the files, never the marker server (Hudi's rollback needed to guess the
type when ``MARKERS.type`` was missing, and read too few files). Every name read is checked by
``layout.parse_marker``. What is not a marker this job may have recorded (a crafted ``MARKERS`` line, a file
that is neither a marker nor the directory's own state, a line that is not UTF-8) is skipped and reported in
``MarkerSet.skipped``, never an error: a crafted entry must not stop a commit, an abort or a rollback, and
nothing it names is ever deleted. Every ``MARKERS<i>`` file is read whatever ``MARKERS.type`` says (or if it is
missing), so no recorded marker is missed.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..admission import all_relatives_admitted
from ..errors import MarkerError
from ..paths import TEMPORARY_DIR
from ..retry import RetryPolicy
from ..store import FileStatus, StoreOperations
from ..store.local import is_write_in_progress
from ..success_data import SUCCESS_MARKER
from .layout import (
    BATCHED,
    MARKER_EXTENSION,
    MARKERS_TYPE_FILE,
    RESERVED_PREFIXES,
    STATE_FILES,
    Marker,
    MarkerPaths,
    MarkerStoreCalls,
    batched_file_index,
    parse_marker,
)

log = logging.getLogger(__name__)
R = TypeVar("R")

_CREATE_LINE_END = f"{MARKER_EXTENSION}CREATE\n"
_SUSPECT_TEXT = ("\x00", "\r", TEMPORARY_DIR, SUCCESS_MARKER, *RESERVED_PREFIXES)
"""Text that sends a ``MARKERS`` file down the line-by-line route: each may be in a name that ``check_data_file``
refuses (a false alarm costs only the slower route)."""


class MarkerReads(Protocol):
    """The store calls the reader makes, each retried under the caller's one policy.

    ``MarkerStoreCalls`` makes them one after another (tasks, the CLI); a stage's gate times and counts each and
    runs ``map_paths`` on the job's pool, so a job commit reads its ``MARKERS<i>`` files in one round of store
    latency instead of one after another.
    """

    def info(self, path: str) -> FileStatus | None: ...

    def list_dir(self, path: str) -> list[FileStatus]: ...

    def read_bytes(self, path: str) -> bytes: ...

    def map_paths(self, work: Callable[[str], R], paths: Sequence[str]) -> list[R]:
        """``work`` applied to every path, the results in any order; the first error is raised."""
        ...


@dataclass(frozen=True, slots=True)
class MarkerSet:
    """What a markers directory records."""

    markers: frozenset[Marker]
    dest: str
    """The destination, in the store's path form."""
    batched: bool
    """``MARKERS.type`` says ``BATCHED``."""
    direct_count: int
    """Direct markers found (a batched job holds some after a task fell back)."""
    batched_files: tuple[str, ...]
    """The ``MARKERS<i>`` files read."""
    skipped: tuple[str, ...] = ()
    """What was not read as a marker, each naming the file (and line) and why: crafted or damaged entries."""

    @property
    def data_files(self) -> frozenset[str]:
        """Store paths of the data files the markers name (each under the destination), built when asked: a job
        commit needs only the relative paths, and 10,000 joins were a visible share of its CPU."""
        prefix = self.dest if not self.dest or self.dest.endswith("/") else self.dest + "/"  # posixpath.join's
        return frozenset(prefix + marker.data_file for marker in self.markers)


def parse_batched_lines(data: bytes, path: str) -> tuple[list[Marker], bool, list[str]]:
    """The markers of one ``MARKERS<i>`` file, whether its last line was torn (no final newline), and the lines
    skipped (each naming file, line and why).

    The server writes each line with its ``\\n``, so a last line without one is what a write cut short leaves
    on a POSIX store: it is dropped with a warning (it may be a prefix of a real name, and a rollback must never
    delete a file a marker did not name). Any other bad line (not UTF-8, not a marker, naming a path outside
    the destination or the committer's own files) is skipped.
    """
    try:
        text, valid = data.decode("utf-8"), True
    except UnicodeDecodeError:
        text, valid = data.decode("utf-8", errors="surrogateescape"), False  # the lines at fault are skipped
    end = text.rfind("\n") + 1
    torn = end != len(text)
    if torn:
        log.warning("%s: ignoring a last line without newline (a write cut short?): %r", path, text[end:][:200])
    whole = text[:end]
    markers = _create_markers(whole) if valid else None
    rejected: list[str] = []
    if markers is None:
        markers = []
        for number, line in enumerate(whole.split("\n")[:-1], 1):
            where = f"{path} line {number}"
            try:
                line.encode("utf-8")
                markers.append(parse_marker(line, where))
            except UnicodeEncodeError:
                rejected.append(f"{where}: not UTF-8")
            except MarkerError as error:
                rejected.append(str(error))
    return markers, torn, rejected


def _create_markers(whole: str) -> list[Marker] | None:
    """The markers of whole lines that are all plain ``CREATE`` markers of admissible paths, decided on the text
    at once; ``None`` when any line may not be (the caller then parses line by line, which names the culprit).

    Admits exactly what ``parse_marker`` admits line by line, or less: every line ends in ``.marker.CREATE``
    (so the data path is the rest of it, as the marker pattern's greedy match takes it); the paths joined with
    ``/`` have no empty, ``.`` or ``..`` segment and no NUL (``all_relatives_admitted``), so none is empty or
    absolute; and no ``\\r``, ``_temporary``, ``_SUCCESS`` or commit-record prefix occurs anywhere.
    """
    if whole.count(_CREATE_LINE_END) != whole.count("\n"):
        return None
    if any(suspect in whole for suspect in _SUSPECT_TEXT):
        return None
    relatives = whole.replace(_CREATE_LINE_END, "\n").split("\n")[:-1]
    if not all_relatives_admitted(relatives):
        return None
    return [Marker(relative) for relative in relatives]


def read_marker_type(calls: MarkerReads, paths: MarkerPaths) -> str | None:
    """``BATCHED`` if ``MARKERS.type`` says so, ``None`` if there is none; ``MarkerError`` for anything else."""
    if calls.info(paths.type_file) is None:
        return None
    return _check_marker_type(calls.read_bytes(paths.type_file), paths)


def _check_marker_type(raw: bytes, paths: MarkerPaths) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    if text != BATCHED:
        raise MarkerError(f"{paths.type_file}: unknown marker type {text[:100]!r}; known: {BATCHED}")
    return text


def _marker_type_or_none(raw: bytes, paths: MarkerPaths, skipped: list[str]) -> str | None:
    try:
        return _check_marker_type(raw, paths)
    except MarkerError as error:
        skipped.append(f"{error} (its MARKERS<i> files are read all the same)")
        return None


def read_markers(store: StoreOperations, paths: MarkerPaths, retry: RetryPolicy) -> MarkerSet:
    """Every marker of the job attempt, from the files, read one after another (``read_marker_set``)."""
    return read_marker_set(MarkerStoreCalls(store, retry), paths)


@dataclass(frozen=True, slots=True)
class _FileRead:
    """What one file of the markers directory held: ``MARKERS.type``'s type, or a ``MARKERS<i>``'s markers."""

    path: str
    marker_type: str | None = None
    markers: tuple[Marker, ...] | list[Marker] = ()
    rejected: list[str] = field(default_factory=list)


def read_marker_set(reads: MarkerReads, paths: MarkerPaths) -> MarkerSet:
    """Every marker of the job attempt, from the files: ``MARKERS<i>`` lines and direct markers alike.

    One listing of the markers directory, then ``MARKERS.type`` and every ``MARKERS<i>`` read and parsed at
    once through ``reads.map_paths``, then each level of direct-marker directories listed at once. A missing
    markers directory is an empty set (the job wrote no data file). What is not a marker is skipped and named in
    ``skipped`` (see the module); only a store error is raised.
    """
    root = paths.markers_dir
    try:
        top = reads.list_dir(root)
    except FileNotFoundError:
        return MarkerSet(frozenset(), paths.dest, batched=False, direct_count=0, batched_files=())
    found: set[Marker] = set()
    skipped: list[str] = []
    batched_files: list[str] = []
    type_listed = False
    directories: list[str] = []
    direct = 0

    def add_direct(relative: str, path: str) -> None:
        nonlocal direct
        try:
            found.add(parse_marker(relative, path))
        except MarkerError as error:
            skipped.append(str(error))
            return
        direct += 1

    for status in top:
        relative = _relative(root, status.path)
        if status.is_dir:
            directories.append(status.path)
            continue
        if relative == MARKERS_TYPE_FILE:
            type_listed = True
        elif relative in STATE_FILES or is_write_in_progress(relative):
            continue  # the directory's own state, or a marker file another process is writing right now
        elif batched_file_index(relative) is not None:
            batched_files.append(status.path)
        else:
            add_direct(relative, status.path)
    if batched_files and not type_listed and reads.info(paths.type_file) is None:
        log.warning("%s: batched marker files without %s; reading them all the same", root, MARKERS_TYPE_FILE)

    def read_one(path: str) -> _FileRead:
        data = reads.read_bytes(path)
        if path == paths.type_file:
            problems: list[str] = []
            return _FileRead(path, marker_type=_marker_type_or_none(data, paths, problems), rejected=problems)
        markers, _, rejected = parse_batched_lines(data, path)
        return _FileRead(path, markers=markers, rejected=rejected)

    marker_type = None
    for read in reads.map_paths(read_one, ([paths.type_file] if type_listed else []) + batched_files):
        found.update(read.markers)
        skipped.extend(read.rejected)
        marker_type = read.marker_type or marker_type
    while directories:
        listings = reads.map_paths(reads.list_dir, directories)
        directories = []
        for listing in listings:
            for status in listing:
                if status.is_dir:
                    directories.append(status.path)
                elif not is_write_in_progress(posixpath.basename(status.path)):
                    add_direct(_relative(root, status.path), status.path)
    if skipped:
        log.warning("Markers of %s: %d entries skipped, e.g. %s", root, len(skipped), skipped[0])
    log.debug("Markers of %s: %d (%d direct, %d batched files)", root, len(found), direct, len(batched_files))
    return MarkerSet(
        markers=frozenset(found),
        dest=paths.dest,
        batched=marker_type == BATCHED,
        direct_count=direct,
        batched_files=tuple(sorted(batched_files)),
        skipped=tuple(sorted(skipped)),
    )


def _relative(root: str, path: str) -> str:
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise MarkerError(f"{path}: listed under {root} but not inside it")
    return path[len(prefix) :]
