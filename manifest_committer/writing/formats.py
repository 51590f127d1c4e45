"""File formats every writer task (Spark, Ray, Dask, pyarrow, Polars) writes with pyarrow: Parquet (snappy by
default), CSV and JSON lines.

A format turns a stream of Arrow record batches of one schema into one file, written to a binary file object
of the task attempt's filesystem; it never touches paths or the committer.

Parquet row groups are sized by bytes, as parquet-mr sizes Spark's (``parquet.block.size``, 128 MiB), not by the
batches a writer is handed: a row group per small batch restarts every column's dictionary and statistics and
multiplies the bytes. pyarrow writes one row group per ``write_table`` call, so batches are buffered until their
estimated encoded size reaches the block size (``writing/parquet.py``).
"""

from __future__ import annotations

import base64
import datetime
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import orjson

from ..errors import ConfigError
from .parquet import ParquetFileWriter, RowGroupMemory

PARQUET = "parquet"
CSV = "csv"
JSON = "json"

_ALIASES = {"parquet": PARQUET, "csv": CSV, "json": JSON, "jsonl": JSON, "jsonlines": JSON}
_PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")

PARQUET_BLOCK_SIZE = "parquet.block.size"
"""Writer option: the row group size in bytes, encoded and compressed (parquet-mr's key, which Spark honours)."""
PARQUET_PAGE_SIZE = "parquet.page.size"
"""Writer option: the data page size in bytes (parquet-mr's key)."""
DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024
"""parquet-mr's default row group size."""
DEFAULT_PAGE_SIZE = 1024 * 1024
"""parquet-mr's (and pyarrow's) default data page size."""
TIMESTAMP_TYPES = ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS")
"""The values of Spark's ``spark.sql.parquet.outputTimestampType``."""


class FileWriter(Protocol):
    """Writes record batches of one schema into one open file."""

    def write(self, batch: Any) -> None:
        """Append one ``pyarrow.RecordBatch``."""

    def close(self) -> None:
        """Finish the file (footer, flush); the caller closes the underlying file object."""


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """One output format and its settings; picklable, so it travels to the executors and workers inside the writer."""

    name: str
    compression: str | None = None
    """Parquet codec (``snappy`` by default); ignored by CSV and JSON."""
    header: bool = True
    """CSV only: write a header line."""
    block_size: int = DEFAULT_BLOCK_SIZE
    """Parquet only: a row group ends once its estimated encoded size reaches this many bytes."""
    page_size: int = DEFAULT_PAGE_SIZE
    """Parquet only: the data page size in bytes."""
    timestamp_type: str | None = None
    """Parquet only: how time zone aware timestamps are stored (``TIMESTAMP_TYPES``); ``None``: pyarrow's way
    (``TIMESTAMP_MICROS`` for microseconds)."""
    footer: tuple[tuple[str, str], ...] = ()
    """Parquet only: key-value metadata of every file's footer. When given (Spark's schema), it replaces pyarrow's
    own ``ARROW:schema`` entry, and decimals are stored as integers where they fit, as Spark stores them."""

    @property
    def extension(self) -> str:
        """File name suffix, as Spark names its own files (``.snappy.parquet``, ``.csv``, ``.json``)."""
        if self.name == PARQUET:
            codec = self.compression or "none"
            return ".parquet" if codec in ("none", "uncompressed") else f".{codec}.parquet"
        return f".{self.name}"

    def open(self, handle: BinaryIO, schema: Any, memory: RowGroupMemory | None = None) -> FileWriter:
        """A writer of batches of ``schema`` (a ``pyarrow.Schema``) into ``handle``; ``memory`` bounds what the
        Parquet writers of one task buffer together (one of its own by default)."""
        if self.name == PARQUET:
            return ParquetFileWriter(handle, schema, self, memory or RowGroupMemory(4 * self.block_size))
        if self.name == CSV:
            return _CsvWriter(handle, schema, self.header)
        return _JsonLinesWriter(handle)


def output_format(name: str, options: Mapping[str, str]) -> OutputFormat:
    """The format named ``name`` (``parquet``, ``csv``, ``json``/``jsonl``) with its writer options."""
    canonical = _ALIASES.get(name.strip().lower())
    if canonical is None:
        raise ConfigError(f"format {name!r} is not supported: use parquet, csv or json")
    if canonical == PARQUET:
        codec = options.get("compression", "snappy").strip().lower()
        if codec not in _PARQUET_CODECS:
            raise ConfigError(f"compression {codec!r} is not a Parquet codec: use one of {', '.join(_PARQUET_CODECS)}")
        return OutputFormat(
            PARQUET,
            compression=codec,
            block_size=_size_option(options, PARQUET_BLOCK_SIZE, DEFAULT_BLOCK_SIZE),
            page_size=_size_option(options, PARQUET_PAGE_SIZE, DEFAULT_PAGE_SIZE),
        )
    if canonical == CSV:
        header = options.get("header", "true").strip().lower()
        if header not in ("true", "false"):
            raise ConfigError(f"header: expected true or false, got {header!r}")
        return OutputFormat(CSV, header=header == "true")
    return OutputFormat(JSON)


def _size_option(options: Mapping[str, str], key: str, default: int) -> int:
    text = str(options.get(key, default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{key}: expected a number of bytes, got {text!r}") from None
    if value <= 0:
        raise ConfigError(f"{key}: expected a positive number of bytes, got {text!r}")
    return value


class _CsvWriter:
    """pyarrow's CSV writer; a batch with a quote or backslash in a string is written as Spark's writer escapes
    them (``\\"``, ``\\\\``), which is what Spark's reader expects (pyarrow doubles quotes instead)."""

    def __init__(self, handle: BinaryIO, schema: Any, header: bool) -> None:
        import pyarrow.csv as pacsv

        self._handle = handle
        self._writer = pacsv.CSVWriter(handle, schema, write_options=pacsv.WriteOptions(include_header=header))

    def write(self, batch: Any) -> None:
        if _needs_escapes(batch):
            self._write_escaped(batch)
        else:
            self._writer.write_batch(batch)

    def _write_escaped(self, batch: Any) -> None:
        import csv
        import io

        import pyarrow as pa

        # Each value formatted as pyarrow's CSV writer formats it: its cast to string.
        columns = [column.cast(pa.string()).to_pylist() for column in batch.columns]
        text = io.StringIO()
        writer = csv.writer(text, escapechar="\\", doublequote=False, lineterminator="\n")
        writer.writerows(zip(*columns, strict=True))
        self._handle.write(text.getvalue().encode("utf-8"))

    def close(self) -> None:
        self._writer.close()


def _needs_escapes(batch: Any) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    return any(
        pc.any(pc.match_substring_regex(column, r'["\\]')).as_py()
        for column in batch.columns
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    )


def _json_default(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


class _JsonLinesWriter:
    """One JSON object per line; null fields are left out, as Spark's own JSON writer does."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    def write(self, batch: Any) -> None:
        lines = [
            orjson.dumps({key: value for key, value in row.items() if value is not None}, default=_json_default)
            for row in batch.to_pylist()
        ]
        if lines:
            self._handle.write(b"\n".join(lines) + b"\n")

    def close(self) -> None:
        pass
