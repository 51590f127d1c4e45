"""The task side of every writer: route record batches into rolling files, one per partition directory.

Spark's data source and the Ray, Dask, pyarrow and Polars adapters all write a task attempt's rows through
``TaskOutput``, so the files, their names and their partition directories are the same whichever engine ran them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .formats import FileWriter, OutputFormat
from .parquet import RowGroupMemory
from .partitioning import partition_path

if TYPE_CHECKING:
    from ..protocols.base import TaskAttempt

log = logging.getLogger(__name__)


def file_prefix(job_id: str, partition_id: int, attempt: int) -> str:
    """``part-<partition>-<job id>-a<attempt>``: how every writer's file names start, unique to one attempt."""
    return f"part-{partition_id:05d}-{job_id.removeprefix('spark-')}-a{attempt}"


class OutputSettings(Protocol):
    """What a task needs to know about its write (Spark's ``WriteSettings`` and ``writing.WriteJob`` offer it)."""

    @property
    def job_id(self) -> str: ...

    @property
    def output_format(self) -> OutputFormat: ...

    @property
    def partition_by(self) -> tuple[str, ...]: ...

    @property
    def max_records_per_file(self) -> int: ...

    @property
    def max_open_files(self) -> int: ...

    @property
    def protocol(self) -> str: ...


@dataclass
class _OpenFile:
    relative: str
    handle: Any
    writer: FileWriter
    rows: int = 0


class TaskOutput:
    """Routes record batches to one rolling file per partition directory of one task attempt.

    Under a protocol whose tasks write in place (``in_place``: transactional, upload) each file is opened at
    ``work_path/<destination-relative path>``, as the committer requires. Otherwise the files lie flat in the
    attempt directory (their names are unique within the task) and are declared to the task commit with their
    partition paths: no directory per partition to make in the task, or to delete once the job commit has
    emptied it. ``outputs`` is the task commit's ``outputs`` argument either way.

    ``partition_id`` and ``spark_task_attempt_id`` (any integer unique to the attempt, for the other engines) make
    the file names unique across the job's attempts.
    """

    def __init__(
        self,
        task: TaskAttempt,
        settings: OutputSettings,
        partition_id: int,
        spark_task_attempt_id: int,
        *,
        in_place: bool,
    ) -> None:
        self.task = task
        self.settings = settings
        self.in_place = in_place
        """The committer's ``task_writes_in_place``: files open at their destination-relative paths."""
        self.prefix = file_prefix(settings.job_id, partition_id, spark_task_attempt_id)
        self.outputs: dict[str, str] = {}
        """File path relative to the attempt directory -> destination-relative path, in the order opened."""
        self.partitions: set[str] = set()
        self.rows = 0
        self._open: dict[str, _OpenFile] = {}
        self._memory = RowGroupMemory(4 * settings.output_format.block_size)
        """What the task's open Parquet files buffer, together, bounded."""

    @property
    def files(self) -> list[str]:
        """Destination-relative paths of the files opened so far."""
        return list(self.outputs.values())

    def write(self, batch: Any) -> None:
        """Write one ``pyarrow.RecordBatch``: its rows go to the files of their partitions."""
        import pyarrow as pa

        self.rows += batch.num_rows
        columns = self.settings.partition_by
        if not columns:
            self._write_to("", batch)
            return
        keys = list(zip(*(batch.column(name).to_pylist() for name in columns), strict=True))
        groups: dict[tuple[Any, ...], list[int]] = {}
        for index, key in enumerate(keys):
            groups.setdefault(key, []).append(index)
        data = batch.drop_columns(list(columns))
        for key, indices in groups.items():
            self._write_to(partition_path(columns, key), data.take(pa.array(indices, type=pa.int64())))

    def _write_to(self, directory: str, batch: Any) -> None:
        limit = self.settings.max_records_per_file
        offset = 0
        while offset < batch.num_rows:
            current = self._open.pop(directory, None) or self._new_file(directory, batch.schema)
            self._open[directory] = current  # most recently written last: the dict's order is the LRU order
            count = batch.num_rows - offset if limit <= 0 else min(limit - current.rows, batch.num_rows - offset)
            current.writer.write(batch.slice(offset, count))
            current.rows += count
            offset += count
            if limit > 0 and current.rows >= limit:
                self._close(directory)

    def _new_file(self, directory: str, schema: Any) -> _OpenFile:
        if len(self._open) >= self.settings.max_open_files:
            self._close(next(iter(self._open)))
        name = f"{self.prefix}-c{len(self.outputs):03d}{self.settings.output_format.extension}"
        relative = f"{directory}/{name}" if directory else name
        local = relative if self.in_place else name
        handle = self.task.fs.open(f"{self.task.work_path}/{local}", "wb")
        try:
            writer = self.settings.output_format.open(handle, schema, self._memory)
        except BaseException:
            handle.close()
            raise
        opened = _OpenFile(relative, handle, writer)
        self.outputs[local] = relative
        log.debug("Task attempt %s opened %s", self.task.attempt_id, relative)
        if directory:
            self.partitions.add(directory)
        return opened

    def _close(self, directory: str) -> None:
        opened = self._open.pop(directory)
        try:
            opened.writer.close()
        finally:
            opened.handle.close()

    def close(self) -> None:
        """Finish every open file; the first error is raised after all were closed."""
        first: BaseException | None = None
        for directory in list(self._open):
            try:
                self._close(directory)
            except BaseException as error:
                first = first or error
        if first is not None:
            raise first
