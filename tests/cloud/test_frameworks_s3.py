"""pyarrow and Polars write to S3 (moto) through the ``upload`` protocol (``auto`` there), rows read back exact.

Dask and Ray run the same task code (``writing.run_task``) in their workers; their tests run on the other stores.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import manifest_committer.arrow as mca
import manifest_committer.polars as mcp
from manifest_committer.store.s3 import open_s3_store
from tests.fixtures.emulators import Emulator

pytestmark = pytest.mark.s3

TABLE = pa.table({"id": list(range(40)), "country": ["DE", "a b/c=d%", None, "FR"] * 10})


def _rows(moto: Emulator, url: str) -> list[tuple[Any, ...]]:
    dataset = ds.dataset(
        url.removeprefix("s3://"), filesystem=moto.filesystem(), format="parquet",
        partitioning=ds.HivePartitioning.discover(null_fallback="__HIVE_DEFAULT_PARTITION__"),
        ignore_prefixes=["_", "."],
    )  # fmt: skip
    table = dataset.to_table(columns=["id", "country"])
    return sorted(zip(table.column("id").to_pylist(), table.column("country").to_pylist(), strict=True))


@pytest.mark.parametrize("framework", ["arrow", "polars"])
def test_write_then_overwrite_on_s3_leaves_exact_rows_and_no_upload(
    moto_s3: Emulator, s3_bucket: str, framework: str
) -> None:
    url = f"s3://{s3_bucket}/{framework}"

    def write(table: pa.Table, mode: str) -> None:
        options = moto_s3.storage_options
        if framework == "arrow":
            success = mca.write(table, url, partition_by=["country"], mode=mode, storage_options=options)
        else:
            frame = pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            success = mcp.write(frame, url, partition_by=["country"], mode=mode, storage_options=options)
        assert success is not None and success.committer == "upload"

    write(TABLE, "errorifexists")
    expected = sorted((row["id"], row["country"]) for row in TABLE.to_pylist())
    assert _rows(moto_s3, url) == expected
    write(TABLE.slice(0, 8), "overwrite")
    assert _rows(moto_s3, url) == expected[:8]
    store, root = open_s3_store(url, moto_s3.storage_options)
    assert store.list_uploads(f"{s3_bucket}/") == []
    assert [path for path in moto_s3.filesystem().find(root) if "/_temporary/" in path] == []
