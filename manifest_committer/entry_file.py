"""A local spill file of the files to commit, so job-commit memory does not grow with the file count.

Hadoop keeps a SequenceFile for this (MAPREDUCE-7435). Here each loaded manifest becomes one length-prefixed
orjson chunk: ``[task_attempt_id, source_paths, dest_paths, sizes, etags, dest_urls]``, five lists of equal
length (written as the load stage builds them, without an object per file). The file is written by one thread
and read back in chunks by the rename and validation stages.

The file is named ``manifest-committer-<jobId>-<pid>-<random>.entries``, so that a later job commit of the same
job can find and remove the spill files of processes that were killed (``remove_dead_spill_files``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple, Self

import orjson

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("<I")
SPILL_PREFIX = "manifest-committer-"
SPILL_SUFFIX = ".entries"
HASHES_SUFFIX = ".hashes"
"""The duplicate check's sorted hash runs (``duplicates.DuplicateHashes``), named like the entry spill file."""


def spill_prefix(job_id: str) -> str:
    """``manifest-committer-<jobId>-<pid>-``: what a later run or ``status`` needs to tell whose file it is."""
    return f"{SPILL_PREFIX}{job_id}-{os.getpid()}-"


class FileToCommit(NamedTuple):
    """One file of a job commit: where it is, where it goes, and what the manifest says of it."""

    source: str
    """Store path in the task attempt directory."""
    dest: str
    """Store path in the destination."""
    size: int
    etag: str | None
    dest_url: str
    """The destination as the manifest wrote it (percent-encoded), for messages and ``_SUCCESS``."""


class FilesToCommit(NamedTuple):
    """The files of one manifest as five lists, file ``i`` being the ``i``-th of each: the load stage builds and
    spills whole lists."""

    sources: list[str]
    dests: list[str]
    sizes: list[int]
    etags: list[str | None]
    dest_urls: list[str]

    @classmethod
    def of_rows(cls, rows: list[FileToCommit]) -> FilesToCommit:
        return cls(
            [row.source for row in rows],
            [row.dest for row in rows],
            [row.size for row in rows],
            [row.etag for row in rows],
            [row.dest_url for row in rows],
        )


@dataclass(frozen=True, slots=True)
class EntryChunk:
    task_attempt_id: str
    rows: list[FileToCommit]


@dataclass(frozen=True, slots=True)
class RenameUnit:
    """Consecutive rows in task attempt id order, starting at row ``start`` of attempt ``task_attempt_id``: the
    unit a job commit journals.

    Its key depends only on the accepted manifests and the unit size, never on the order they were loaded in,
    so a rerun of a job commit, or an abort, finds the records an earlier run wrote for the same rows.
    """

    task_attempt_id: str
    start: int
    rows: list[FileToCommit]

    @property
    def key(self) -> str:
        return f"{self.task_attempt_id}-{self.start}"


