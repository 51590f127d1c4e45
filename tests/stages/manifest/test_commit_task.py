"""CommitTaskStage: scans the attempt and publishes its manifest; no data file moves."""

from __future__ import annotations

import pytest

from manifest_committer.errors import JobStateError
from manifest_committer.manifest import MANIFEST_SUFFIX, TaskManifest
from manifest_committer.stages.manifest.commit_task import CommitTaskArguments, CommitTaskStage
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.statistic_names import (
    COMMITTER_TASKS_COMPLETED,
    TASK_STAGE_COMMIT,
    TASK_STAGE_SAVE_MANIFEST,
    TASK_STAGE_SAVE_TASK_MANIFEST,
    TASK_STAGE_SCAN_DIRECTORY,
)
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.stage_context import commit_task, fresh, make_context, set_up_job, task_ids, write_task_output


def manifest_names(destination: str) -> list[str]:
    context = make_context(destination)
    return sorted(s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(context.paths.manifest_dir))


def test_publishes_the_manifest_under_the_task_id(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    write_task_output(context, attempt_id, {"a/one.csv": b"1", "two.csv": b"22"})
    result = CommitTaskStage(context).apply(CommitTaskArguments(task_id, attempt_id))

    assert result.manifest_path == context.paths.manifest_path(task_id)
    assert manifest_names(destination) == [task_id + MANIFEST_SUFFIX], "no temp file is left"
    saved = TaskManifest.from_json(context.store.read_bytes(result.manifest_path))
    assert saved == result.manifest
    assert (saved.job_id, saved.job_attempt_number, saved.task_id, saved.task_attempt_id) == (
        context.paths.job_id,
        0,
        task_id,
        attempt_id,
    )
    assert saved.task_attempt_dir == context.store.to_url(context.paths.task_attempt_dir(attempt_id))
    assert sorted(entry.size for entry in saved.files) == [1, 2]
    assert len(saved.directories) == 1
    # The data stays where the task wrote it.
    assert context.store.read_bytes(f"{context.paths.task_attempt_dir(attempt_id)}/two.csv") == b"22"
    assert context.store.info(f"{context.paths.dest}/two.csv") is None


def test_statistics_in_the_manifest_and_the_context(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    manifest = commit_task(context, 0, {"f": b"x"})
    assert manifest.iostatistics.counters[TASK_STAGE_SCAN_DIRECTORY] == 1
    assert manifest.iostatistics.counters[COMMITTER_TASKS_COMPLETED] == 1

    task_id, attempt_id = task_ids(1)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    committing = fresh(context)
    CommitTaskStage(committing).apply(CommitTaskArguments(task_id, attempt_id))
    counters = committing.stats.snapshot().counters
    for name in (TASK_STAGE_COMMIT, TASK_STAGE_SAVE_MANIFEST, TASK_STAGE_SAVE_TASK_MANIFEST):
        assert counters[name] == 1, name


def test_a_later_attempt_of_the_task_replaces_the_manifest(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 4, {"first.csv": b"1"}, attempt=0)
    second = commit_task(context, 4, {"second.csv": b"2"}, attempt=1)
    task_id, attempt_id = task_ids(4, 1)
    assert manifest_names(destination) == [task_id + MANIFEST_SUFFIX]
    saved = TaskManifest.from_json(context.store.read_bytes(context.paths.manifest_path(task_id)))
    assert saved.task_attempt_id == attempt_id == second.task_attempt_id
    assert [entry.dest.rsplit("/", 1)[-1] for entry in saved.files] == ["second.csv"]


def test_a_task_commit_can_be_repeated(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    first = commit_task(context, 0, {"f": b"x"})
    write_task_output(context, attempt_id, {"g": b"yy"})
    again = CommitTaskStage(fresh(context)).apply(CommitTaskArguments(task_id, attempt_id))
    assert len(first.files) == 1
    assert sorted(entry.size for entry in again.manifest.files) == [1, 2]


def test_a_failed_save_is_retried_and_counted_in_the_saved_manifest(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    write_task_output(context, attempt_id, {"f": b"x"})
    faulty = FaultInjectingStore(
        context.store, [Fault("write_bytes", MANIFEST_SUFFIX, error=lambda: OSError("injected write failure"))]
    )
    committing = fresh(context, store=faulty)
    result = CommitTaskStage(committing).apply(CommitTaskArguments(task_id, attempt_id))
    assert faulty.injected["write_bytes"] == 1
    assert result.manifest.iostatistics.counters[TASK_STAGE_SAVE_TASK_MANIFEST + ".failures"] == 1
    saved = TaskManifest.from_json(context.store.read_bytes(result.manifest_path))
    assert saved.iostatistics.counters[TASK_STAGE_SAVE_TASK_MANIFEST + ".failures"] == 1


def test_a_save_that_always_fails_publishes_nothing(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    faulty = FaultInjectingStore(
        context.store, [Fault("rename_file", MANIFEST_SUFFIX, error=lambda: OSError("no rename"), times=None)]
    )
    committing = fresh(context, store=faulty)
    with pytest.raises(OSError, match="no rename"):
        CommitTaskStage(committing).apply(CommitTaskArguments(task_id, attempt_id))
    assert faulty.injected["rename_file"] == context.config.manifest_save_attempts
    assert committing.stats.snapshot().counters[TASK_STAGE_COMMIT + ".failures"] == 1
    assert context.store.info(context.paths.manifest_path(task_id)) is None


def test_a_missing_attempt_directory_publishes_nothing(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    with pytest.raises(JobStateError, match=attempt_id):
        CommitTaskStage(context).apply(CommitTaskArguments(task_id, attempt_id))
    assert manifest_names(destination) == []


def test_applied_twice_raises(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    stage = CommitTaskStage(context)
    stage.apply(CommitTaskArguments(task_id, attempt_id))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(CommitTaskArguments(task_id, attempt_id))
