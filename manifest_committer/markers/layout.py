"""Where a job's write markers live, what a marker may name, and the retried store calls the marker code makes.

Layout (docs/formats.md, "Write markers"), under ``$dest/_temporary/$jobId/$NN/markers/``::

    <relative dir>/<file name>.marker.CREATE     direct: one empty object per data file
    MARKERS0 ... MARKERS<n-1>                    batched: one marker path per line, each line ending in "\\n"
    MARKERS<n> ...                               batched: more files, once a file is retired (see server.py)
    MARKERS.type                                 batched: holds BATCHED (absent: the directory is direct)
    server.json                                  batched: the marker server's address, for tasks and liveness
    secret                                       batched: the job's secret, which every request proves
    heartbeat                                    the driver's lease, renewed while the job runs (both types)

A marker file is untrusted input (docs/safety.md, "Crafted input"): ``parse_marker`` is the one place that decides what
a marker may name, so a crafted ``MARKERS0`` line or direct marker name can never make a rollback delete outside the
job's data files.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..errors import MarkerError
from ..paths import TEMPORARY_DIR, JobPaths
from ..retry import RetryPolicy
from ..store import FileStatus, StoreOperations
from ..success_data import SUCCESS_MARKER

log = logging.getLogger(__name__)
T = TypeVar("T")

MARKERS_DIR = "markers"
MARKER_EXTENSION = ".marker."
IO_TYPES = ("CREATE", "MERGE", "APPEND")
"""Hudi's I/O types: ``CREATE`` for a new file (all this project writes), ``MERGE`` and ``APPEND`` read back."""
MARKERS_TYPE_FILE = "MARKERS.type"
BATCHED = "BATCHED"
"""The content of ``MARKERS.type`` in a batched directory; the only type a directory declares."""
BATCHED_FILE_PREFIX = "MARKERS"
SERVER_STATE_FILE = "server.json"
SECRET_FILE = "secret"
HEARTBEAT_FILE = "heartbeat"
STATE_FILES = frozenset({SERVER_STATE_FILE, SECRET_FILE, HEARTBEAT_FILE})
"""The markers directory's own state: never a marker."""
TASK_HEARTBEATS_DIR = "heartbeats"
"""Beside ``markers/``: one heartbeat per running task attempt, where no driver process hosts the job's own."""

_BATCHED_FILE = re.compile(r"MARKERS(0|[1-9][0-9]*)\Z")
_MARKER_NAME = re.compile(r"(?P<data>.+)\.marker\.(?P<type>[A-Za-z]+)\Z", re.DOTALL)
RESERVED_PREFIXES = ("_committed_", "_started_")
"""Names of commit records of the transactional protocol: a marker naming one could make rollback delete a
commit, so no marker may."""


@dataclass(frozen=True, slots=True, order=True)
class Marker:
    """One marker: a data file, relative to the destination, and the I/O that created it."""

    data_file: str
    io_type: str = "CREATE"

    @property
    def name(self) -> str:
        """The marker's path relative to the markers directory, as direct markers and ``MARKERS<i>`` lines hold it."""
        return f"{self.data_file}{MARKER_EXTENSION}{self.io_type}"


def check_data_file(relative: str, where: str) -> str:
    """A data-file path relative to the destination, refused unless it stays inside it and off job state.

    Refused: absolute paths, empty, ``.`` and ``..`` segments, NUL and line breaks (a line break would split a
    ``MARKERS`` line in two), anything under ``_temporary``, and ``_SUCCESS``, ``_committed_*`` and
    ``_started_*`` files. ``where`` names the file (and line) at fault in the error.
    """
    if not isinstance(relative, str) or not relative:
        raise MarkerError(f"{where}: empty marker path")
    if "\x00" in relative or "\n" in relative or "\r" in relative:
        raise MarkerError(f"{where}: marker path {relative!r} holds NUL or a line break")
    if relative.startswith("/"):
        raise MarkerError(f"{where}: marker path {relative!r} is absolute; markers name paths inside the destination")
    segments = relative.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise MarkerError(
            f"{where}: marker path {relative!r} has an empty, '.' or '..' segment and may point outside the destination"
        )
    if segments[0] == TEMPORARY_DIR:
        raise MarkerError(f"{where}: marker path {relative!r} names the committer's own state under {TEMPORARY_DIR}")
    name = segments[-1]
    if name == SUCCESS_MARKER or name.startswith(RESERVED_PREFIXES):
        raise MarkerError(f"{where}: marker path {relative!r} names a commit record, not a data file")
    return relative


