"""manifest_committer.polars.write: Polars frames through the committer, read back with Polars and pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import manifest_committer.polars as mcp
from manifest_committer.polars import _FileNames
from tests.fixtures.writing import (
    NASTY_COLUMNS,
    NASTY_DIRECTORIES,
    NASTY_ROWS,
    PROTOCOLS,
    data_files,
    has_success,
    partition_directories,
    read_rows,
)

FRAME = pl.DataFrame({"dt": ["2026-11-22", "x=y", None], "x": [1, 2, 3]})
ROWS = sorted([("2026-11-22", 1), ("x=y", 2), (None, 3)], key=repr)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_data_and_lazy_frames_read_back_with_pyarrow(destination: str, protocol: str) -> None:
    summary = mcp.write(FRAME, destination, partition_by=["dt"], protocol=protocol)
    assert summary is not None and summary.success and summary.committer
    mcp.write(FRAME.lazy().filter(pl.col("x") > 1), destination, partition_by=["dt"], mode="overwrite",
              options={"partitionOverwriteMode": "dynamic"}, protocol=protocol)  # fmt: skip
    assert read_rows(destination, ["dt", "x"]) == ROWS
    assert "dt=x%3Dy" in {path.split("/")[0] for path in data_files(destination)}


def test_polars_reads_its_own_output_back(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcp.write(FRAME, url, partition_by=["dt"])
    back = pl.read_parquet(f"{url}/**/*.parquet", hive_partitioning=True).select("dt", "x")
    assert sorted(back.rows(), key=repr) == ROWS


def test_a_failed_write_leaves_the_destination_as_it_was(destination: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mcp.write(FRAME, destination, partition_by=["dt"])
    before = data_files(destination)
    original = _FileNames.__call__

    def fail_on_the_second_file(self: _FileNames, args: Any) -> Any:
        if self.outputs:
            raise OSError(f"injected failure naming a file for {args.partition_keys.row(0)}")
        return original(self, args)

    monkeypatch.setattr(_FileNames, "__call__", fail_on_the_second_file)
    with pytest.raises(OSError, match="injected failure"):
        mcp.write(FRAME, destination, partition_by=["dt"], mode="overwrite")
    assert data_files(destination) == before
    assert read_rows(destination, ["dt", "x"]) == ROWS


def test_not_a_frame_is_refused(destination: str) -> None:
    with pytest.raises(TypeError, match="got dict"):
        mcp.write({"x": [1]}, destination)
    assert not has_success(destination)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nasty_partition_values_make_the_spark_writers_directories(destination: str, protocol: str) -> None:
    """The file_path_provider names Spark's directories from the partition keys Polars hands it; Polars' own
    directory naming is never used."""
    mcp.write(pl.DataFrame(NASTY_COLUMNS), destination, partition_by=["country", "day"], protocol=protocol)
    assert partition_directories(destination) == NASTY_DIRECTORIES
    assert read_rows(destination, ["country", "day", "x"]) == NASTY_ROWS


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_polars_own_sinks_write_every_format(tmp_path: Path, format: str) -> None:
    url = str(tmp_path / "out")
    summary = mcp.write(FRAME.lazy(), url, format=format, partition_by=["dt"], options={"maxRecordsPerFile": "1"})
    assert summary is not None and len(summary.filenames) == 3
    assert read_rows(url, ["dt", "x"], format) == ROWS
    extension = {"parquet": ".snappy.parquet", "csv": ".csv", "json": ".json"}[format]
    assert all(path.endswith(extension) and "-a" in path for path in data_files(url))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_on_the_cloud_emulators(cloud_destination: str, protocol: str) -> None:
    """Polars writes each file into an fsspec file of Azurite or fake-gcs-server that its provider hands it."""
    mcp.write(FRAME, cloud_destination, partition_by=["dt"], protocol=protocol)
    replacement = pl.DataFrame({"dt": ["x=y"], "x": [20]})
    mcp.write(replacement.lazy(), cloud_destination, partition_by=["dt"], mode="overwrite", protocol=protocol,
              options={"partitionOverwriteMode": "dynamic"})  # fmt: skip
    assert read_rows(cloud_destination, ["dt", "x"]) == sorted([("2026-11-22", 1), ("x=y", 20), (None, 3)], key=repr)
    assert has_success(cloud_destination)


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_unpartitioned_frames_are_written_in_every_format(destination: str, format: str) -> None:
    """Polars 1.44 and 2 refuse a ``PartitionBy`` with neither a key nor a limit: one file, all the rows."""
    frame = pl.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    summary = mcp.write(frame, destination, format=format)
    assert summary is not None and len(summary.filenames) == 1
    mcp.write(frame.lazy().filter(pl.col("x") > 1), destination, format=format, mode="append")
    assert read_rows(destination, ["x", "y"], format) == [(1, "a"), (2, "b"), (2, "b"), (3, "c"), (3, "c")]
