"""The task side through pyarrow's own writer: ``pyarrow.dataset.write_dataset`` into the task attempt directory.

pyarrow's dataset writer is multi-threaded and writes Parquet and CSV; the pyarrow, Dask and Ray adapters use it
for a task attempt's rows (JSON lines, which it cannot write, go through ``TaskOutput``). pyarrow's own Hive
partitioning escapes values its own way, so the directories are not left to it: every row gets the number of its
partition directory, named by the shared ``partition_path`` (Spark's escaping, ``__HIVE_DEFAULT_PARTITION__``),
and pyarrow partitions on that number:

* flat (the rename-based protocols): ``FilenamePartitioning`` writes ``<number>_part-...`` files side by side in
  the attempt directory, and ``file_visitor`` maps each to ``<partition directory>/part-...`` for the task
  commit's ``outputs``: no directory per partition in the task, as ``TaskOutput`` does;
* in place (``task_writes_in_place``: transactional, upload): a ``DirectoryPartitioning`` on the escaped
  directory names themselves writes each file at its destination-relative path.

One ``write_dataset`` call writes one schema. A Ray write task gets whatever blocks Ray bundled into it, and they
need not share one (a column all null in one block, a missing column, int64 here and double there):
``schema_groups`` unifies them as pyarrow's permissive promotion allows, and only tables that cannot unify (a
column of strings here, integers there) form a group of their own, written by a call of its own with file names
of its own.
"""

from __future__ import annotations

import itertools
import logging
import posixpath
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CommitterError
from .formats import CSV, PARQUET
from .partitioning import partition_path

if TYPE_CHECKING:
    from .task_output import OutputSettings

log = logging.getLogger(__name__)

DATASET_FORMATS = frozenset({PARQUET, CSV})
"""The formats ``write_dataset`` writes as ``TaskOutput`` would; JSON lines is not one of them."""
_PARTITION_NUMBER = "__manifest_committer_partition"
"""The column pyarrow partitions on (flat layout); dropped from the files by pyarrow itself."""
_LEVEL = "__manifest_committer_level_"
"""Prefix of the columns of the escaped directory names, one per partition column (in-place layout)."""
_DEFAULT_ROWS_PER_GROUP = 1 << 20
"""pyarrow's own ``max_rows_per_group`` default: the rows of a row group when the first chunk has no bytes."""
_MAX_PARTITIONS = (1 << 31) - 1
"""No limit on the partitions one batch writes into (pyarrow refuses more than 1,024 by default; Spark has none)."""
_PARTITIONS_PER_BATCH = 128
"""Most partitions one batch handed to pyarrow's writer holds (see ``_by_few_partitions``)."""
_PARTITIONS_PER_CALL = 1024
"""Most partitions one ``write_dataset`` call writes. pyarrow's writer slows down with the partitions one call
meets, even in slices of few, so ten calls over many partitions are several times faster than one.
A task with more makes several calls, one after another, each over the next slices."""


class SchemaConflictError(CommitterError):
    """A table of a task cannot be cast to the schema unified from the task's tables (a value would be lost)."""


@dataclass
class SchemaGroup:
    """Tables of one task that one ``write_dataset`` call writes: their unified schema and the tables."""

    schema: Any
    tables: list[Any] = field(default_factory=list)

    def batches(self, where: str) -> Iterator[Any]:
        """The record batches of every table, each cast to ``schema``; ``where`` names the task in errors."""
        for table in self.tables:
            yield from conformed(table, self.schema, where).to_batches()


