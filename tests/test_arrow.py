"""manifest_committer.arrow.write: pyarrow data through the committer, read back with pyarrow's Hive dataset."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import manifest_committer.arrow as mca
from manifest_committer.writing import DestinationExistsError
from tests.fixtures.writing import (
    NASTY_COLUMNS,
    NASTY_DIRECTORIES,
    NASTY_ROWS,
    PROTOCOLS,
    data_files,
    has_success,
    partition_directories,
    read_rows,
    record_write_dataset,
)

TABLE = pa.table({"dt": ["2026-11-22", "a/b", None, "2026-11-22"], "x": [1, 2, 3, 4]})
ROWS = [("2026-11-22", 1), ("2026-11-22", 4), ("a/b", 2), (None, 3)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
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


@pytest.mark.parametrize("protocol", PROTOCOLS)
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


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nasty_partition_values_make_the_spark_writers_directories(destination: str, protocol: str) -> None:
    """write_dataset partitions on the shared ``partition_path`` names, never on pyarrow's own escaping: the
    directories are those of the Spark writer, and the same as ``TaskOutput`` (which writes JSON lines) makes."""
    table = pa.table(NASTY_COLUMNS)
    mca.write(table, destination, partition_by=["country", "day"], protocol=protocol)
    assert partition_directories(destination) == NASTY_DIRECTORIES
    assert read_rows(destination, ["country", "day", "x"]) == NASTY_ROWS
    through_task_output = f"{destination}-json"
    mca.write(table, through_task_output, format="json", partition_by=["country", "day"], protocol=protocol)
    assert partition_directories(through_task_output) == NASTY_DIRECTORIES


def test_typed_and_dictionary_partition_values_are_named_as_spark_names_them(destination: str) -> None:
    """Dates, timestamps, booleans, and dictionary-encoded strings: one directory per value, Spark's text."""
    table = pa.table(
        {
            "d": pa.array([datetime.date(2026, 11, 22), None, datetime.date(2026, 11, 22)]),
            "t": pa.array([datetime.datetime(2026, 1, 2, 3, 4, 5, 120000)] * 3),
            "b": pa.array([True, False, True]),
            "s": pa.array(["a/b", "a/b", None]).dictionary_encode(),
            "x": [1, 2, 3],
        }
    )
    mca.write(table, destination, partition_by=["d", "t", "b", "s"])
    assert partition_directories(destination) == {
        "d=2026-11-22/t=2026-01-02 03%3A04%3A05.12/b=true/s=a%2Fb",
        "d=__HIVE_DEFAULT_PARTITION__/t=2026-01-02 03%3A04%3A05.12/b=false/s=a%2Fb",
        "d=2026-11-22/t=2026-01-02 03%3A04%3A05.12/b=true/s=__HIVE_DEFAULT_PARTITION__",
    }


def test_files_are_written_by_write_dataset_with_names_unique_to_the_attempt(
    destination: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow's own writer writes the files (one ``write_dataset`` call per task attempt), every name carries the
    job and the attempt, and ``maxRecordsPerFile`` rolls files as pyarrow's ``max_rows_per_file``."""
    calls = record_write_dataset(monkeypatch)
    summary = mca.write(TABLE, destination, partition_by=["dt"], options={"maxRecordsPerFile": "1"})
    assert summary is not None
    assert len(calls) == 1 and calls[0]["max_rows_per_file"] == 1
    files = data_files(destination)
    assert len(files) == 4
    assert all(path.rsplit("/", 1)[-1].startswith(f"part-00000-{summary.job_id}-a") for path in files)
    assert sorted(unquote(name.split("/out/", 1)[-1]) for name in summary.filenames) == files  # URLs


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_on_the_cloud_emulators(cloud_destination: str, protocol: str) -> None:
    """Through pyarrow's fsspec handler into Azurite and fake-gcs-server: write, dynamic overwrite, read back."""
    mca.write(TABLE, cloud_destination, partition_by=["dt"], protocol=protocol)
    mca.write(pa.table({"dt": ["a/b"], "x": [20]}), cloud_destination, partition_by=["dt"], mode="overwrite",
              protocol=protocol, options={"partitionOverwriteMode": "dynamic"})  # fmt: skip
    assert read_rows(cloud_destination, ["dt", "x"]) == sorted(
        [("2026-11-22", 1), ("2026-11-22", 4), ("a/b", 20), (None, 3)], key=repr
    )
    assert has_success(cloud_destination)


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("local", {}, 1024),  # pyarrow's own default: at the limit it finishes files one at a time
        ("local", {"maxOpenFiles": "8"}, 8),
        ("memory", {}, 1024),  # the table is in memory: the upload buffers hold at most its rows once more
        ("memory", {"maxOpenFiles": "8"}, 8),
        ("memory-streamed", {}, 64),  # an open file on an object store buffers what a stream has not uploaded
    ],
)
def test_open_files_of_pyarrows_writer(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, url: str, options: dict[str, str], expected: int
) -> None:
    calls = record_write_dataset(monkeypatch)
    destination = f"{tmp_path}/out" if url == "local" else f"memory://open-files-{url}-{expected}/out"
    table = pa.table({"p": [1, 2], "x": [3, 4]})
    data = pa.RecordBatchReader.from_batches(table.schema, table.to_batches()) if url.endswith("streamed") else table
    mca.write(data, destination, partition_by=["p"], mode="overwrite", protocol="manifest", options=options)
    assert [call["max_open_files"] for call in calls] == [expected]
    assert read_rows(destination, ["p", "x"]) == [(1, 3), (2, 4)]
