"""A local spill file of the files to commit, so job-commit memory does not grow with the file count.

Hadoop keeps a SequenceFile for this (MAPREDUCE-7435). Here each loaded manifest becomes one length-prefixed
orjson chunk: ``[task_attempt_id, [[source_path, dest_path, size, etag, dest_url], ...]]``. The file is
written by one thread and read back in chunks by the rename and validation stages.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, Self

import orjson

_LENGTH = struct.Struct("<I")


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


@dataclass(frozen=True, slots=True)
class EntryChunk:
    task_attempt_id: str
    rows: list[FileToCommit]


class EntryFile:
    """Append chunks, then iterate them any number of times; the file is removed on ``close``."""

    def __init__(self, directory: str | None = None) -> None:
        handle, self.path = tempfile.mkstemp(prefix="manifest-committer-", suffix=".entries", dir=directory)
        self._writer = os.fdopen(handle, "wb")
        self.file_count = 0
        self.total_size = 0

    def append(self, task_attempt_id: str, rows: list[FileToCommit]) -> None:
        data = orjson.dumps([task_attempt_id, rows], default=tuple)  # a NamedTuple is written as its fields
        self._writer.write(_LENGTH.pack(len(data)))
        self._writer.write(data)
        self.file_count += len(rows)
        self.total_size += sum(row.size for row in rows)

    def chunks(self) -> Iterator[EntryChunk]:
        """Every chunk in the order written."""
        self._writer.flush()
        with open(self.path, "rb") as reader:
            while header := reader.read(_LENGTH.size):
                (length,) = _LENGTH.unpack(header)
                task_attempt_id, rows = orjson.loads(reader.read(length))
                make = FileToCommit._make
                yield EntryChunk(task_attempt_id, [make(row) for row in rows])

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

    def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
