"""manifest_committer.arrow.write: pyarrow data through the committer, read back with pyarrow's Hive dataset."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import manifest_committer.arrow as mca
from manifest_committer.writing import DestinationExistsError
from tests.fixtures.writing import data_files, has_success, read_rows

TABLE = pa.table({"dt": ["2026-11-22", "a/b", None, "2026-11-22"], "x": [1, 2, 3, 4]})
ROWS = [("2026-11-22", 1), ("2026-11-22", 4), ("a/b", 2), (None, 3)]


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_write_reads_back_row_exact(destination: str, protocol: str, format: str) -> None:
    summary = mca.write(TABLE, destination, format=format, partition_by=["dt"], protocol=protocol)
    assert summary is not None and summary.success
    assert read_rows(destination, ["dt", "x"], format) == sorted(ROWS, key=repr)
    directories = {path.split("/")[0] for path in data_files(destination)}
    assert directories == {"dt=2026-11-22", "dt=a%2Fb", "dt=__HIVE_DEFAULT_PARTITION__"}


def test_a_dataset_or_reader_is_written_too(destination: str, tmp_path: object) -> None:
    mca.write(pa.RecordBatchReader.from_batches(TABLE.schema, TABLE.to_batches()), destination, mode="append")
    mca.write(pads.dataset(TABLE), destination, mode="append")
    assert len(read_rows(destination, ["dt", "x"])) == 8


def failing_reader() -> pa.RecordBatchReader:
    def batches() -> Iterator[pa.RecordBatch]:
        yield from TABLE.to_batches()
        raise RuntimeError("injected failure after the first batch")

    return pa.RecordBatchReader.from_batches(TABLE.schema, batches())


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
def test_a_failed_overwrite_leaves_the_old_rows(destination: str, protocol: str) -> None:
    mca.write(TABLE, destination, partition_by=["dt"], protocol=protocol)
    before = data_files(destination)
    with pytest.raises(Exception, match="injected failure"):
        mca.write(failing_reader(), destination, partition_by=["dt"], mode="overwrite", protocol=protocol)
    assert data_files(destination) == before
    assert read_rows(destination, ["dt", "x"]) == sorted(ROWS, key=repr)


def test_a_failed_first_write_leaves_nothing(destination: str) -> None:
    with pytest.raises(Exception, match="injected failure"):
        mca.write(failing_reader(), destination, partition_by=["dt"])
    assert data_files(destination) == []
    assert not has_success(destination)


def test_save_modes(destination: str) -> None:
    mca.write(TABLE, destination)
    with pytest.raises(DestinationExistsError, match=destination.rsplit("://", maxsplit=1)[-1]):
        mca.write(TABLE, destination)
    assert mca.write(TABLE, destination, mode="ignore") is None
    mca.write(TABLE, destination, mode="append")
    assert len(read_rows(destination, ["dt", "x"])) == 8
    mca.write(TABLE.slice(0, 1), destination, mode="overwrite")
    assert read_rows(destination, ["dt", "x"]) == [("2026-11-22", 1)]


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(destination: str) -> None:
    mca.write(TABLE, destination, partition_by=["dt"])
    replacement = pa.table({"dt": ["a/b"], "x": [20]})
    mca.write(replacement, destination, partition_by=["dt"], mode="overwrite",
              options={"partitionOverwriteMode": "dynamic"})  # fmt: skip
    assert read_rows(destination, ["dt", "x"]) == sorted(
        [("2026-11-22", 1), ("2026-11-22", 4), ("a/b", 20), (None, 3)], key=repr
    )


def test_not_arrow_data_is_refused(destination: str) -> None:
    with pytest.raises(TypeError, match="got list"):
        mca.write([1, 2], destination)
