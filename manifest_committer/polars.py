"""Write Polars frames through the committer: ``manifest_committer.polars.write``.

Polars' own sinks write straight to the final paths (a failed write can delete an existing file, non-unique
names overwrite silently: pola-rs/polars#25406, #26885). Here Polars' own partitioned sink still writes the
frame (``sink_parquet``/``sink_csv``/``sink_ndjson`` with ``pl.PartitionBy``, streaming and multi-threaded), as one
task attempt in the calling process, into the attempt directory; only the job commit publishes the files, in
the Spark writer's partition directories (``writing.partitioning``: Spark's escaping,
``__HIVE_DEFAULT_PARTITION__``) under names unique to the attempt. Two routes, one result:

* own names (Parquet on local disk into a destination without partitions yet, under a protocol whose files may be
  renamed at commit): Polars names the files itself (``key=value/<index>.parquet``), the task renames each, in its
  directory, to its unique name, and the task commit's ``outputs`` map each to its Spark directory
  (``writing.polars_naming``); the job commit moves each directory of one file into the destination whole where the
  destination has none of that name yet. A ``file_path_provider`` costs a call into Python per file (a large share
  of Polars' own write of many small files); this route costs a rename in place per file and one move per
  partition. Only where the namings agree for certain: partition columns of strings, integers, booleans or dates whose
  names Spark does not escape, Polars' escaping as this process found it (``_own_names_agree``), and Polars reporting
  every file once (``sinked_paths_callback``); else, or if a file cannot be mapped after all, what Polars wrote is
  deleted and the provider route writes the frame again.
* provider: the ``file_path_provider`` names every file from the partition keys Polars hands it, and records it
  for the task commit. On local disk Polars writes the files itself; on other stores the provider hands it a
  file of the task's fsspec filesystem.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .paths import TEMPORARY_DIR
from .success_data import SuccessData
from .writing.dataset_output import is_local
from .writing.formats import CSV, PARQUET
from .writing.job import TaskFiles, TaskTarget, TaskWrite, WriteJob, write_in_process
from .writing.partitioning import partition_path
from .writing.polars_naming import ValueKind, column_name_agrees, map_polars_files

log = logging.getLogger(__name__)

__all__ = ["write"]

_PROBE_VALUES = ("a%2Fb", "a/b", "a b=c:d", "tab\there", "\u00e9\u20ac", "?*#[]^{}\\'\"", "", None)
"""Partition values Polars must name distinctly and Spark's writer escapes, for ``_own_names_agree``."""
_SAMPLE_ROWS = 10_000
"""Rows of a ``LazyFrame`` whose size estimates the bytes of a row, for the rows of a Parquet row group."""


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


class _Sinked:
    """The files Polars reports it wrote (its ``sinked_paths_callback``): their paths, and the rows of each, in two
    lists of strings and numbers rather than an object a file for the cyclic collector to track."""

    __slots__ = ("paths", "rows")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.rows: list[int] = []

    def __call__(self, args: Any) -> None:
        self.paths.extend(path.path for path in args.paths)
        self.rows.extend(path.num_rows for path in args.paths)


def _sink(frame: Any, job: WriteJob, partitioning: Any, sinked: _Sinked | None, row_group_rows: int | None) -> None:
    """Polars' own sink of the format into ``partitioning``; ``sinked`` (Parquet files Polars opened itself
    only) receives the path and rows of each file; ``row_group_rows`` ``None``: Polars' own row groups."""
    output = job.output_format
    if output.name == PARQUET:
        codec = output.compression or "none"
        frame.sink_parquet(
            partitioning,
            compression="uncompressed" if codec == "none" else codec,
            row_group_size=row_group_rows,
            data_page_size=output.page_size,
            sinked_paths_callback=sinked,
        )
    elif output.name == CSV:
        frame.sink_csv(partitioning, include_header=output.header)
    else:
        frame.sink_ndjson(partitioning)


def _partitioning(base_path: str, job: WriteJob, names: _FileNames | None) -> Any:
    """Polars' ``PartitionBy`` of the job into ``base_path``; ``names`` names the files, or Polars does."""
    import polars as pl

    return pl.PartitionBy(
        base_path,
        file_path_provider=names,
        key=list(job.partition_by) or None,
        include_key=False if job.partition_by else None,
        max_rows_per_file=job.max_records_per_file or None,
        # No size limit: a file ends at maxRecordsPerFile only, as Spark's. Polars' default ("auto", about
        # 4 GiB) is refused by Polars 1.44 and 2 when there is neither a key nor a row limit.
        approximate_bytes_per_file=None,
    )


