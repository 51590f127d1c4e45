"""manifest_committer.ray.write and Datasink on a real local Ray cluster (2 CPUs, one per module): retries under
``max_retries``, a task that fails on every attempt, a worker killed in the middle of a write, overwrite during a
failure; read back with Ray and pyarrow.

Failures are injected by a ``Datasink`` subclass (``tests.fixtures.ray_sinks.FlakySink``) whose write task fails
once pyarrow has written its files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

import manifest_committer.ray as mcr
from manifest_committer.errors import ConfigError
from tests.fixtures.emulators import Emulator
from tests.fixtures.ray_sinks import BundlingSink, FlakySink
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

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]

ROWS = sorted([(f"d{i % 3}", i) for i in range(40)], key=repr)
COLUMNS = ["dt", "x"]
TASKS = 4


def dataset() -> Any:
    items = [{"dt": f"d{i % 3}", "x": i} for i in range(40)]
    return ray.data.from_items(items).repartition(TASKS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_write_reads_back_with_ray_and_pyarrow(tmp_path: Path, protocol: str) -> None:
    url = str(tmp_path / "out")
    summary = mcr.write(dataset(), url, partition_by=["dt"], protocol=protocol)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    back = ray.data.read_parquet(
        url, partitioning=ray.data.datasource.Partitioning(ray.data.datasource.PartitionStyle.HIVE)
    ).take_all()
    assert sorted(((row["dt"], row["x"]) for row in back), key=repr) == ROWS
    assert mcr.write(dataset(), url, mode="ignore") is None


@pytest.mark.parametrize("protocol", ["manifest", "v2"])
def test_a_retried_task_leaves_one_attempts_rows(tmp_path: Path, protocol: str) -> None:
    url = str(tmp_path / "out")
    sink = FlakySink(url, tmp_path, 1, "once", partition_by=["dt"], protocol=protocol)
    dataset().write_datasink(sink, ray_remote_args={"max_retries": 2, "retry_exceptions": True})
    assert (tmp_path / "failed-1").exists()
    assert sink.success is not None and sink.success.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(TASKS)}


def test_a_task_that_always_fails_leaves_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    sink = FlakySink(url, tmp_path, 2, "always", partition_by=["dt"])
    with pytest.raises(Exception, match="injected failure in task 2"):
        dataset().write_datasink(sink, ray_remote_args={"max_retries": 1, "retry_exceptions": True})
    assert data_files(url) == []
    assert not has_success(url)
    assert sink.success is None


def test_a_worker_killed_mid_write_leaves_one_attempts_rows(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    sink = FlakySink(url, tmp_path, 0, "kill", partition_by=["dt"])
    dataset().write_datasink(sink, ray_remote_args={"max_retries": 2})
    assert (tmp_path / "failed-0").exists()
    assert sink.success is not None and sink.success.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(TASKS)}


def test_overwrite_during_a_failure_keeps_the_old_rows(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcr.write(dataset(), url, partition_by=["dt"])
    before = data_files(url)
    sink = FlakySink(url, tmp_path, 3, "always", partition_by=["dt"], mode="overwrite")
    with pytest.raises(Exception, match="injected failure"):
        dataset().write_datasink(sink, ray_remote_args={"max_retries": 0})
    assert data_files(url) == before
    assert read_rows(url, COLUMNS) == ROWS


def test_the_datasink_refuses_ignore(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"save mode ignore needs manifest_committer\.ray\.write"):
        mcr.Datasink(str(tmp_path / "out"), mode="ignore")


def test_nasty_partition_values_make_the_spark_writers_directories(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    rows = [dict(zip(NASTY_COLUMNS, values, strict=True)) for values in zip(*NASTY_COLUMNS.values(), strict=True)]
    mcr.write(ray.data.from_items(rows), url, partition_by=["country", "day"])
    assert partition_directories(url) == NASTY_DIRECTORIES
    assert read_rows(url, ["country", "day", "x"]) == NASTY_ROWS


@pytest.mark.azure
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_on_azurite(azurite: Emulator, azure_container: str, protocol: str) -> None:
    """Ray's workers reach the emulator through the job's storage options (they carry no fsspec defaults)."""
    url = f"abfs://{azure_container}/out"
    summary = mcr.write(dataset(), url, partition_by=["dt"], protocol=protocol, storage_options=azurite.storage_options)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    assert attempts_per_task(url) == {index: 1 for index in range(TASKS)}


def _blocks(*columns: dict[str, Any]) -> Any:
    """A dataset of one block per argument (a ``pyarrow.Table`` of those columns)."""
    return ray.data.from_arrow([pa.table(block) for block in columns])


@pytest.mark.parametrize("protocol", ["manifest", "transactional"])
def test_blocks_of_different_schemas_in_one_task_are_unified(tmp_path: Path, protocol: str) -> None:
    """One write task gets blocks with a column all null, int64 in one block and double in another, a column
    missing, columns in another order: pyarrow's permissive promotion unifies them (Ray's own Parquet sink fails
    on all but the null column), and every file of the task has the one unified schema."""
    url = str(tmp_path / "out")
    blocks = _blocks(
        {"dt": ["a", "b"], "x": pa.array([1, 2], pa.int64()), "y": pa.nulls(2)},
        {"x": pa.array([2.5], pa.float64()), "dt": ["a"], "y": ["s"]},
        {"dt": ["c"], "x": pa.array([7], pa.int32())},
        {"dt": pa.array([], pa.string()), "z": pa.array([], pa.bool_())},  # empty: no column of its own
    )
    blocks.write_datasink(BundlingSink(url, partition_by=["dt"], protocol=protocol))
    expected = [("a", 1.0, None), ("a", 2.5, "s"), ("b", 2.0, None), ("c", 7.0, None)]
    assert read_rows(url, ["dt", "x", "y"]) == sorted(expected, key=repr)
    assert attempts_per_task(url) == {0: 1}
    files = data_files(url)
    assert len(files) == 3 and not any("-s1-" in name for name in files)
    for name in files:
        assert pq.read_schema(tmp_path / "out" / name).names == ["x", "y"]
        assert pq.read_schema(tmp_path / "out" / name).field("x").type == pa.float64()
    back = ray.data.read_parquet(
        url, partitioning=ray.data.datasource.Partitioning(ray.data.datasource.PartitionStyle.HIVE)
    ).take_all()
    assert sorted(((row["dt"], row["x"], row["y"]) for row in back), key=repr) == sorted(expected, key=repr)


def test_blocks_whose_schemas_cannot_unify_are_written_apart(tmp_path: Path) -> None:
    """A column of integers in one block and of strings in another cannot unify: each kind goes to files of its
    own, as if Ray had put the blocks into different write tasks; no row is lost or cast."""
    url = str(tmp_path / "out")
    blocks = _blocks(
        {"dt": ["a"], "x": pa.array([1], pa.int64())},
        {"dt": ["a", "b"], "x": ["two", "three"]},
        {"dt": ["b"], "x": pa.array([None], pa.null())},
    )
    sink = BundlingSink(url)
    blocks.write_datasink(sink)
    assert sink.success is not None and sink.success.success
    assert attempts_per_task(url) == {0: 1}
    files = data_files(url)
    assert len(files) == 2 and sum("-s1-" in name for name in files) == 1
    rows = {(row["dt"], row["x"]) for name in files for row in pq.read_table(tmp_path / "out" / name).to_pylist()}
    assert rows == {("a", 1), ("b", None), ("a", "two"), ("b", "three")}
    back = [row for name in files for row in ray.data.read_parquet(str(tmp_path / "out" / name)).take_all()]
    assert sorted(((row["dt"], row["x"]) for row in back), key=repr) == sorted(rows, key=repr)  # Ray reads each


def test_batched_markers_go_through_the_drivers_marker_server(tmp_path: Path) -> None:
    """Asked for, batched markers go through a marker server in the driver, on the driver's address."""
    url = str(tmp_path / "out")
    summary = mcr.write(dataset(), url, partition_by=["dt"], protocol="transactional", options=BATCHED_MARKERS)
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS) == ROWS
    check_markers_batched_by_the_driver(tmp_path / "out", mcr.driver_address())
