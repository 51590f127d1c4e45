"""AbortTaskStage: deletes one task attempt's working directory and nothing else."""

from __future__ import annotations

import pytest

from manifest_committer.errors import JobStateError
from manifest_committer.stages.manifest.abort_task import AbortTaskArguments, AbortTaskStage
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.statistic_names import OP_DELETE_DIR, TASK_STAGE_ABORT_TASK
from tests.fixtures.stage_context import (
    commit_task,
    exists,
    fresh,
    make_context,
    set_up_job,
    task_ids,
    write_task_output,
)


def test_deletes_the_attempt_directory(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    write_task_output(context, attempt_id, {"a/b/f.csv": b"x", "g.csv": b"y"})
    result = AbortTaskStage(context).apply(AbortTaskArguments(attempt_id))
    assert result.deleted is True
    assert not exists(context, context.paths.task_attempt_dir(attempt_id))
    assert exists(context, context.paths.task_attempts_dir)
    counters = context.stats.snapshot().counters
    assert counters[TASK_STAGE_ABORT_TASK] == 1
    assert counters[OP_DELETE_DIR] == 1


def test_other_attempts_and_committed_manifests_stay(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 0, {"kept.csv": b"k"})
    _, other_attempt = task_ids(0)
    task_id, attempt_id = task_ids(1)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    AbortTaskStage(fresh(context)).apply(AbortTaskArguments(attempt_id))
    assert exists(context, f"{context.paths.task_attempt_dir(other_attempt)}/kept.csv")
    assert exists(context, context.paths.manifest_path(task_ids(0)[0]))


def test_aborting_a_committed_attempt_keeps_its_manifest(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 2, {"f": b"x"})
    task_id, attempt_id = task_ids(2)
    assert AbortTaskStage(fresh(context)).apply(AbortTaskArguments(attempt_id)).deleted
    assert exists(context, context.paths.manifest_path(task_id))


def test_nothing_to_delete_is_not_an_error(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    assert AbortTaskStage(context).apply(AbortTaskArguments(task_ids(9)[1])).deleted is False


def test_applied_twice_raises(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    stage = AbortTaskStage(context)
    stage.apply(AbortTaskArguments(task_ids(0)[1]))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(AbortTaskArguments(task_ids(0)[1]))
