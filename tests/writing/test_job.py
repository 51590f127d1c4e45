"""WriteJob, run_task and commit_write: what every adapter relies on, on memory and local disk."""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from manifest_committer.errors import ConfigError
from manifest_committer.success_data import SuccessData
from manifest_committer.writing import (
    DestinationExistsError,
    TaskResultError,
    WriteJob,
    abort_write,
    begin,
    commit_write,
    run_task,
)
from manifest_committer.writing.job import TaskWrite, batch_writer, tables_writer
from tests.fixtures.writing import data_files, has_success, read_rows, record_write_dataset

COLUMNS = ["dt", "x"]


def batches(dt: str, *xs: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"dt": [dt] * len(xs), "x": list(xs)})]


def new_job(url: str, mode: str = "append", protocol: str = "manifest", **options: str) -> WriteJob:
    return WriteJob.create(url, framework="test", partition_by=["dt"], mode=mode, protocol=protocol, options=options)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"options": {"noSuchOption": "1"}}, "unknown writer option 'nosuchoption'"),
        ({"options": {"maxOpenFiles": "0"}}, "maxOpenFiles: must be at least 1"),
        ({"options": {"mapreduce.manifest.committer.no.such.key": "1"}}, "no.such.key"),
        ({"partition_by": "dt"}, "the string 'dt'"),
        ({"partition_by": ["dt", "dt"]}, "named twice"),
        ({"format": "orc"}, "format 'orc'"),
        ({"mode": "upsert"}, "save mode 'upsert'"),
        ({"protocol": "magic"}, "unknown commit protocol 'magic'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(Exception, match=message.replace("(", r"\(")) as caught:
        WriteJob.create("memory://bucket/out", framework="test", **arguments)  # type: ignore[arg-type]
    assert isinstance(caught.value, ConfigError | TypeError) or "protocol" in message


def test_partition_columns_must_be_columns_with_one_left(tmp_path: object) -> None:
    job = new_job("memory://bucket/out")
    with pytest.raises(ConfigError, match="partition column 'dt' is not a column"):
        job.check_columns(["x"])
    with pytest.raises(ConfigError, match="one data column must remain"):
        job.check_columns(["dt"])


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
def test_a_duplicated_task_leaves_exactly_the_delivered_attempts_rows(destination: str, protocol: str) -> None:
    """Two attempts of task 0 both finish; the framework delivers the second: only its rows are committed.

    Under v2 a task commit publishes, so the first attempt must not have committed itself (regression: the
    duplicate's rows would have been in the destination twice).
    """
    job = new_job(destination, protocol=protocol)
    assert begin(job)
    loser = run_task(job, 0, batches("a", 1, 2))
    winner = run_task(job, 0, batches("a", 1, 2))
    other = run_task(job, 1, batches("b", 3))
    assert loser.task_attempt_id != winner.task_attempt_id
    if protocol == "v2":
        assert data_files(destination) == []  # nothing published before the driver decides
    summary = commit_write(job, [winner, other])
    assert summary.success
    assert read_rows(destination, COLUMNS) == [("a", 1), ("a", 2), ("b", 3)]
    assert sorted(data_files(destination)) == sorted([*winner.outputs.values(), *other.outputs.values()])


def test_results_of_another_job_or_twice_the_same_task_are_refused(destination: str) -> None:
    job = new_job(destination)
    assert begin(job)
    result = run_task(job, 0, batches("a", 1))
    with pytest.raises(TaskResultError, match="two results of task 0"):
        commit_write(job, [result, run_task(job, 0, batches("a", 1))])
    with pytest.raises(TaskResultError, match="is of job"):
        commit_write(job, [replace(result, job_id="other-job")])
    with pytest.raises(TaskResultError, match="task result 0 is a str"):
        commit_write(job, ["not a result"])
    assert not has_success(destination)


def failing(after: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from after
    raise RuntimeError("injected failure in the middle of a task")


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
def test_a_failed_overwrite_leaves_the_old_output(destination: str, protocol: str) -> None:
    first = new_job(destination, protocol=protocol)
    assert begin(first)
    old_summary = commit_write(first, [run_task(first, 0, batches("a", 1))])
    before = data_files(destination)
    job = new_job(destination, mode="overwrite", protocol=protocol)
    assert begin(job)
    done = run_task(job, 0, batches("b", 2))
    with pytest.raises(RuntimeError, match="injected"):
        run_task(job, 1, failing(batches("c", 3)))
    abort_write(job)
    assert data_files(destination) == before
    assert read_rows(destination, COLUMNS) == [("a", 1)]
    assert done.rows == 1
    # Job setup set the older _SUCCESS aside (Hadoop deletes it); the abort put it back.
    assert SuccessData.load(f"{destination}/_SUCCESS").job_id == old_summary.job_id


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2"])
def test_overwrite_replaces_everything_or_only_the_partitions_written(destination: str, protocol: str) -> None:
    job = new_job(destination, protocol=protocol)
    assert begin(job)
    commit_write(job, [run_task(job, 0, [*batches("a", 1), *batches("b", 2)])])
    dynamic = new_job(destination, mode="overwrite", protocol=protocol, partitionOverwriteMode="dynamic")
    assert begin(dynamic)
    commit_write(dynamic, [run_task(dynamic, 0, batches("b", 20))])
    assert read_rows(destination, COLUMNS) == [("a", 1), ("b", 20)]
    static = new_job(destination, mode="overwrite", protocol=protocol)
    assert begin(static)
    summary = commit_write(static, [run_task(static, 0, batches("c", 30))])
    assert read_rows(destination, COLUMNS) == [("c", 30)]
    assert summary.job_id == static.job_id


def test_errorifexists_and_ignore_look_at_the_destination_first(destination: str) -> None:
    job = new_job(destination, mode="errorifexists")
    assert begin(job)
    commit_write(job, [run_task(job, 0, batches("a", 1))])
    with pytest.raises(DestinationExistsError, match="already holds data"):
        begin(new_job(destination, mode="errorifexists"))
    assert not begin(new_job(destination, mode="ignore"))


def test_importing_the_package_imports_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, manifest_committer, manifest_committer.writing\n"
        "loaded = [m for m in ('ray', 'dask', 'polars', 'pyarrow', 'pyspark', 'pandas') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_transactional_write_uses_direct_markers_its_tasks_keep_alive(
    destination: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver's committer closes after setting the job up, so a marker server there would be gone while the
    tasks write (regression: every task found it refused and fell back, warning per task). Direct markers instead,
    and a running task beats the job's heartbeat."""
    job = new_job(destination, protocol="transactional")
    assert job.config.markers_type == "direct"
    assert begin(job)
    with caplog.at_level("WARNING", logger="manifest_committer"):
        result = run_task(job, 0, batches("a", 1))
    assert not [record for record in caplog.records if "unreachable" in record.getMessage()]
    assert commit_write(job, [result]).success
    assert read_rows(destination, COLUMNS) == [("a", 1)]
    explicit = new_job(
        destination, protocol="transactional", **{"mapreduce.manifest.committer.markers.type": "batched"}
    )
    assert explicit.config.markers_type == "direct"
    assert new_job(destination).config.markers_type == "batched"  # the manifest protocol keeps the default


@pytest.mark.parametrize("format", ["parquet", "json"])
def test_tables_of_different_schemas_are_written_by_one_task(tmp_path: object, format: str) -> None:
    """``tables_writer`` (a Ray write task's blocks): unifiable tables share files, the others get files of
    their own; JSON lines, which has no schema, takes every table through one writer."""
    url = f"{tmp_path}/out"
    job = WriteJob.create(url, framework="test", format=format, mode="append")
    tables = [pa.table({"x": pa.array([1])}), pa.table({"x": pa.array([2.5])}), pa.table({"x": ["three"]})]
    assert begin(job)
    result = run_task(job, 0, write=tables_writer(tables))
    commit_write(job, [result])
    names = data_files(url)
    assert result.rows == 3 and len(names) == (2 if format == "parquet" else 1)
    if format == "json":
        lines = (Path(url) / names[0]).read_text().splitlines()
        assert [json.loads(line) for line in lines] == [{"x": 1.0}, {"x": 2.5}, {"x": "three"}]
    else:
        assert sum("-s1-" in name for name in names) == 1


@pytest.mark.parametrize(
    ("writer", "expected"),
    [
        (lambda: tables_writer([pa.table({"dt": ["a", "b"], "x": [1, 2]})]), 1024),  # a Ray task's blocks
        (lambda: batch_writer(batches("a", 1) + batches("b", 2), held_in_memory=True), 1024),  # a Dask partition
        (lambda: batch_writer(iter(batches("a", 1) + batches("b", 2))), 64),  # a stream
    ],
)
def test_tasks_whose_rows_are_in_memory_keep_more_files_open_on_an_object_store(
    monkeypatch: pytest.MonkeyPatch, writer: Callable[[], TaskWrite], expected: int
) -> None:
    """On an object store an open file buffers what it has not uploaded; rows a task holds in memory anyway
    bound those buffers, a stream does not."""
    calls = record_write_dataset(monkeypatch)
    url = f"memory://open-files-{uuid.uuid4().hex}/out"
    job = new_job(url)
    assert begin(job)
    commit_write(job, [run_task(job, 0, write=writer())])
    assert [call["max_open_files"] for call in calls] == [expected]
    assert read_rows(url, COLUMNS) == [("a", 1), ("b", 2)]


def test_the_driver_keeps_its_marker_server_in_its_own_copy_of_the_job_only(tmp_path: Path) -> None:
    """With batched markers and a driver that outlives its tasks, ``begin`` keeps the committer hosting the marker
    server in the job; a copy of the job that travels by pickle (to a task, a worker) holds none, so a commit there
    builds its own, and the driver's commit takes the kept one and closes it."""
    job = WriteJob.create(
        str(tmp_path / "out"),
        framework="test",
        protocol="transactional",
        options={"mapreduce.manifest.committer.markers.type": "batched"},
        driver_address="127.0.0.1",
    )
    assert job.driver_hosts_markers
    assert begin(job)
    travelled = pickle.loads(pickle.dumps(job))
    assert travelled == job, "the slot takes no part in equality"
    assert travelled.driver.take() is None, "no committer (no server thread, no socket) crosses a pickle"
    kept = job.driver.take()
    assert kept is not None and kept.job_id == job.job_id
    job.driver.keep(kept)
    result = run_task(travelled, 0, batches("a", 1))
    assert commit_write(job, [result]).success
    assert job.driver.take() is None, "the driver's commit took the kept committer"
    assert read_rows(str(tmp_path / "out"), COLUMNS) == [("a", 1)]