def parse_marker(name: object, where: str) -> Marker:
    """The marker a ``MARKERS<i>`` line or a direct marker's relative path names; ``MarkerError`` if none."""
    match = _MARKER_NAME.match(name) if isinstance(name, str) else None
    if match is None:
        if not isinstance(name, str):
            raise MarkerError(f"{where}: a marker must be a string, got {type(name).__name__}")
        raise MarkerError(f"{where}: {name!r} is not a marker (<data file>{MARKER_EXTENSION}<{'|'.join(IO_TYPES)}>)")
    io_type = match.group("type")
    if io_type not in IO_TYPES:
        raise MarkerError(f"{where}: unknown marker I/O type {io_type!r} in {name!r}; known: {', '.join(IO_TYPES)}")
    return Marker(check_data_file(match.group("data"), where), io_type)


def batched_file_index(name: str) -> int | None:
    """The ``i`` of ``MARKERS<i>``; ``None`` for any other name."""
    match = _BATCHED_FILE.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class MarkerPaths:
    """The marker paths of one job attempt, in the store's own (decoded) path form."""

    job: JobPaths

    @property
    def dest(self) -> str:
        return self.job.dest

    @property
    def markers_dir(self) -> str:
        return posixpath.join(self.job.job_attempt_dir, MARKERS_DIR)

    @property
    def type_file(self) -> str:
        return posixpath.join(self.markers_dir, MARKERS_TYPE_FILE)

    @property
    def server_state(self) -> str:
        return posixpath.join(self.markers_dir, SERVER_STATE_FILE)

    @property
    def secret(self) -> str:
        return posixpath.join(self.markers_dir, SECRET_FILE)

    @property
    def heartbeat(self) -> str:
        return posixpath.join(self.markers_dir, HEARTBEAT_FILE)

    @property
    def task_heartbeats_dir(self) -> str:
        return posixpath.join(self.job.job_attempt_dir, TASK_HEARTBEATS_DIR)

    def task_heartbeat(self, attempt_id: str) -> str:
        return posixpath.join(self.task_heartbeats_dir, attempt_id)

    def batched_file(self, index: int) -> str:
        return posixpath.join(self.markers_dir, f"{BATCHED_FILE_PREFIX}{index}")

    def direct_marker(self, marker: Marker) -> str:
        return posixpath.join(self.markers_dir, marker.name)

    def data_file(self, marker: Marker) -> str:
        """The store path of the data file a marker names."""
        return posixpath.join(self.dest, marker.data_file)


class MarkerStoreCalls:
    """The marker code's only way to the store: every call retried under the caller's one policy, and named.

    The marker component runs beside the stages (in a task, or in the driver's server threads), so it gets
    the store and the retry policy from its caller instead of a stage context; each call is tried under that
    policy exactly once, never wrapped in a second retry.
    """

    def __init__(self, store: StoreOperations, retry: RetryPolicy) -> None:
        self._store = store
        self.retry = retry

    @property
    def store(self) -> StoreOperations:
        return self._store

    def call(self, what: str, path: str, function: Callable[[], T]) -> T:
        return self.retry.call(function, f"markers {what} {path}")

    def info(self, path: str) -> FileStatus | None:
        return self.call("info", path, lambda: self._store.info(path))

    def list_dir(self, path: str) -> list[FileStatus]:
        return self.call("list", path, lambda: self._store.list_dir(path))

    def read_bytes(self, path: str) -> bytes:
        return self.call("read", path, lambda: self._store.read_bytes(path))

    def map_paths(self, work: Callable[[str], T], paths: Sequence[str]) -> list[T]:
        """``work`` on each path, one after another: the marker code has no pool of its own."""
        return [work(path) for path in paths]

    def write_bytes(self, path: str, data: bytes) -> None:
        self.call("write", path, lambda: self._store.write_bytes(path, data))

    def append_bytes(self, path: str, data: bytes) -> None:
        """One append, never retried here: a failed append may have left part of ``data`` at the end, and the
        caller must write the batch again elsewhere (``server.MarkerServer`` retires the file)."""
        self._store.append_bytes(path, data)

    def write_private_bytes(self, path: str, data: bytes) -> None:
        self.call("write", path, lambda: self._store.write_private_bytes(path, data))

    def read_private_bytes(self, path: str) -> bytes:
        return self.call("read", path, lambda: self._store.read_private_bytes(path))

    def delete_file(self, path: str) -> bool:
        return self.call("delete", path, lambda: self._store.delete_file(path))

    def rename_file(self, source: str, dest: str) -> None:
        self.call("rename", dest, lambda: self._store.rename_file(source, dest))
