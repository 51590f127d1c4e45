"""manifest_committer.ray.write and Datasink on a real local Ray cluster (2 CPUs, one per module): retries under
``max_retries``, a task that fails on every attempt, a worker killed in the middle of a write, overwrite during a
failure; read back with Ray and pyarrow.

Failures are injected by a ``Datasink`` subclass whose write task fails after its first block was written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
import ray

import manifest_committer.ray as mcr
from manifest_committer.errors import ConfigError
from manifest_committer.writing import TaskResult
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

REPO = Path(__file__).resolve().parent.parent
ROWS = sorted([(f"d{i % 3}", i) for i in range(40)], key=repr)
COLUMNS = ["dt", "x"]
TASKS = 4


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """One local Ray cluster for the module; its workers import this checkout's package."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def dataset() -> Any:
    items = [{"dt": f"d{i % 3}", "x": i} for i in range(40)]
    return ray.data.from_items(items).repartition(TASKS)


class FlakySink(mcr.Datasink):
    """A Datasink whose write task ``task`` fails after its first block: ``once`` (a marker file remembers),
    ``always``, or ``kill`` (the worker process exits, once)."""

    def __init__(self, url: str, marker_dir: Path, task: int, how: str, **arguments: Any) -> None:
        super().__init__(url, **arguments)
        self.marker = str(marker_dir / f"failed-{task}")
        self.task = task
        self.how = how

    def _blocks(self, blocks: Iterable[Any]) -> Iterator[Any]:
        for count, block in enumerate(blocks):
            if count or (Path(self.marker).exists() and self.how != "always"):
                yield block
                continue
            yield block
            Path(self.marker).touch()
            if self.how == "kill":
                os._exit(1)
            raise OSError(f"injected failure in write task {self.task}")

    def write(self, blocks: Iterable[Any], ctx: Any) -> TaskResult:
        if int(ctx.task_idx) == self.task:
            blocks = self._blocks(blocks)
        return super().write(blocks, ctx)


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
    with pytest.raises(Exception, match="injected failure in write task 2"):
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
