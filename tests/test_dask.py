"""manifest_committer.dask.write on a real ``LocalCluster`` of worker processes: retries, a task that always
fails, a worker killed in the middle of a write, overwrite during a failure; read back with Dask and pyarrow.

Failures are injected inside the workers' task writer (``client.run`` patches it in every worker process), so a
task fails after pyarrow has written files of its own, as a real failure would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster

import manifest_committer.dask as mcd
from manifest_committer.writing import job as job_module
from tests.fixtures.emulators import Emulator
from tests.fixtures.writing import (
    NASTY_COLUMNS,
    NASTY_DIRECTORIES,
    NASTY_ROWS,
    PROTOCOLS,
    attempts_per_task,
    data_files,
    has_success,
    partition_directories,
    read_rows,
)

pytestmark = pytest.mark.slow

ROWS = sorted([(f"d{i % 3}", i) for i in range(40)], key=repr)
COLUMNS = ["dt", "x"]


def frame() -> dd.DataFrame:
    pdf = pd.DataFrame({"dt": [f"d{i % 3}" for i in range(40)], "x": list(range(40))})
    return dd.from_pandas(pdf, npartitions=4)


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as dask_client,
    ):
        yield dask_client
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def unpatched(client: Client) -> Iterator[None]:
    yield
    client.run(_unpatch)


def _original_write() -> Any:
    """The worker's own ``write_dataset_task``, kept aside at the first patch (a pickled reference would find
    the patch)."""
    if not hasattr(job_module, "_unpatched_write_dataset_task"):
        job_module._unpatched_write_dataset_task = getattr(job_module, "write_dataset_task")  # type: ignore[attr-defined]  # noqa: B009
    return job_module._unpatched_write_dataset_task  # type: ignore[attr-defined]


def _unpatch() -> None:
    setattr(job_module, "write_dataset_task", _original_write())  # noqa: B010


def _patch(marker_dir: str, partition: int, how: str) -> None:
    """In a worker: a task of ``partition`` fails (once, or always), or kills the worker, once pyarrow has written
    its files."""
    original = _original_write()

    def write_dataset_task(settings: Any, schema: Any, batches: Any, **where: Any) -> Any:
        written = original(settings, schema, batches, **where)
        if where["file_prefix"].startswith(f"part-{partition:05d}-"):
            marker = Path(marker_dir) / f"failed-{partition}"
            if how == "always" or not marker.exists():
                marker.touch()
                if how == "kill":
                    os._exit(1)
                raise OSError(f"injected failure in partition {partition}, after writing {sorted(written.outputs)}")
        return written

    setattr(job_module, "write_dataset_task", write_dataset_task)  # noqa: B010


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_write_reads_back_with_dask_and_pyarrow(client: Client, tmp_path: Path, protocol: str) -> None:
    url = str(tmp_path / "out")
    summary = mcd.write(frame(), url, partition_by=["dt"], protocol=protocol)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    back = dd.read_parquet(url, dataset={"partitioning": "hive"}).compute()
    assert sorted(zip(back["dt"].astype(str), back["x"], strict=True), key=repr) == ROWS


@pytest.mark.parametrize("protocol", ["manifest", "v2"])
def test_a_retried_task_leaves_one_attempts_rows(client: Client, tmp_path: Path, protocol: str) -> None:
    url = str(tmp_path / "out")
    client.run(_patch, str(tmp_path), 1, "once")
    summary = mcd.write(frame(), url, partition_by=["dt"], protocol=protocol, compute_kwargs={"retries": 2})
    assert (tmp_path / "failed-1").exists()
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(4)}


def test_a_task_that_always_fails_leaves_nothing(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    client.run(_patch, str(tmp_path), 2, "always")
    with pytest.raises(OSError, match="injected failure in partition 2"):
        mcd.write(frame(), url, partition_by=["dt"], compute_kwargs={"retries": 1})
    assert data_files(url) == []
    assert not has_success(url)


def test_a_worker_killed_mid_write_leaves_one_attempts_rows(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    client.run(_patch, str(tmp_path), 0, "kill")
    summary = mcd.write(frame(), url, partition_by=["dt"])
    assert (tmp_path / "failed-0").exists()
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(4)}


def test_overwrite_during_a_failure_keeps_the_old_rows(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcd.write(frame(), url, partition_by=["dt"])
    before = data_files(url)
    client.run(_patch, str(tmp_path), 3, "always")
    with pytest.raises(OSError, match="injected failure"):
        mcd.write(frame(), url, partition_by=["dt"], mode="overwrite")
    assert data_files(url) == before
    assert read_rows(url, COLUMNS) == ROWS
    assert mcd.write(frame(), url, mode="ignore") is None


def test_nasty_partition_values_make_the_spark_writers_directories(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    nasty = dd.from_pandas(pd.DataFrame(NASTY_COLUMNS).astype({"day": "Int64"}), npartitions=2)
    mcd.write(nasty, url, partition_by=["country", "day"])
    assert partition_directories(url) == NASTY_DIRECTORIES
    assert read_rows(url, ["country", "day", "x"]) == NASTY_ROWS


@pytest.mark.azure
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_on_azurite(client: Client, azurite: Emulator, azure_container: str, protocol: str) -> None:
    """Worker processes reach the emulator through the job's storage options (they carry no fsspec defaults)."""
    url = f"abfs://{azure_container}/out"
    summary = mcd.write(frame(), url, partition_by=["dt"], protocol=protocol, storage_options=azurite.storage_options)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(4)}
