"""The Polars writer sizes Parquet row groups by bytes (``parquet.block.size``), as the other writers do, not by
Polars' own count of rows."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import manifest_committer.polars as mcp

BLOCK = 256 * 1024


def _frame(rows: int) -> pl.DataFrame:
    """Random longs, doubles and hex strings: next to incompressible, so encoded bytes follow Arrow's."""
    rng = np.random.default_rng(7)
    return pl.DataFrame(
        {
            "id": rng.integers(0, 1 << 62, rows),
            "x": rng.random(rows),
            "s": [f"{value:016x}" for value in rng.integers(0, 1 << 62, rows)],
            "k": rng.integers(0, 2, rows),
        }
    )


def _row_groups(url: str) -> dict[str, list[tuple[int, int]]]:
    """(rows, total_byte_size) of every row group of every committed Parquet file under ``url``."""
    fs, root = fsspec.core.url_to_fs(url)
    groups: dict[str, list[tuple[int, int]]] = {}
    for path in sorted(fs.find(root)):
        if path.endswith(".parquet"):
            with fs.open(path, "rb") as handle:
                metadata = pq.ParquetFile(handle).metadata
            groups[path] = [
                (metadata.row_group(i).num_rows, metadata.row_group(i).total_byte_size)
                for i in range(metadata.num_row_groups)
            ]
    return groups


def _assert_block_sized(groups: dict[str, list[tuple[int, int]]], rows: int) -> None:
    assert sum(count for file in groups.values() for count, _ in file) == rows
    for file in groups.values():
        assert len(file) >= 3, groups
        for _, size in file[:-1]:  # the last row group of a file holds what is left
            assert 0.5 * BLOCK <= size <= 1.5 * BLOCK, file


def _lazy_scan(tmp_path: Path, frame: pl.DataFrame) -> pl.LazyFrame:
    source = tmp_path / "source.parquet"
    frame.write_parquet(source)
    return pl.scan_parquet(source)


INPUTS: dict[str, Callable[[Path, pl.DataFrame], Any]] = {
    "DataFrame": lambda _, frame: frame,
    "LazyFrame with strings": _lazy_scan,
    "LazyFrame of fixed width": lambda path, frame: _lazy_scan(path, frame.drop("s")),
}


@pytest.mark.parametrize("kind", list(INPUTS))
@pytest.mark.parametrize("partition_by", [[], ["k"]])
def test_a_small_block_size_gives_row_groups_of_about_that_many_bytes(
    tmp_path: Path, kind: str, partition_by: list[str]
) -> None:
    rows = 120_000
    data = INPUTS[kind](tmp_path, _frame(rows))
    url = str(tmp_path / "out")
    mcp.write(data, url, partition_by=partition_by, options={"parquet.block.size": str(BLOCK)})
    groups = _row_groups(url)
    assert len(groups) == (2 if partition_by else 1)
    _assert_block_sized(groups, rows)


def test_off_local_disk_the_collected_frame_sizes_the_row_groups(tmp_path: Path) -> None:
    rows = 120_000
    url = f"memory://polars-row-groups-{uuid.uuid4().hex}/out"
    mcp.write(_lazy_scan(tmp_path, _frame(rows)), url, options={"parquet.block.size": str(BLOCK)})
    _assert_block_sized(_row_groups(url), rows)


@pytest.mark.parametrize("kind", ["DataFrame", "LazyFrame with strings"])
def test_at_the_default_block_size_a_modest_frame_is_one_row_group(tmp_path: Path, kind: str) -> None:
    """About 17 MB of rows: Polars' own row groups (100,000 rows in Polars 2.2) would cut it in four."""
    rows = 400_000
    url = str(tmp_path / "out")
    mcp.write(INPUTS[kind](tmp_path, _frame(rows)), url)
    groups = _row_groups(url)
    assert [[count for count, _ in file] for file in groups.values()] == [[rows]]


def test_the_codec_reaches_the_files(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcp.write(_frame(1_000), url, options={"compression": "zstd", "parquet.page.size": str(16 * 1024)})
    (path,) = _row_groups(url)
    assert path.endswith(".zstd.parquet")
    metadata = pq.ParquetFile(path).metadata
    assert {metadata.row_group(0).column(i).compression for i in range(metadata.num_columns)} == {"ZSTD"}


def test_the_page_size_reaches_the_files(tmp_path: Path) -> None:
    """Pages of 1 KiB instead of 1 MiB: thousands of page headers more, tens of kilobytes more file."""
    frame = _frame(120_000)
    sizes = []
    for page_size in (1 << 20, 1 << 10):
        url = str(tmp_path / f"pages-{page_size}")
        mcp.write(frame, url, options={"compression": "none", "parquet.page.size": str(page_size)})
        (path,) = _row_groups(url)
        sizes.append(Path(path).stat().st_size)
    assert sizes[1] > sizes[0] + 40_000, sizes


def test_with_partition_columns_each_open_file_buffers_a_share_of_four_blocks(tmp_path: Path) -> None:
    """A block of 4 MiB over ``maxOpenFiles`` 64: row groups of 1 MiB (the least share), not of 4 MiB, in each of
    the two partitions' files of about 2 MiB."""
    rows = 120_000
    url = str(tmp_path / "out")
    options = {"parquet.block.size": str(4 << 20), "maxOpenFiles": "64"}
    mcp.write(_frame(rows), url, partition_by=["k"], options=options)
    groups = _row_groups(url)
    assert len(groups) == 2
    assert sum(count for file in groups.values() for count, _ in file) == rows
    for file in groups.values():
        assert len(file) >= 2, groups
        for _, size in file[:-1]:
            assert 0.5 * (1 << 20) <= size <= 1.5 * (1 << 20), file
