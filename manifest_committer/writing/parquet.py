"""Parquet files as parquet-mr writes Spark's: row groups sized by bytes, dictionaries only where they pay.

pyarrow writes one row group per ``write_table`` call, so ``ParquetFileWriter`` buffers the batches it is handed
until their estimated encoded size reaches the block size (``parquet.block.size``), and writes them as one row
group: a row group per small batch would restart every column's dictionary and statistics. parquet-mr drops a
column's dictionary when dictionary and indices would not be smaller than the plain values; pyarrow keeps it up to
its 1 MiB limit, which costs a column of unique values a third more bytes. So the columns are chosen, from the
first row group, by parquet-mr's rule.
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from .formats import OutputFormat


class RowGroupMemory:
    """What the Parquet writers of one task buffer, together, before their row groups are written.

    A row group is written whole, so its rows wait in memory as Arrow data until their estimated encoded size
    (Arrow bytes times the ratio of encoded to Arrow bytes of the row groups written so far, 1 at first) reaches
    the block size. Together the writers sharing this object hold at most ``limit`` Arrow bytes: past it, the
    writer holding the most writes its row group early, as parquet-mr's memory manager shrinks the row groups of
    many open files.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ratio = 1.0
        """Encoded bytes per Arrow byte of the row groups written so far."""
        self._pending: dict[ParquetFileWriter, int] = {}

    def update(self, writer: ParquetFileWriter, pending: int) -> None:
        """``writer`` now buffers ``pending`` Arrow bytes; makes the largest buffer flush while over the limit."""
        if pending:
            self._pending[writer] = pending
        else:
            self._pending.pop(writer, None)
        while self._pending and sum(self._pending.values()) > self.limit:
            largest = max(self._pending, key=self._pending.__getitem__)
            largest.flush()

    def learn(self, arrow_bytes: int, encoded_bytes: int) -> None:
        """A row group of ``arrow_bytes`` took ``encoded_bytes`` in its file."""
        if arrow_bytes > 0 and encoded_bytes > 0:
            self.ratio = encoded_bytes / arrow_bytes


def _has_timestamp_ntz(data_type: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_timestamp(data_type):
        return data_type.tz is None
    if pa.types.is_struct(data_type):
        return any(_has_timestamp_ntz(field.type) for field in data_type)
    if pa.types.is_map(data_type):
        return _has_timestamp_ntz(data_type.key_type) or _has_timestamp_ntz(data_type.item_type)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _has_timestamp_ntz(data_type.value_type)
    return False


def _millis(data_type: Any) -> Any:
    """``data_type`` with time zone aware timestamps in milliseconds (Spark's ``TIMESTAMP_MILLIS`` leaves
    ``TimestampNTZ`` in microseconds)."""
    import pyarrow as pa

    if pa.types.is_timestamp(data_type):
        return pa.timestamp("ms", data_type.tz) if data_type.tz is not None else data_type
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_millis(field.type)) for field in data_type])
    if pa.types.is_map(data_type):
        return pa.map_(
            data_type.key_field.with_type(_millis(data_type.key_type)),
            data_type.item_field.with_type(_millis(data_type.item_type)),
        )
    if pa.types.is_large_list(data_type):
        return pa.large_list(data_type.value_field.with_type(_millis(data_type.value_type)))
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_millis(data_type.value_type)))
    return data_type


def _parquet_options(output: OutputFormat, schema: Any) -> dict[str, Any]:
    """pyarrow ``ParquetWriter`` keywords of ``output`` for files of ``schema``."""
    import pyarrow.parquet as pq

    options: dict[str, Any] = {"compression": output.compression or "none", "data_page_size": output.page_size}
    if output.timestamp_type == "INT96" and not any(_has_timestamp_ntz(field.type) for field in schema):
        # pyarrow's INT96 applies to every timestamp column; Spark keeps TimestampNTZ as INT64 micros, and reads
        # time zone aware TIMESTAMP_MICROS as well as INT96: so a schema holding both gets micros throughout.
        options["use_deprecated_int96_timestamps"] = True
    if output.footer:
        options["store_schema"] = False
        if "store_decimal_as_integer" in inspect.signature(pq.ParquetWriter.__init__).parameters:
            options["store_decimal_as_integer"] = True
    return options