def schema_groups(tables: Iterable[Any]) -> list[SchemaGroup]:
    """``tables`` (``pyarrow.Table``, in order) grouped so that each group's tables unify into one schema.

    A table joins the first group whose schema it unifies with (``promote_options="permissive"``: a null column
    takes the other type, int32 and int64 make int64, int64 and double make double, a missing column is null,
    columns keep the first table's order), and starts a group of its own otherwise, as if Ray had given it to
    another write task. Ray's own Parquet sink unifies with pyarrow's default promotion only (nulls) and fails
    the task on anything else. Tables without rows are left out: they write nothing and, Ray's empty blocks
    often lacking columns, would only split groups.
    """
    import pyarrow as pa

    groups: list[SchemaGroup] = []
    for table in tables:
        if not table.num_rows:
            continue
        for group in groups:
            if table.schema.equals(group.schema):
                group.tables.append(table)
                break
            try:
                group.schema = pa.unify_schemas([group.schema, table.schema], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                continue
            group.tables.append(table)
            break
        else:
            groups.append(SchemaGroup(table.schema, [table]))
    return groups


def conformed(table: Any, schema: Any, where: str) -> Any:
    """``table`` with the columns of ``schema``, in its order and types; a column it lacks is all null."""
    import pyarrow as pa

    if table.schema.equals(schema):
        return table
    columns = []
    for target in schema:
        if target.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, target.type))
            continue
        column = table.column(target.name)
        try:
            columns.append(column.cast(target.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise SchemaConflictError(
                f"{where}: column {target.name!r} of type {column.type} cannot be cast to {target.type}, "
                f"the type unified from the task's blocks: {error}"
            ) from error
    return pa.Table.from_arrays(columns, schema=schema)


@dataclass
class DatasetFiles:
    """What a ``write_dataset`` task attempt wrote: the task commit's ``outputs`` and the partitions touched."""

    rows: int = 0
    outputs: dict[str, str] = field(default_factory=dict)
    """File path relative to the attempt directory -> destination-relative path."""
    partitions: set[str] = field(default_factory=set)


class PartitionNumbers:
    """Numbers each row's partition directory; the directories are named by ``partition_path`` once per distinct
    key of a batch (not per row), so a batch costs a few vectorised Arrow kernels whatever its size."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self.directories: list[str] = []
        """Partition directory of each number."""
        self._numbers: dict[str, int] = {}
        self._lock = threading.Lock()

    def number(self, directory: str) -> int:
        with self._lock:
            found = self._numbers.get(directory)
            if found is None:
                found = self._numbers[directory] = len(self.directories)
                self.directories.append(directory)
            return found

    def of(self, batch: Any) -> tuple[Any, int]:
        """An ``int32`` array: the partition number of each row of ``batch``; and how many distinct ones."""
        import pyarrow as pa

        codes, keys = self._distinct_keys(batch)
        numbers = pa.array([self.number(partition_path(self.columns, key)) for key in keys], type=pa.int32())
        return numbers.take(codes), len(keys)

    def _distinct_keys(self, batch: Any) -> tuple[Any, list[tuple[Any, ...]]]:
        """Each row's index into the batch's distinct partition keys, and those keys (Python values, as
        ``to_pylist`` gives them: the values ``TaskOutput`` names directories by)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        codes: Any = None
        keys: list[tuple[Any, ...]] = [()]
        for name in self.columns:
            column = batch.column(name)
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
            try:
                encoded = pc.dictionary_encode(column, null_encoding="encode")
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                encoded = _encode_in_python(column)
            values = encoded.dictionary.to_pylist()
            indices = encoded.indices.cast(pa.int64())
            if codes is None:
                codes, keys = indices, [(value,) for value in values]
                continue
            combined = pc.dictionary_encode(pc.add(pc.multiply(codes, len(values)), indices))
            pairs = combined.dictionary.to_pylist()
            keys = [(*keys[pair // len(values)], values[pair % len(values)]) for pair in pairs]
            codes = combined.indices.cast(pa.int64())
        return codes, keys


def _by_few_partitions(batch: Any, partition: Any, distinct: int) -> Iterator[tuple[Any, Any]]:
    """``batch`` (with each row's ``partition`` number) in slices of at most ``_PARTITIONS_PER_BATCH`` partitions.

    pyarrow's dataset writer slows down with the square of the partitions in one batch, so a batch of many partitions is
    sorted by partition and cut at partition boundaries. Every partition of the batch stays in one slice.
    """
    import pyarrow.compute as pc

    if distinct <= _PARTITIONS_PER_BATCH:
        yield batch, partition
        return
    order = pc.sort_indices(partition)
    batch, partition = batch.take(order), partition.take(order)
    starts = pc.indices_nonzero(pc.not_equal(partition.slice(1), partition.slice(0, len(partition) - 1)))
    cuts = [0, *(int(start) + 1 for start in starts.to_pylist()[_PARTITIONS_PER_BATCH - 1 :: _PARTITIONS_PER_BATCH])]
    cuts.append(len(partition))
    for begin, end in itertools.pairwise(cuts):
        yield batch.slice(begin, end - begin), partition.slice(begin, end - begin)


def _encode_in_python(column: Any) -> Any:
    """``dictionary_encode`` for a type Arrow cannot hash: group by the Python values."""
    import pyarrow as pa

    values = column.to_pylist()
    first: dict[str, int] = {}
    distinct: list[int] = []
    indices = []
    for index, value in enumerate(values):
        key = repr(value)
        if key not in first:
            first[key] = len(distinct)
            distinct.append(index)
        indices.append(first[key])
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), column.take(pa.array(distinct, pa.int64())))


def _file_format(settings: OutputSettings, pads: Any) -> tuple[Any, Any]:
    output = settings.output_format
    if output.name == PARQUET:
        parquet = pads.ParquetFileFormat()
        return parquet, parquet.make_write_options(
            compression=output.compression or "none", data_page_size=output.page_size
        )
    csv = pads.CsvFileFormat()
    return csv, csv.make_write_options(include_header=output.header)


def is_local(task_fs: Any) -> bool:
    """Whether a task's filesystem is local disk, which the frameworks' own native writers reach directly."""
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(task_fs, LocalFileSystem)


def _filesystem(task_fs: Any) -> Any:
    """pyarrow's own local filesystem on local disk (its threads write without the GIL); fsspec's elsewhere."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem
    from pyarrow.fs import LocalFileSystem as ArrowLocalFileSystem

    return ArrowLocalFileSystem() if is_local(task_fs) else PyFileSystem(FSSpecHandler(task_fs))


def _rows_per_group(settings: OutputSettings, first: Any, limit: int) -> int:
    """Rows of one row group: the block size (``parquet.block.size``) in Arrow bytes of the first chunk's rows.

    pyarrow's writer buffers a file's rows until a row group is full, so with partition columns each of the
    open files gets a share of four blocks (as ``RowGroupMemory`` bounds ``TaskOutput``'s files), at least 1 MiB.
    """
    block = settings.output_format.block_size
    if settings.partition_by:
        block = min(block, max(4 * block // max(settings.max_open_files, 1), 1 << 20))
    rows = _DEFAULT_ROWS_PER_GROUP
    if first is not None and first.num_rows and first.nbytes:
        rows = max(1, int(block * first.num_rows / first.nbytes))
    return min(rows, limit) if limit > 0 else rows


def write_dataset_task(
    settings: OutputSettings,
    schema: Any,
    batches: Iterable[Any],
    *,
    task_fs: Any,
    work_path: str,
    file_prefix: str,
    in_place: bool,
    max_open_files: int | None = None,
) -> DatasetFiles:
    """Write ``batches`` (of ``schema``) with ``write_dataset`` into ``work_path``; files are named
    ``<file_prefix>-c<i><extension>``. Rows of the partition columns are not written (they name directories).
    ``max_open_files`` defaults to ``settings.max_open_files``."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    columns = settings.partition_by
    numbers = PartitionNumbers(columns)
    result = DatasetFiles()
    data_schema = pa.schema([field for field in schema if field.name not in columns])
    partitioning = None
    if columns and in_place:
        levels = [pa.field(f"{_LEVEL}{index}", pa.string()) for index in range(len(columns))]
        data_schema = pa.schema([*data_schema, *levels])
        partitioning = pads.DirectoryPartitioning(pa.schema(levels), segment_encoding="none")
    elif columns:
        data_schema = data_schema.append(pa.field(_PARTITION_NUMBER, pa.int32()))
        partitioning = pads.partitioning(pa.schema([data_schema.field(_PARTITION_NUMBER)]), flavor="filename")

    def prepared() -> Iterator[tuple[Any, int]]:
        """Each chunk for pyarrow, with at most how many partitions it holds."""
        for batch in batches:
            if not batch.num_rows:
                continue
            result.rows += batch.num_rows
            if not columns:
                yield batch, 0
                continue
            partition, distinct = numbers.of(batch)
            data = batch.drop_columns(list(columns))
            names = [directory.split("/") for directory in numbers.directories] if in_place else []
            for rows, rows_partition in _by_few_partitions(data, partition, distinct):
                chunk = rows
                if in_place:
                    for index in range(len(columns)):
                        level = pa.array([segments[index] for segments in names], pa.string()).take(rows_partition)
                        chunk = chunk.append_column(f"{_LEVEL}{index}", level)
                else:
                    chunk = chunk.append_column(_PARTITION_NUMBER, rows_partition)
                yield chunk, min(distinct, _PARTITIONS_PER_BATCH)

    root = work_path.rstrip("/")
    written: list[str] = []
    file_format, options = _file_format(settings, pads)
    limit = settings.max_records_per_file
    base = root
    chunks = prepared()
    pending = next(chunks, None)

    def one_call() -> Iterator[Any]:
        """Chunks up to ``_PARTITIONS_PER_CALL`` partitions; the first one left over stays in ``pending``."""
        nonlocal pending
        partitions = 0
        while pending is not None:
            chunk, count = pending
            if partitions and partitions + count > _PARTITIONS_PER_CALL:
                return
            partitions += count
            yield chunk
            pending = next(chunks, None)

    rows_per_group = _rows_per_group(settings, pending[0] if pending is not None else None, limit)
    call = 0
    while pending is not None:
        tag = "" if call == 0 else f"-g{call}"  # a partition met again in a later call gets a file of its own
        pads.write_dataset(
            pa.RecordBatchReader.from_batches(data_schema, one_call()),
            base,
            format=file_format,
            file_options=options,
            filesystem=_filesystem(task_fs),
            partitioning=partitioning,
            basename_template=f"{file_prefix}{tag}-c{{i}}{settings.output_format.extension}",
            existing_data_behavior="overwrite_or_ignore",
            max_open_files=settings.max_open_files if max_open_files is None else max_open_files,
            max_partitions=_MAX_PARTITIONS,
            max_rows_per_file=limit,
            min_rows_per_group=rows_per_group,
            max_rows_per_group=rows_per_group,
            create_dir=in_place and is_local(task_fs),  # object stores have no directories to make
            file_visitor=lambda written_file: written.append(written_file.path),
        )
        call += 1
    for path in written:
        relative = posixpath.relpath(path, base) if path.startswith(base) else path
        if not columns or in_place:
            destination = relative
        else:
            number, _, name = relative.partition("_")
            destination = f"{numbers.directories[int(number)]}/{name}"
        result.outputs[relative] = destination
        directory = posixpath.dirname(destination)
        if directory:
            result.partitions.add(directory)
    log.debug("write_dataset wrote %d files, %d rows into %s", len(result.outputs), result.rows, root)
    return result
