"""Write Polars frames through the committer: ``manifest_committer.polars.write``.

Polars' own sinks write straight to the final paths (a failed write can delete an existing file, non-unique
names overwrite silently: pola-rs/polars#25406, #26885). Here Polars' own partitioned sink still writes the
frame (``sink_parquet``/``sink_csv``/``sink_ndjson`` with ``pl.PartitionBy``, streaming and multi-threaded), as one
task attempt in the calling process: ``base_path`` is the attempt directory and the ``file_path_provider`` names
every file, with the partition directory the shared ``partition_path`` gives the partition keys (Spark's escaping,
``__HIVE_DEFAULT_PARTITION__``, as the Spark writer), so Polars' own directory naming is never used. The provider
records each file for the task commit; only the job commit publishes them. On local disk Polars writes the files
itself; on other stores the provider hands it a file of the task's fsspec filesystem.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .success_data import SuccessData
from .writing.dataset_output import is_local
from .writing.formats import CSV, PARQUET
from .writing.job import TaskFiles, TaskTarget, TaskWrite, WriteJob, write_in_process
from .writing.partitioning import partition_path

log = logging.getLogger(__name__)

__all__ = ["write"]


class _FileNames:
    """The ``file_path_provider``: a unique name per file, in its partition directory; what it handed out is the
    task commit's ``outputs``. Polars calls it from several threads."""

    def __init__(self, target: TaskTarget) -> None:
        self.target = target
        self.local = is_local(target.task.fs)
        self.outputs: dict[str, str] = {}
        self.partitions: set[str] = set()
        self.handles: list[Any] = []
        self._lock = threading.Lock()
        # Polars calls this once a file, holding up its sink: what every call needs is looked up once here.
        self._columns = tuple(target.job.partition_by)
        self._name_start = target.file_prefix + "-c"
        self._extension = target.job.output_format.extension
        self._work_prefix = target.task.work_path.rstrip("/") + "/"

    def __call__(self, args: Any) -> Any:
        columns = self._columns
        directory = partition_path(columns, args.partition_keys.row(0)) if columns else ""
        with self._lock:
            name = f"{self._name_start}{len(self.outputs):03d}{self._extension}"
            destination = f"{directory}/{name}" if directory else name
            relative = destination if self.target.in_place else name  # flat unless the protocol writes in place
            self.outputs[relative] = destination
            if directory:
                self.partitions.add(directory)
        fs = self.target.task.fs
        if self.local:
            if "/" in relative:
                fs.makedirs(f"{self._work_prefix}{relative.rpartition('/')[0]}", exist_ok=True)
            return relative  # Polars writes it itself, under base_path
        handle = fs.open(f"{self._work_prefix}{relative}", "wb")
        with self._lock:
            self.handles.append(handle)
        return handle

    def close(self) -> None:
        """Finish the files handed out as fsspec files (Polars leaves them open); the first error is raised."""
        first: BaseException | None = None
        for handle in self.handles:
            try:
                handle.close()
            except BaseException as error:
                first = first or error
        if first is not None:
            raise first


def _sink(frame: Any, job: WriteJob, partitioning: Any, counted: list[int] | None) -> None:
    """Polars' own sink of the format into ``partitioning``; ``counted`` (Parquet files Polars opened itself
    only) receives the rows of each file."""
    output = job.output_format
    if output.name == PARQUET:
        codec = output.compression or "none"
        frame.sink_parquet(
            partitioning,
            compression="uncompressed" if codec == "none" else codec,
            sinked_paths_callback=None
            if counted is None
            else lambda args: counted.extend(path.num_rows for path in args.paths),
        )
    elif output.name == CSV:
        frame.sink_csv(partitioning, include_header=output.header)
    else:
        frame.sink_ndjson(partitioning)


def _frame_writer(frame: Any, rows: int | None) -> TaskWrite:
    """A task writer that sinks the Polars ``LazyFrame`` ``frame`` (of ``rows`` rows, when known) into the
    attempt directory. Only Parquet on local disk reports the rows it wrote: any other lazy frame is collected."""
    import polars as pl

    def write(target: TaskTarget) -> TaskFiles:
        job = target.job
        names = _FileNames(target)
        streamed = rows is None and names.local and job.output_format.name == PARQUET
        data, known = frame, rows
        if rows is None and not streamed:
            collected = frame.collect()
            data, known = collected.lazy(), collected.height
        partitioning = pl.PartitionBy(
            target.task.work_path,
            file_path_provider=names,
            key=list(job.partition_by) or None,
            include_key=False if job.partition_by else None,
            max_rows_per_file=job.max_records_per_file or None,
            # No size limit: a file ends at maxRecordsPerFile only, as Spark's. Polars' default ("auto", about
            # 4 GiB) is refused by Polars 1.44 and 2 when there is neither a key nor a row limit.
            approximate_bytes_per_file=None,
        )
        counted: list[int] = []
        failed = True
        try:
            _sink(data, job, partitioning, counted if streamed else None)
            failed = False
        finally:
            with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
                names.close()
        return TaskFiles(known if known is not None else sum(counted), names.outputs, frozenset(names.partitions))

    return write


def write(
    frame: Any,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    protocol: str = "auto",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> SuccessData | None:
    """Write a Polars ``DataFrame`` or ``LazyFrame`` to ``url`` through the committer; returns the job's
    ``_SUCCESS`` summary, or ``None`` when ``mode="ignore"`` found data. Arguments as
    ``manifest_committer.arrow.write``. A ``LazyFrame`` is streamed into Parquet on local disk, and collected
    first otherwise (only there does Polars report the rows it wrote)."""
    try:
        import polars as pl
    except ImportError as error:  # pragma: no cover - the polars extra is missing
        raise ImportError("manifest_committer.polars needs polars: pip install 'manifest-committer[polars]'") from error

    job = WriteJob.create(
        url,
        framework="polars",
        format=format,
        partition_by=partition_by,
        mode=mode,
        protocol=protocol,
        storage_options=storage_options,
        options=options,
    )
    if isinstance(frame, pl.DataFrame):
        job.check_columns(frame.columns)
        return write_in_process(job, _frame_writer(frame.lazy(), frame.height))
    if not isinstance(frame, pl.LazyFrame):
        raise TypeError(f"expected a polars DataFrame or LazyFrame, got {type(frame).__name__}")
    job.check_columns(frame.collect_schema().names())
    return write_in_process(job, _frame_writer(frame, None))
