"""SetupJobStage: creates the job attempt's manifests/ and tasks/ directories, once."""

from __future__ import annotations

import pytest

from manifest_committer.errors import JobStateError, OutputConflictError
from manifest_committer.stages.manifest.setup_job import SetupJobArguments, SetupJobStage
from manifest_committer.statistic_names import JOB_STAGE_SETUP, OP_MKDIRS
from tests.fixtures.stage_context import exists, make_context
from tests.fixtures.stores import store_changes_the_outcome


def test_creates_manifest_and_task_directories(destination: str) -> None:
    context = make_context(destination)
    result = SetupJobStage(context).apply(SetupJobArguments(delete_success_marker=False))
    paths = context.paths
    assert result.job_attempt_dir == paths.job_attempt_dir
    assert paths.job_attempt_dir.endswith("/_temporary/job_20241122_0001/00")
    for directory in (paths.manifest_dir, paths.task_attempts_dir):
        status = context.store.info(directory)
        assert status is not None and status.is_dir
    assert context.store.list_dir(paths.manifest_dir) == []
    counters = context.stats.snapshot().counters
    assert counters[JOB_STAGE_SETUP] == 1
    assert counters[OP_MKDIRS] == 2
    assert context.active_stage == JOB_STAGE_SETUP


@pytest.mark.parametrize("delete", [True, False])
def test_deletes_an_old_success_marker_only_when_asked(destination: str, delete: bool) -> None:
    context = make_context(destination)
    context.store.write_bytes(context.paths.success_path, b"{}")
    SetupJobStage(context).apply(SetupJobArguments(delete_success_marker=delete))
    assert exists(context, context.paths.success_path) is not delete


def test_an_existing_job_attempt_is_refused(destination: str) -> None:
    SetupJobStage(make_context(destination)).apply(SetupJobArguments(False))
    context = make_context(destination)
    with pytest.raises(JobStateError) as raised:
        SetupJobStage(context).apply(SetupJobArguments(False))
    message = str(raised.value)
    assert context.store.to_url(context.paths.job_attempt_dir) in message
    assert "already set up" in message
    assert context.stats.snapshot().counters[JOB_STAGE_SETUP + ".failures"] == 1


def test_a_new_attempt_number_gets_a_new_directory(destination: str) -> None:
    SetupJobStage(make_context(destination)).apply(SetupJobArguments(False))
    second = make_context(destination, job_attempt=1)
    assert SetupJobStage(second).apply(SetupJobArguments(False)).job_attempt_dir.endswith("/01")
    assert exists(second, second.paths.manifest_dir)


@store_changes_the_outcome  # object stores imply directories from file names
def test_a_destination_that_is_a_file_is_refused(destination: str) -> None:
    context = make_context(destination)
    context.store.write_bytes(context.paths.dest, b"not a directory")
    with pytest.raises(OutputConflictError, match="destination is a file"):
        SetupJobStage(context).apply(SetupJobArguments(False))
    assert context.store.read_bytes(context.paths.dest) == b"not a directory"


def test_applied_twice_raises(destination: str) -> None:
    stage = SetupJobStage(make_context(destination))
    stage.apply(SetupJobArguments(False))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(SetupJobArguments(False))
