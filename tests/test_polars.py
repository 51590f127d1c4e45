"""manifest_committer.polars.write: Polars frames through the committer, read back with Polars and pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import manifest_committer.polars as mcp
from manifest_committer.polars import _FileNames
from tests.fixtures.writing import data_files, has_success, read_rows

FRAME = pl.DataFrame({"dt": ["2026-11-22", "x=y", None], "x": [1, 2, 3]})
ROWS = sorted([("2026-11-22", 1), ("x=y", 2), (None, 3)], key=repr)


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
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
