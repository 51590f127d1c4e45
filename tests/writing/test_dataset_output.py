"""write_dataset_task: pyarrow's dataset writer into a task attempt, flat or in place, in Spark's directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from manifest_committer.writing import WriteJob, dataset_output
from manifest_committer.writing.dataset_output import PartitionNumbers, write_dataset_task
from manifest_committer.writing.partitioning import partition_path
from tests.fixtures.writing import record_write_dataset


def job_for(url: str, **options: str) -> WriteJob:
    return WriteJob.create(url, framework="test", partition_by=["dt"], mode="append", options=options)


def write(tmp_path: Path, batches: list[pa.RecordBatch], *, in_place: bool, **options: str) -> Any:
    job = job_for(str(tmp_path / "out"), **options)
    work = tmp_path / "attempt"
    work.mkdir()
    return write_dataset_task(
        job, batches[0].schema, batches, task_fs=_local(), work_path=str(work), file_prefix="part-00000-j-a1",
        in_place=in_place,
    )  # fmt: skip


def _local() -> Any:
    import fsspec

    return fsspec.filesystem("file")


def test_partition_numbers_name_each_distinct_key_once_as_spark_does() -> None:
    batch = pa.record_batch({"a": ["x/y", None, "x/y", ""], "b": [1, 1, 1, 2], "v": [0, 1, 2, 3]})
    numbers = PartitionNumbers(["a", "b"])
    partition, distinct = numbers.of(batch)
    assert distinct == 3
    directories = [numbers.directories[number] for number in partition.to_pylist()]
    assert directories == [partition_path(["a", "b"], key) for key in [("x/y", 1), (None, 1), ("x/y", 1), ("", 2)]]
    again, _ = numbers.of(pa.record_batch({"a": [None], "b": [1], "v": [9]}))
    assert again.to_pylist() == [partition.to_pylist()[1]], "numbers hold across batches"


def test_flat_files_are_declared_into_their_partition_directories(tmp_path: Path) -> None:
    batch = pa.record_batch({"dt": ["a", "b/c", None, "a"], "x": [1, 2, 3, 4]})
    written = write(tmp_path, [batch], in_place=False)
    assert all("/" not in local for local in written.outputs)
    assert {path.rsplit("/", 1)[0] for path in written.outputs.values()} == {
        "dt=a", "dt=b%2Fc", "dt=__HIVE_DEFAULT_PARTITION__"
    }  # fmt: skip
    assert written.partitions == {"dt=a", "dt=b%2Fc", "dt=__HIVE_DEFAULT_PARTITION__"}
    assert sorted(p.name for p in (tmp_path / "attempt").iterdir()) == sorted(written.outputs)
    for local, destination in written.outputs.items():
        assert destination.rsplit("/", 1)[1].startswith("part-00000-j-a1-c")
        assert pq.read_table(tmp_path / "attempt" / local).column_names == ["x"], "partition columns are not written"
    assert written.rows == 4


def test_in_place_files_lie_at_their_destination_relative_paths(tmp_path: Path) -> None:
    batch = pa.record_batch({"dt": ["a", "b/c", None], "x": [1, 2, 3]})
    written = write(tmp_path, [batch], in_place=True)
    assert all(local == destination for local, destination in written.outputs.items())
    for local in written.outputs:
        assert (tmp_path / "attempt" / local).is_file()
        assert pq.read_table(tmp_path / "attempt" / local).column_names == ["x"]


@pytest.mark.parametrize("in_place", [False, True])
def test_a_batch_of_many_partitions_reaches_pyarrow_in_slices_of_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    """pyarrow's writer is quadratic in the partitions of one batch: a batch of 300 is handed over sorted, in
    slices of at most 128 partitions, and each partition still gets exactly one file (regression: 10,000
    partitions took 311 s in one batch)."""
    seen: list[int] = []
    original = pads.write_dataset

    def counting(data: Any, base_dir: str, **arguments: Any) -> None:
        def batches() -> Any:
            for batch in data:
                column = batch.column(batch.num_columns - 1)
                seen.append(len(pc.unique(column)))
                yield batch

        original(pa.RecordBatchReader.from_batches(data.schema, batches()), base_dir, **arguments)

    monkeypatch.setattr(pads, "write_dataset", counting)
    batch = pa.record_batch({"dt": [f"d{index % 300}" for index in range(900)], "x": list(range(900))})
    written = write(tmp_path, [batch], in_place=in_place)
    assert seen == [128, 128, 44]
    assert len(written.outputs) == 300
    assert written.rows == 900
    assert len({destination.rsplit("/", 1)[0] for destination in written.outputs.values()}) == 300


@pytest.mark.parametrize("in_place", [False, True])
def test_a_task_of_many_partitions_writes_them_in_calls_of_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    """pyarrow's writer also slows down with the partitions one call meets (10,000: 4.3 s in one call, 0.76 s
    in ten): past 1,024 partitions (counted by slices of 128) the next slices go to another call. A partition
    met again in a later call (a second input batch) gets a file of its own, named apart: no row is lost."""
    calls = record_write_dataset(monkeypatch)
    first = pa.record_batch({"dt": [f"d{index % 1300}" for index in range(2600)], "x": list(range(2600))})
    again = pa.record_batch({"dt": ["d0", "d1299"], "x": [-1, -2]})
    written = write(tmp_path, [first, again], in_place=in_place)
    assert [call["basename_template"] for call in calls] == [
        "part-00000-j-a1-c{i}.snappy.parquet",
        "part-00000-j-a1-g1-c{i}.snappy.parquet",
    ]
    assert written.rows == 2602
    d0 = sorted(destination for destination in written.outputs.values() if destination.startswith("dt=d0/"))
    assert d0 == ["dt=d0/part-00000-j-a1-c0.snappy.parquet", "dt=d0/part-00000-j-a1-g1-c0.snappy.parquet"]
    # d1299 may get a second file within one call: pyarrow closes the least recently written file at 64 open.
    assert len(set(written.outputs.values())) == len(written.outputs) >= 1301
    rows = pa.concat_tables(pq.read_table(tmp_path / "attempt" / local) for local in written.outputs)
    assert sorted(rows.column("x").to_pylist()) == [-2, -1, *range(2600)]


def test_max_records_per_file_rolls_files(tmp_path: Path) -> None:
    batch = pa.record_batch({"dt": ["a"] * 5, "x": list(range(5))})
    written = write(tmp_path, [batch], in_place=False, maxRecordsPerFile="2")
    assert len(written.outputs) == 3
    assert {"parquet", "csv"} == dataset_output.DATASET_FORMATS


def test_schema_groups_unify_what_pyarrow_can_and_split_the_rest() -> None:
    """A null column, int32/int64/double, a missing column and another column order unify into one group; a
    column of strings where the group has numbers starts a group of its own; tables without rows are left out."""
    tables = [
        pa.table({"dt": ["a"], "x": pa.array([1], pa.int32()), "y": pa.nulls(1)}),
        pa.table({"x": pa.array([2.5]), "dt": ["b"]}),
        pa.table({"dt": ["c"], "x": ["three"]}),
        pa.table({"dt": pa.array([], pa.string()), "z": pa.array([], pa.bool_())}),
        pa.table({"dt": ["d"], "y": ["s"]}),
    ]
    groups = dataset_output.schema_groups(tables)
    assert [group.schema for group in groups] == [
        pa.schema({"dt": pa.string(), "x": pa.float64(), "y": pa.string()}),
        pa.schema({"dt": pa.string(), "x": pa.string()}),
    ]
    assert [len(group.tables) for group in groups] == [3, 1]
    first = pa.Table.from_batches(list(groups[0].batches("task")))
    assert first.to_pylist() == [
        {"dt": "a", "x": 1.0, "y": None},
        {"dt": "b", "x": 2.5, "y": None},
        {"dt": "d", "x": None, "y": "s"},
    ]


def test_a_value_the_unified_type_cannot_hold_is_an_error_naming_the_column() -> None:
    group = dataset_output.SchemaGroup(pa.schema({"x": pa.float64()}), [pa.table({"x": [2**60]})])
    with pytest.raises(dataset_output.SchemaConflictError, match=r"attempt_7: column 'x' of type int64 cannot be cast"):
        list(group.batches("attempt_7"))


def test_row_groups_are_sized_by_bytes_not_by_the_batches_handed_in(tmp_path: Path) -> None:
    """A reader of 10,000-row batches: one row group per file at the default block size; about
    ``parquet.block.size`` Arrow bytes each with a small one."""
    import manifest_committer.arrow as mca

    table = pa.table({"id": pa.array(range(100_000)), "s": pa.array([f"v{i % 97}" for i in range(100_000)])})
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=10_000))
    mca.write(reader, str(tmp_path / "default"))
    (file,) = sorted((tmp_path / "default").glob("*.parquet"))
    assert pq.ParquetFile(file).metadata.num_row_groups == 1
    block = table.nbytes // 4
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=10_000))
    mca.write(reader, str(tmp_path / "small"), options={"parquet.block.size": str(block)})
    (file,) = sorted((tmp_path / "small").glob("*.parquet"))
    rows = [group.num_rows for group in (pq.ParquetFile(file).metadata.row_group(i) for i in range(4))]
    assert pq.ParquetFile(file).metadata.num_row_groups == 4
    assert all(abs(count - 25_000) <= 250 for count in rows), rows
