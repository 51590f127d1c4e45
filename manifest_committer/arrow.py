"""Write pyarrow tables and datasets through the committer: ``manifest_committer.arrow.write``.

pyarrow's own ``write_dataset`` writes straight to the final paths, so a failure leaves partial files and an
overwrite deletes before it writes (apache/arrow#40502). Here the whole write is one task attempt in the calling
process, and pyarrow's ``write_dataset`` still writes it (multi-threaded), but into the task attempt directory,
with a ``basename_template`` unique to the attempt and a ``file_visitor`` that collects the files for the task
commit (``writing.dataset_output``); only the job commit publishes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .success_data import SuccessData
from .writing.job import WriteJob, batch_writer, write_in_process

log = logging.getLogger(__name__)

__all__ = ["write"]


def _schema_and_batches(data: Any) -> tuple[Any, Iterator[Any], bool]:
    """The schema and record batches of a ``Table``, ``RecordBatch``, ``RecordBatchReader`` or ``Dataset``, and
    whether they are in memory already (a table or a batch) rather than streamed (a reader or a dataset)."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches()), True
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data]), True
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data), False
    if isinstance(data, pads.Dataset):
        return data.schema, iter(data.to_batches()), False
    raise TypeError(f"expected a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, got {type(data).__name__}")


def write(
    table_or_dataset: Any,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    protocol: str = "auto",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> SuccessData | None:
    """Write pyarrow data to ``url`` through the committer; returns the job's ``_SUCCESS`` summary.

    The arguments are those of ``manifest_committer.spark.write``: ``mode`` ``errorifexists``, ``ignore`` (returns
    ``None`` and writes nothing when ``url`` holds data), ``append``, ``overwrite`` (with
    ``options={"partitionOverwriteMode": "dynamic"}`` only the partitions written); ``format`` ``parquet``, ``csv``
    or ``json``; Hive partition directories as Spark names them; ``options`` such as ``maxRecordsPerFile`` and
    committer keys. A failure leaves the destination as it was.
    """
    job = WriteJob.create(
        url,
        framework="arrow",
        format=format,
        partition_by=partition_by,
        mode=mode,
        protocol=protocol,
        storage_options=storage_options,
        options=options,
    )
    schema, batches, held_in_memory = _schema_and_batches(table_or_dataset)
    job.check_columns(schema.names)
    return write_in_process(job, batch_writer(batches, schema, held_in_memory=held_in_memory))
