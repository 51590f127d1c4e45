"""pyarrow, Polars, Dask and Ray write to S3 (moto) through the ``upload`` protocol (``auto`` there): rows read
back exact, ``_SUCCESS`` in place, no incomplete multipart upload and no ``_temporary`` left.

Dask (a ``LocalCluster`` of worker processes) and Ray (a local cluster) run their tasks in other processes, which
reach moto only through the job's storage options; each has one failed task: Dask's fails once and is retried,
Ray's worker process dies once pyarrow has started its uploads, and Ray runs the task again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import manifest_committer.arrow as mca
import manifest_committer.polars as mcp
from manifest_committer.store.s3 import open_s3_store
from manifest_committer.success_data import SuccessData
from tests.fixtures.emulators import Emulator
from tests.fixtures.writing import attempts_per_task, has_success

if TYPE_CHECKING:
    from distributed import Client

pytestmark = pytest.mark.s3

TABLE = pa.table({"id": list(range(40)), "country": ["DE", "a b/c=d%", None, "FR"] * 10})
TASKS = 4
EXPECTED = sorted((row["id"], row["country"]) for row in TABLE.to_pylist())


def _rows(moto: Emulator, url: str) -> list[tuple[Any, ...]]:
    dataset = ds.dataset(
        url.removeprefix("s3://"), filesystem=moto.filesystem(), format="parquet",
        partitioning=ds.HivePartitioning.discover(null_fallback="__HIVE_DEFAULT_PARTITION__"),
        ignore_prefixes=["_", "."],
    )  # fmt: skip
    table = dataset.to_table(columns=["id", "country"])
    return sorted(zip(table.column("id").to_pylist(), table.column("country").to_pylist(), strict=True))


def _check_clean(moto: Emulator, bucket: str, url: str) -> None:
    """``_SUCCESS`` is there, and neither an incomplete upload nor a ``_temporary`` object is left."""
    assert has_success(url)
    opened = open_s3_store(url, moto.storage_options)
    store, root = opened.store, opened.path
    assert store.list_uploads(f"{bucket}/") == []
    assert [path for path in moto.filesystem().find(root) if "/_temporary/" in path] == []


def _write_then_overwrite(moto: Emulator, bucket: str, url: str, write: Callable[[pa.Table, str], Any]) -> None:
    summary = write(TABLE, "errorifexists")
    assert isinstance(summary, SuccessData) and summary.committer == "upload"
    assert _rows(moto, url) == EXPECTED
    _check_clean(moto, bucket, url)
    summary = write(TABLE.slice(0, 8), "overwrite")
    assert isinstance(summary, SuccessData) and summary.committer == "upload"
    assert _rows(moto, url) == EXPECTED[:8]
    _check_clean(moto, bucket, url)


@pytest.mark.parametrize("framework", ["arrow", "polars"])
def test_write_then_overwrite_on_s3_leaves_exact_rows_and_no_upload(
    moto_s3: Emulator, s3_bucket: str, framework: str
) -> None:
    url = f"s3://{s3_bucket}/{framework}"

    def write(table: pa.Table, mode: str) -> SuccessData | None:
        options = moto_s3.storage_options
        if framework == "arrow":
            return mca.write(table, url, partition_by=["country"], mode=mode, storage_options=options)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return mcp.write(frame, url, partition_by=["country"], mode=mode, storage_options=options)

    _write_then_overwrite(moto_s3, s3_bucket, url, write)


@pytest.mark.slow
def test_dask_write_then_overwrite_on_s3(moto_s3: Emulator, s3_bucket: str, dask_client: Client) -> None:
    """Dask's worker processes write to S3 through the upload protocol. (A task failure injected here made one CI
    run's worker stop answering for ten minutes, its event loop waiting in Dask's profiler, once in four runs;
    retried and failing Dask tasks are tested in ``tests/test_dask.py``.)"""
    import dask.dataframe as dd

    import manifest_committer.dask as mcd

    url = f"s3://{s3_bucket}/dask"

    def write(table: pa.Table, mode: str) -> SuccessData | None:
        frame = dd.from_pandas(table.to_pandas(), npartitions=TASKS)
        return mcd.write(frame, url, partition_by=["country"], mode=mode, storage_options=moto_s3.storage_options)

    _write_then_overwrite(moto_s3, s3_bucket, url, write)
    assert set(attempts_per_task(url).values()) == {1}


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_ray_with_a_killed_worker_then_overwrite_on_s3(moto_s3: Emulator, s3_bucket: str, tmp_path: Path) -> None:
    import ray

    from tests.fixtures.ray_sinks import FlakySink

    url = f"s3://{s3_bucket}/ray"

    def write(table: pa.Table, mode: str) -> SuccessData | None:
        sink = FlakySink(
            url, tmp_path, 0, "kill", partition_by=["country"], mode=mode, storage_options=moto_s3.storage_options
        )
        ray.data.from_arrow(table).repartition(TASKS).write_datasink(sink, ray_remote_args={"max_retries": 2})
        return sink.success

    _write_then_overwrite(moto_s3, s3_bucket, url, write)
    assert (tmp_path / "failed-0").exists()
