"""TaskOutput: where a task attempt's files go (flat, or in place), and how they are declared to the task commit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from manifest_committer.writing import TaskOutput, WriteJob

BATCH = pa.record_batch({"dt": ["a", "b", "a", None], "x": [1, 2, 3, 4]})


def job_for(url: str, **options: str) -> WriteJob:
    return WriteJob.create(url, framework="test", partition_by=["dt"], mode="append", options=options)


def test_files_lie_flat_and_are_declared_with_their_partition(tmp_path: Path) -> None:
    job = job_for(str(tmp_path / "out"))
    with job.committer() as committer:
        committer.setup_job()
        task = committer.setup_task("task_00000_1", "attempt_00000_1")
        output = TaskOutput(task, job, 0, 1, in_place=False)
        output.write(BATCH)
        output.close()
        assert not output.in_place
        assert all("/" not in local for local in output.outputs)
        assert sorted(output.outputs.values()) == sorted(output.files)
        assert {path.split("/")[0] for path in output.files} == {"dt=a", "dt=b", "dt=__HIVE_DEFAULT_PARTITION__"}
        assert output.partitions == {"dt=a", "dt=b", "dt=__HIVE_DEFAULT_PARTITION__"}
        assert output.rows == 4
        fs = task.fs
        assert sorted(p.rsplit("/", 1)[-1] for p in fs.find(task.work_path)) == sorted(output.outputs)


def test_in_place_files_open_at_their_destination_relative_path(tmp_path: Path) -> None:
    """Protocols that write in place (transactional, upload) need each file at work_path/<relative path>."""
    job = job_for(str(tmp_path / "out"))
    with job.committer() as committer:
        committer.setup_job()
        task = committer.setup_task("task_00000_1", "attempt_00000_1")
        output = TaskOutput(task, job, 0, 1, in_place=True)
        output.write(BATCH)
        output.close()
        assert output.outputs == {relative: relative for relative in output.files}
        written = sorted(p[len(task.work_path) + 1 :] for p in task.fs.find(task.work_path))
        assert written == sorted(output.files)
        committer.commit_task(task, output.outputs)  # works under every protocol


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2", "transactional"])
def test_the_job_layer_opens_files_in_place_where_the_protocol_writes_in_place(tmp_path: Path, protocol: str) -> None:
    """The caller passes the committer's own flag: a transactional task's files carry the tid only if opened at
    their destination-relative paths (a flat name would be refused at task commit as a rename)."""
    job = replace(job_for(str(tmp_path / "out")), protocol=protocol)
    with job.committer() as committer:
        committer.setup_job()
        task = committer.setup_task("task_00000_1", "attempt_00000_1")
        output = TaskOutput(task, job, 0, 1, in_place=committer.task_writes_in_place)
        output.write(BATCH)
        output.close()
        committer.commit_task(task, output.outputs)
        committer.commit_job()
    assert output.in_place is (protocol == "transactional")


def test_max_records_per_file_rolls_files(tmp_path: Path) -> None:
    job = job_for(str(tmp_path / "out"), maxRecordsPerFile="1")
    with job.committer() as committer:
        committer.setup_job()
        task = committer.setup_task("task_00000_1", "attempt_00000_1")
        output = TaskOutput(task, job, 0, 1, in_place=False)
        output.write(BATCH)
        output.close()
        assert len(output.files) == 4