class ParquetFileWriter:
    """Buffers batches into row groups of ``block_size`` estimated encoded bytes; the file's writer opens with
    the first row group, whose data chooses the dictionary-encoded columns."""

    def __init__(self, handle: BinaryIO, schema: Any, output: OutputFormat, memory: RowGroupMemory) -> None:
        import pyarrow as pa

        self._handle = handle
        self._memory = memory
        self._output = output
        self._schema = schema
        self._cast: Any = None
        if output.timestamp_type == "TIMESTAMP_MILLIS":
            millis = pa.schema([field.with_type(_millis(field.type)) for field in schema], metadata=schema.metadata)
            if not millis.equals(schema):
                self._cast = millis
        self._writer: Any = None
        self._batches: list[Any] = []
        self._pending = 0

    def write(self, batch: Any) -> None:
        # A batch larger than the room left in the row group is split: row groups end at the block size, not at
        # the batches' ends.
        while batch.num_rows:
            room = self._output.block_size / self._memory.ratio - self._pending
            if batch.nbytes <= room:
                self._batches.append(batch)
                self._pending += batch.nbytes
                break
            rows = max(1, min(batch.num_rows, int(room * batch.num_rows / max(batch.nbytes, 1))))
            head, batch = batch.slice(0, rows), batch.slice(rows)
            self._batches.append(head)
            self._pending += head.nbytes
            self.flush()
        if self._pending * self._memory.ratio >= self._output.block_size:
            self.flush()
        else:
            self._memory.update(self, self._pending)

    def _open(self, table: Any) -> Any:
        import pyarrow.parquet as pq

        options = _parquet_options(self._output, self._schema)
        options["use_dictionary"] = _dictionary_columns(table)
        footer = dict(self._output.footer)
        if footer and not hasattr(pq.ParquetWriter, "add_key_value_metadata"):
            # Before pyarrow 17 a file's key-value metadata comes from its schema alone, and only beside pyarrow's
            # own ARROW:schema entry: Spark reads the footer schema all the same.
            options.pop("store_schema", None)
            schema = table.schema.with_metadata({**(table.schema.metadata or {}), **footer})
            return pq.ParquetWriter(self._handle, schema, **options)
        writer = pq.ParquetWriter(self._handle, table.schema, **options)
        if footer:
            writer.add_key_value_metadata(footer)
        return writer

    def flush(self) -> None:
        """Write the buffered batches as one row group."""
        import pyarrow as pa

        if not self._batches:
            return
        table = pa.Table.from_batches(self._batches, self._schema)
        if self._cast is not None:
            table = table.cast(self._cast, safe=False)  # Spark truncates to milliseconds too
        pending = self._pending
        self._batches = []
        self._pending = 0
        if self._writer is None:
            self._writer = self._open(table)
        start = _position(self._handle)
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        end = _position(self._handle)
        if start is not None and end is not None:
            self._memory.learn(pending, end - start)
        self._memory.update(self, 0)

    def close(self) -> None:
        import pyarrow as pa

        try:
            self.flush()
            if self._writer is None:  # no rows: an empty file of the schema
                self._writer = self._open(pa.Table.from_batches([], self._cast or self._schema))
        finally:
            self._memory.update(self, 0)
            if self._writer is not None:
                self._writer.close()


def _leaf_paths(name: str, data_type: Any) -> list[str]:
    """The Parquet column paths of an Arrow field, as pyarrow names them (compliant nested types)."""
    import pyarrow as pa

    if pa.types.is_struct(data_type):
        return [path for field in data_type for path in _leaf_paths(f"{name}.{field.name}", field.type)]
    if pa.types.is_map(data_type):
        return [
            *_leaf_paths(f"{name}.key_value.key", data_type.key_type),
            *_leaf_paths(f"{name}.key_value.value", data_type.item_type),
        ]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _leaf_paths(f"{name}.list.element", data_type.value_type)
    return [name]


def _pays(column: Any) -> bool:
    """parquet-mr's rule: a dictionary is kept if dictionary plus indices are smaller than the plain values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    data_type = column.type
    values = len(column) - column.null_count
    if values <= 0:
        return True
    distinct = pc.unique(column.drop_null())
    index_bytes = values * max(1, math.ceil(math.log2(max(len(distinct), 2)))) / 8
    if (
        pa.types.is_binary(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or (pa.types.is_large_binary(data_type))
    ):
        plain = (pc.sum(pc.binary_length(column)).as_py() or 0) + 4 * values
        dictionary = (pc.sum(pc.binary_length(distinct)).as_py() or 0) + 4 * len(distinct)
    else:
        try:
            width = data_type.bit_width / 8
        except ValueError:
            return True
        plain = width * values
        dictionary = width * len(distinct)
    return bool(dictionary + index_bytes < plain)


def _dictionary_columns(table: Any) -> list[str]:
    """The column paths to dictionary-encode: nested ones always, top-level ones where a dictionary pays."""
    import pyarrow as pa

    chosen: list[str] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_nested(field.type) or pa.types.is_dictionary(field.type):
            chosen.extend(_leaf_paths(field.name, field.type))
        elif _pays(column):
            chosen.append(field.name)
    return chosen


def _position(handle: BinaryIO) -> int | None:
    try:
        return handle.tell()
    except (OSError, AttributeError, ValueError):
        return None
