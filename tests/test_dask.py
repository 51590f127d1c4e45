"""manifest_committer.dask.write on a real ``LocalCluster`` of worker processes: retries, a task that always
fails, a worker killed in the middle of a write, overwrite during a failure; read back with Dask and pyarrow.

Failures are injected inside the workers' task writer (``client.run`` patches it in every worker process), so a
task fails after pyarrow has written files of its own, as a real failure would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client

import manifest_committer.dask as mcd
from tests.fixtures.emulators import Emulator
from tests.fixtures.frameworks import patch_task_writer, unpatch_task_writer
from tests.fixtures.writing import (
    BATCHED_MARKERS,
    NASTY_COLUMNS,
    NASTY_DIRECTORIES,
    NASTY_ROWS,
    PROTOCOLS,
    attempts_per_task,
    check_markers_batched_by_the_driver,
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


@pytest.fixture
def client(dask_client: Client) -> Iterator[Client]:
    """The module's cluster, with every worker's task writer unpatched after each test."""
    yield dask_client
    dask_client.run(unpatch_task_writer)


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
    client.run(patch_task_writer, str(tmp_path), 1, "once")
    summary = mcd.write(frame(), url, partition_by=["dt"], protocol=protocol, compute_kwargs={"retries": 2})
    assert (tmp_path / "failed-1").exists()
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(4)}


def test_a_task_that_always_fails_leaves_nothing(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    client.run(patch_task_writer, str(tmp_path), 2, "always")
    with pytest.raises(OSError, match="injected failure in task 2"):
        mcd.write(frame(), url, partition_by=["dt"], compute_kwargs={"retries": 1})
    assert data_files(url) == []
    assert not has_success(url)


def test_a_worker_killed_mid_write_leaves_one_attempts_rows(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    client.run(patch_task_writer, str(tmp_path), 0, "kill")
    summary = mcd.write(frame(), url, partition_by=["dt"])
    assert (tmp_path / "failed-0").exists()
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(4)}


def test_overwrite_during_a_failure_keeps_the_old_rows(client: Client, tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcd.write(frame(), url, partition_by=["dt"])
    before = data_files(url)
    client.run(patch_task_writer, str(tmp_path), 3, "always")
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


def test_batched_markers_go_through_the_drivers_marker_server(client: Client, tmp_path: Path) -> None:
    """Asked for, batched markers go through a marker server in the driver, on the driver's address."""
    url = str(tmp_path / "out")
    summary = mcd.write(frame(), url, partition_by=["dt"], protocol="transactional", options=BATCHED_MARKERS)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    check_markers_batched_by_the_driver(tmp_path / "out", mcd.driver_address())
