"""Parquet row groups of ``parquet.block.size`` bytes, and a bound on what a task's open files buffer together."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from manifest_committer.writing.formats import output_format
from manifest_committer.writing.parquet import RowGroupMemory


def batches(rows: int, per_batch: int) -> list[pa.RecordBatch]:
    table = pa.table({"id": pa.array(range(rows)), "s": pa.array([f"{i * 7919:064d}" for i in range(rows)])})
    return list(table.to_batches(max_chunksize=per_batch))


def row_groups(data: bytes) -> list[int]:
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    return [metadata.row_group(index).num_rows for index in range(metadata.num_row_groups)]


def test_small_batches_make_one_row_group_below_the_block_size() -> None:
    handle = io.BytesIO()
    writer = output_format("parquet", {}).open(handle, batches(1, 1)[0].schema)
    for batch in batches(50_000, 1_000):
        writer.write(batch)
    writer.close()
    assert row_groups(handle.getvalue()) == [50_000]


def test_open_files_together_buffer_at_most_the_limit() -> None:
    """Ten files of 1 MiB of Arrow data each, under a block of 4 MiB: alone each would be one row group; sharing
    a limit of 2 MiB, the largest buffer is written early whenever the ten hold more."""
    output = output_format("parquet", {"parquet.block.size": str(4 << 20)})
    memory = RowGroupMemory(2 << 20)
    handles = [io.BytesIO() for _ in range(10)]
    data = batches(12_000, 1_000)
    writers = [output.open(handle, data[0].schema, memory) for handle in handles]
    for batch in data:
        for writer in writers:
            writer.write(batch)
    for writer in writers:
        writer.close()
    groups = [row_groups(handle.getvalue()) for handle in handles]
    assert all(sum(counts) == 12_000 for counts in groups)
    assert all(len(counts) > 1 for counts in groups[:5]), groups
    assert max(max(counts) for counts in groups) < 12_000
