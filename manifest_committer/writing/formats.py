"""File formats every writer task (Spark, Ray, Dask, pyarrow, Polars) writes with pyarrow: Parquet (snappy by
default), CSV and JSON lines.

A format turns a stream of Arrow record batches of one schema into one file, written to a binary file object
of the task attempt's filesystem; it never touches paths or the committer.
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

PARQUET = "parquet"
CSV = "csv"
JSON = "json"

_ALIASES = {"parquet": PARQUET, "csv": CSV, "json": JSON, "jsonl": JSON, "jsonlines": JSON}
_PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")


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

    @property
    def extension(self) -> str:
        """File name suffix, as Spark names its own files (``.snappy.parquet``, ``.csv``, ``.json``)."""
        if self.name == PARQUET:
            codec = self.compression or "none"
            return ".parquet" if codec in ("none", "uncompressed") else f".{codec}.parquet"
        return f".{self.name}"

    def open(self, handle: BinaryIO, schema: Any) -> FileWriter:
        """A writer of batches of ``schema`` (a ``pyarrow.Schema``) into ``handle``."""
        if self.name == PARQUET:
            return _ParquetWriter(handle, schema, self.compression or "none")
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
        return OutputFormat(PARQUET, compression=codec)
    if canonical == CSV:
        header = options.get("header", "true").strip().lower()
        if header not in ("true", "false"):
            raise ConfigError(f"header: expected true or false, got {header!r}")
        return OutputFormat(CSV, header=header == "true")
    return OutputFormat(JSON)


class _ParquetWriter:
    def __init__(self, handle: BinaryIO, schema: Any, codec: str) -> None:
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(handle, schema, compression=codec)

    def write(self, batch: Any) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()


class _CsvWriter:
    def __init__(self, handle: BinaryIO, schema: Any, header: bool) -> None:
        import pyarrow.csv as pacsv

        self._writer = pacsv.CSVWriter(handle, schema, write_options=pacsv.WriteOptions(include_header=header))

    def write(self, batch: Any) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()


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
