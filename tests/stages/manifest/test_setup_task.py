"""SetupTaskStage: creates a task attempt's working directory inside a job that was set up."""

from __future__ import annotations

import pytest

from manifest_committer.errors import JobStateError
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.statistic_names import OP_MKDIRS, TASK_STAGE_SETUP
from tests.fixtures.stage_context import make_context, set_up_job, task_ids


def test_creates_an_empty_working_directory(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    result = SetupTaskStage(context).apply(SetupTaskArguments(task_id, attempt_id))
    assert result.work_path == context.paths.task_attempt_dir(attempt_id)
    assert result.work_path.endswith(f"/_temporary/job_20241122_0001/00/tasks/{attempt_id}")
    status = context.store.info(result.work_path)
    assert status is not None and status.is_dir
    assert context.store.list_dir(result.work_path) == []
    counters = context.stats.snapshot().counters
    assert counters[TASK_STAGE_SETUP] == 1
    assert counters[OP_MKDIRS] == 1


def test_attempts_of_one_task_get_their_own_directories(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, first = task_ids(3, 0)
    _, second = task_ids(3, 1)
    one = SetupTaskStage(make_context(destination)).apply(SetupTaskArguments(task_id, first))
    two = SetupTaskStage(make_context(destination)).apply(SetupTaskArguments(task_id, second))
    assert one.work_path != two.work_path
    assert {s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(context.paths.task_attempts_dir)} == {
        first,
        second,
    }


def test_a_job_that_was_not_set_up_is_refused(destination: str) -> None:
    context = make_context(destination)
    task_id, attempt_id = task_ids(0)
    with pytest.raises(JobStateError) as raised:
        SetupTaskStage(context).apply(SetupTaskArguments(task_id, attempt_id))
    assert attempt_id in str(raised.value)
    assert "not set up" in str(raised.value)
    assert context.store.info(context.paths.task_attempt_dir(attempt_id)) is None


def test_an_attempt_set_up_twice_is_refused(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(make_context(destination)).apply(SetupTaskArguments(task_id, attempt_id))
    with pytest.raises(JobStateError, match=attempt_id):
        SetupTaskStage(make_context(destination)).apply(SetupTaskArguments(task_id, attempt_id))


def test_applied_twice_raises(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    stage = SetupTaskStage(context)
    stage.apply(SetupTaskArguments(*task_ids(0)))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(SetupTaskArguments(*task_ids(1)))