def _fixed_width(dtype: Any) -> bool:
    """Whether every value of ``dtype`` takes the same bytes in memory (no strings, binary or lists inside)."""
    import polars as pl

    if isinstance(dtype, pl.List) or dtype in (pl.String, pl.Binary, pl.Object):
        return False
    if isinstance(dtype, pl.Array):
        return _fixed_width(dtype.inner)
    if isinstance(dtype, pl.Struct):
        return all(_fixed_width(field.dtype) for field in dtype.fields)
    return True


def _bytes_per_row(frame: Any, schema: Any) -> float | None:
    """Polars' estimate of the in-memory bytes of one row of the ``LazyFrame`` ``frame``, without running it
    where the schema fixes every row's size; otherwise from its first ``_SAMPLE_ROWS`` rows (a slice Polars pushes
    into its scans, though a plan that sorts or aggregates computes its input for them). ``None`` if empty."""
    import polars as pl

    if all(_fixed_width(dtype) for dtype in schema.dtypes()):
        sample = pl.DataFrame(schema=schema).clear(_SAMPLE_ROWS)
    else:
        sample = frame.head(_SAMPLE_ROWS).collect()
    return sample.estimated_size() / sample.height if sample.height else None


def _row_group_rows(job: WriteJob, bytes_per_row: float | None) -> int | None:
    """Rows of one row group: the block size (``parquet.block.size``) in Polars' in-memory bytes of a row, as the
    pyarrow writers size theirs. Polars buffers a row group per open file, so with partition columns each of
    ``maxOpenFiles`` files gets a share of four blocks, at least 1 MiB. ``None`` (Polars' own) when unknown."""
    output = job.output_format
    if output.name != PARQUET or not bytes_per_row:
        return None
    block = output.block_size
    if job.partition_by:
        block = min(block, max(4 * block // max(job.max_open_files, 1), 1 << 20))
    return max(1, int(block / bytes_per_row))


def _value_kinds(schema: Any, columns: Sequence[str]) -> tuple[ValueKind, ...] | None:
    """The kind of each partition column whose values Polars names as Spark's writer does; ``None`` if one is of
    another type (floats, datetimes, decimals, binary, ...) or has a name Spark escapes."""
    import polars as pl

    kinds: list[ValueKind] = []
    for column in columns:
        dtype = schema[column]
        if not column_name_agrees(column):
            return None
        if dtype.is_integer():
            kinds.append(ValueKind.INTEGER)
        elif dtype == pl.Boolean:
            kinds.append(ValueKind.BOOLEAN)
        elif dtype == pl.Date:
            kinds.append(ValueKind.DATE)
        elif dtype in (pl.String, pl.Null) or isinstance(dtype, pl.Categorical | pl.Enum):
            kinds.append(ValueKind.STRING)
        else:
            return None
    return tuple(kinds)


@functools.cache
def _own_names_agree() -> bool:
    """Whether this process's Polars names partition directories as ``writing.polars_naming`` reads them: a
    few values that need every kind of escaping, sunk once into a temporary directory and mapped back."""
    import polars as pl

    frame = pl.DataFrame(
        {"k": list(_PROBE_VALUES), "x": range(len(_PROBE_VALUES))}, schema={"k": pl.String, "x": pl.Int64}
    )
    try:
        with tempfile.TemporaryDirectory(prefix="manifest-committer-polars-") as directory:
            sinked = _Sinked()
            frame.lazy().sink_parquet(
                pl.PartitionBy(directory, key=["k"], include_key=False, approximate_bytes_per_file=None),
                sinked_paths_callback=sinked,
            )
            relative = [os.path.relpath(path, directory) for path in sinked.paths]
            outputs = map_polars_files(relative, ["k"], [ValueKind.STRING], "part", ".parquet")
    except Exception:
        log.debug("Polars' own file names could not be probed", exc_info=True)
        return False
    expected = {partition_path(["k"], [value]) for value in _PROBE_VALUES}
    agree = outputs is not None and {path.rpartition("/")[0] for path in outputs.values()} == expected
    if not agree:
        log.warning(
            "Polars %s names partition directories otherwise than expected: files named one by one", pl.__version__
        )
    return agree


def _write_with_own_names(
    data: Any, target: TaskTarget, kinds: Sequence[ValueKind], rows: int | None, row_group_rows: int | None
) -> TaskFiles | None:
    """Polars names the files in the attempt directory; ``None`` (with Polars' files deleted) if they cannot all
    be mapped to the Spark writer's names with certainty, or Polars reported other than ``rows`` rows."""
    job = target.job
    root = target.task.work_path.rstrip("/")
    sinked = _Sinked()
    _sink(data, job, _partitioning(root, job, None), sinked, row_group_rows)
    prefix = root + "/"
    relative = [
        path[len(prefix) :] if path.startswith(prefix) else os.path.relpath(path, root) for path in sinked.paths
    ]
    written = sum(sinked.rows)
    outputs = map_polars_files(relative, job.partition_by, kinds, target.file_prefix, job.output_format.extension)
    if outputs is not None and (rows is None or rows == written):
        partitions = frozenset(destination.rpartition("/")[0] for destination in outputs.values() if "/" in destination)
        return TaskFiles(written, _named_in_place(prefix, outputs), partitions)
    log.info(
        "Task attempt %s: Polars' own file names cannot be mapped to Spark's with certainty; writing again through a "
        "file_path_provider",
        target.task.attempt_id,
    )
    fs = target.task.fs
    for top in sorted({path.split("/", 1)[0] for path in relative}):
        if top and top != ".." and fs.exists(f"{prefix}{top}"):
            fs.rm(f"{prefix}{top}", recursive=True)
    return None


def _named_in_place(prefix: str, outputs: Mapping[str, str]) -> dict[str, str]:
    """Each of Polars' files renamed, in its own directory of the attempt directory (``prefix``), to the name it
    takes in the destination: where the destination has no such directory yet, the job commit then moves a
    directory of one file in whole (``stages/manifest/directory_moves``), and elsewhere renames the file into
    it. Local disk only; ``outputs`` as ``map_polars_files``."""
    named: dict[str, str] = {}
    for source, destination in outputs.items():
        directory = source.rpartition("/")[0]
        name = destination.rpartition("/")[2]
        relative = f"{directory}/{name}" if directory else name
        os.rename(f"{prefix}{source}", f"{prefix}{relative}")
        named[relative] = destination
    return named


def _write_through_provider(data: Any, target: TaskTarget, rows: int | None, row_group_rows: int | None) -> TaskFiles:
    """The ``file_path_provider`` names every file (``_FileNames``); ``rows`` ``None``: counted from Polars'
    report of the Parquet files it opened itself (local disk)."""
    names = _FileNames(target)
    counted = _Sinked()
    failed = True
    try:
        partitioning = _partitioning(target.task.work_path, target.job, names)
        _sink(data, target.job, partitioning, counted if rows is None else None, row_group_rows)
        failed = False
    finally:
        with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
            names.close()
    written = rows if rows is not None else sum(counted.rows)
    return TaskFiles(written, names.outputs, frozenset(names.partitions))


def _partitions_all_new(target: TaskTarget) -> bool:
    """Whether the destination holds no directory yet but the jobs' ``_temporary``: then each partition the task
    writes is new, and the job commit moves it in whole. Where partitions exist already (an append, an overwrite,
    which deletes the old files only after the commit), their files are renamed into them one by one, and Polars'
    own directories are left for the cleanup to remove: slower than the provider's flat files there."""
    root = target.task.fs._strip_protocol(target.job.destination)
    try:
        with os.scandir(root) as entries:
            return not any(entry.is_dir() and entry.name != TEMPORARY_DIR for entry in entries)
    except FileNotFoundError:
        return True


def _frame_writer(frame: Any, schema: Any, rows: int | None, bytes_per_row: float | None) -> TaskWrite:
    """A task writer that sinks the Polars ``LazyFrame`` ``frame`` (of ``schema``, of ``rows`` rows and
    ``bytes_per_row`` when known) into the attempt directory. Only Parquet on local disk reports the rows it
    wrote: any other lazy frame is collected first."""

    def write(target: TaskTarget) -> TaskFiles:
        job = target.job
        parquet = job.output_format.name == PARQUET
        local_parquet = is_local(target.task.fs) and parquet
        data, known, row_bytes = frame, rows, bytes_per_row
        if rows is None and not local_parquet:
            collected = frame.collect()
            data, known = collected.lazy(), collected.height
            row_bytes = collected.estimated_size() / collected.height if collected.height else None
        elif row_bytes is None and parquet:
            row_bytes = _bytes_per_row(frame, schema)
        group_rows = _row_group_rows(job, row_bytes)
        if local_parquet and not target.in_place and _partitions_all_new(target):
            kinds = _value_kinds(schema, job.partition_by)
            if kinds is not None and _own_names_agree():
                written = _write_with_own_names(data, target, kinds, known, group_rows)
                if written is not None:
                    return written
        return _write_through_provider(data, target, known, group_rows)

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
        row_bytes = frame.estimated_size() / frame.height if frame.height else None
        return write_in_process(job, _frame_writer(frame.lazy(), frame.schema, frame.height, row_bytes))
    if not isinstance(frame, pl.LazyFrame):
        raise TypeError(f"expected a polars DataFrame or LazyFrame, got {type(frame).__name__}")
    schema = frame.collect_schema()
    job.check_columns(schema.names())
    return write_in_process(job, _frame_writer(frame, schema, None, None))