class EntryFile:
    """Append chunks, then iterate them any number of times; the file is removed on ``close``."""

    def __init__(self, directory: str | None = None, job_id: str = "job") -> None:
        handle, self.path = tempfile.mkstemp(prefix=spill_prefix(job_id), suffix=SPILL_SUFFIX, dir=directory)
        self._writer = os.fdopen(handle, "wb")
        self._chunk_offsets: list[tuple[str, int]] = []
        """Each chunk's task attempt id and offset: one pair per manifest, for reading in a stable order."""
        self.file_count = 0
        self.total_size = 0

    def append(self, task_attempt_id: str, files: FilesToCommit) -> None:
        self._chunk_offsets.append((task_attempt_id, self._writer.tell()))
        data = orjson.dumps([task_attempt_id, *files])
        self._writer.write(_LENGTH.pack(len(data)))
        self._writer.write(data)
        self.file_count += len(files.sources)
        self.total_size += sum(files.sizes)

    def _read_chunk(self, reader: BinaryIO) -> tuple[str, list[FileToCommit]]:
        task_attempt_id, columns = self._read_columns(reader)
        return task_attempt_id, list(map(FileToCommit, *columns))

    def _read_columns(self, reader: BinaryIO) -> tuple[str, list[list[Any]]]:
        """A chunk as its five columns: lists of strings and numbers, five objects the cyclic collector tracks
        where its rows are one a file."""
        (length,) = _LENGTH.unpack(reader.read(_LENGTH.size))
        task_attempt_id, *columns = orjson.loads(reader.read(length))
        return task_attempt_id, columns

    def chunks(self) -> Iterator[EntryChunk]:
        """Every chunk in the order written."""
        self._writer.flush()
        with open(self.path, "rb") as reader:
            for _ in self._chunk_offsets:
                yield EntryChunk(*self._read_chunk(reader))

    def batches(self, batch_size: int) -> Iterator[list[FileToCommit]]:
        """Rows regrouped into lists of at most ``batch_size``, the unit of parallel work."""
        pending: list[FileToCommit] = []
        for chunk in self.chunks():
            for row in chunk.rows:
                pending.append(row)
                if len(pending) >= batch_size:
                    yield pending
                    pending = []
        if pending:
            yield pending

    def units(self, unit_size: int) -> Iterator[RenameUnit]:
        """Rows in slices of ``unit_size``, the chunks taken in task attempt id order (not the order loaded).

        A unit may span the end of one attempt's rows and the start of the next, so many small tasks still
        make few units.
        """
        self._writer.flush()
        pending: list[FileToCommit] = []
        first: tuple[str, int] | None = None
        with open(self.path, "rb") as reader:
            for task_attempt_id, offset in sorted(self._chunk_offsets):
                reader.seek(offset)
                # Rows are made a unit at a time from the chunk's columns: a task's whole chunk of rows, alive
                # while its renames run, would be tracked objects that every pass of the collector walks.
                _, columns = self._read_columns(reader)
                count = len(columns[0]) if columns else 0
                index = 0
                while index < count:
                    if first is None:
                        first = (task_attempt_id, index)
                    end = index + unit_size - len(pending)
                    pending.extend(map(FileToCommit, *(column[index:end] for column in columns)))
                    index = min(end, count)
                    if len(pending) >= unit_size:
                        yield RenameUnit(first[0], first[1], pending)
                        pending, first = [], None
        if first is not None:
            yield RenameUnit(first[0], first[1], pending)

    def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process_is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_dead_spill_files(directory: str | None, job_id: str) -> list[str]:
    """Remove the spill files of ``job_id`` left by processes that no longer run; return their paths.

    A killed job commit cannot remove its own spill files. The pid in the name tells a dead process's file from
    one in use: a live pid's file (this process's too) is never touched; a reused pid only keeps a file longer.
    """
    removed: list[str] = []
    for found in find_spill_files(directory):
        if found.job_id != job_id or found.alive:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(found.path)
            removed.append(found.path)
            log.info("Removed %s, a spill file of a job commit of %s that was killed", found.path, job_id)
    return removed


@dataclass(frozen=True, slots=True)
class SpillFile:
    """One spill file found in a temporary directory, and whether the process that wrote it still runs."""

    path: str
    job_id: str
    pid: int
    size: int
    alive: bool


_ANY_SPILL_FILE = re.compile(
    re.escape(SPILL_PREFIX) + r"(.+)-(\d+)-[^-]+(?:" + re.escape(SPILL_SUFFIX) + "|" + re.escape(HASHES_SUFFIX) + r")\Z"
)
"""The random part of a name never holds ``-``, so job ``a`` never matches the files of job ``a-1``."""


def find_spill_files(directory: str | None = None) -> list[SpillFile]:
    """Every job commit's spill file in ``directory`` (the system temp directory by default), sorted by path.

    Read only: ``status`` reports the files of killed processes, which the next job commit of their job (or
    an abort) removes.
    """
    folder = directory or tempfile.gettempdir()
    found: list[SpillFile] = []
    try:
        names = os.listdir(folder)
    except OSError as error:
        log.warning("Cannot list %s for spill files: %s", folder, error)
        return found
    for name in sorted(names):
        match = _ANY_SPILL_FILE.match(name)
        if match is None:
            continue
        path = os.path.join(folder, name)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue  # removed in between
        pid = int(match.group(2))
        found.append(SpillFile(path, match.group(1), pid, size, _process_is_alive(pid)))
    return found
