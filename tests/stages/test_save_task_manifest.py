"""SaveTaskManifestStage: temp file then rename to $taskId-manifest.json, rebuilding the manifest per attempt."""

from __future__ import annotations

import pytest

from manifest_committer.errors import JobStateError
from manifest_committer.manifest import TaskManifest
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.commit_task import CommitTaskArguments, CommitTaskStage
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.stages.save_task_manifest import SaveTaskManifestArguments, SaveTaskManifestStage
from manifest_committer.statistic_names import TASK_STAGE_SAVE_MANIFEST, TASK_STAGE_SAVE_TASK_MANIFEST
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.stage_context import fresh, make_context, set_up_job, task_ids, write_task_output
from tests.fixtures.stores import store_changes_the_outcome


def builder(context: StageContext, builds: list[int]) -> SaveTaskManifestArguments:
    task_id, attempt_id = task_ids(0)

    def build() -> TaskManifest:
        builds.append(len(builds))
        return TaskManifest(
            context.paths.job_id,
            0,
            task_id,
            attempt_id,
            context.store.to_url(context.paths.task_attempt_dir(attempt_id)),
            iostatistics=context.stats.snapshot(),
            extra_data={"build": str(len(builds))},
        )

    return SaveTaskManifestArguments(build)


def prepared(destination: str) -> StageContext:
    context = make_context(destination)
    set_up_job(context)
    return make_context(destination)


def test_saves_under_the_task_id_without_a_temp_file(destination: str) -> None:
    context = prepared(destination)
    builds: list[int] = []
    result = SaveTaskManifestStage(context).apply(builder(context, builds))
    task_id, attempt_id = task_ids(0)
    assert result.manifest_path == context.paths.manifest_path(task_id)
    assert TaskManifest.from_json(context.store.read_bytes(result.manifest_path)) == result.manifest
    assert context.store.info(context.paths.temp_manifest_path(attempt_id)) is None
    counters = context.stats.snapshot().counters
    assert counters[TASK_STAGE_SAVE_MANIFEST] == 1
    assert counters[TASK_STAGE_SAVE_TASK_MANIFEST] == 1


def test_each_attempt_rebuilds_the_manifest(destination: str) -> None:
    context = prepared(destination)
    context.store = FaultInjectingStore(
        context.store, [Fault("rename_file", "-manifest.json", error=lambda: OSError("lost"), times=2)]
    )
    builds: list[int] = []
    result = SaveTaskManifestStage(context).apply(builder(context, builds))
    assert len(builds) == 1 + 3, "one build for the names, then one per attempt"
    assert result.manifest.extra_data == {"build": "4"}
    assert result.manifest.iostatistics.counters[TASK_STAGE_SAVE_TASK_MANIFEST + ".failures"] == 2
    saved = TaskManifest.from_json(context.store.read_bytes(result.manifest_path))
    assert saved.extra_data == {"build": "4"}


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_an_older_manifest_of_the_task_is_replaced(destination: str) -> None:
    context = prepared(destination)
    task_id, _ = task_ids(0)
    context.store.write_bytes(context.paths.manifest_path(task_id), b"{ an older attempt's manifest }")
    result = SaveTaskManifestStage(context).apply(builder(context, []))
    assert TaskManifest.from_json(context.store.read_bytes(result.manifest_path)).task_id == task_id


def test_applied_twice_raises(destination: str) -> None:
    context = prepared(destination)
    stage = SaveTaskManifestStage(context)
    stage.apply(builder(context, []))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(builder(context, []))


@store_changes_the_outcome  # object stores imply directories from file names: a finished job is told by its files
def test_a_late_attempt_cannot_recreate_the_state_of_a_finished_job(destination: str) -> None:
    context = prepared(destination)
    context.store.delete_dir(context.paths.job_dir)  # the job was committed or aborted meanwhile
    with pytest.raises(JobStateError, match="committed or aborted; task attempt attempt_") as error:
        SaveTaskManifestStage(context).apply(builder(context, []))
    assert context.store.to_url(context.paths.manifest_dir) in str(error.value)
    assert context.store.info(context.paths.job_dir) is None


@store_changes_the_outcome  # object stores imply directories from file names: a finished job is told by its files
def test_a_task_commit_racing_the_end_of_its_job_fails_and_leaves_nothing(destination: str) -> None:
    """Issue 8: the job's cleanup ran between the check and the write, and the write recreated ``_temporary/<job>``
    and reported success. Now the state is checked again once the manifest is in place."""
    context = make_context(destination)
    set_up_job(context)
    task_id, attempt_id = task_ids(0)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(task_id, attempt_id))
    write_task_output(context, attempt_id, {"part-0.csv": b"p"})
    paths = context.paths

    class JobEndsDuringTheSave(FaultInjectingStore):
        def write_bytes(self, path: str, data: bytes) -> None:
            if path.endswith(".tmp") and self.inner.info(paths.job_dir) is not None:
                self.inner.delete_dir(paths.job_dir)  # the job's commit and cleanup finished meanwhile
            super().write_bytes(path, data)

    with pytest.raises(JobStateError, match="cannot commit"):
        CommitTaskStage(fresh(context, store=JobEndsDuringTheSave(context.store))).apply(
            CommitTaskArguments(task_id, attempt_id)
        )
    assert context.store.info(paths.manifest_path(task_id)) is None
    assert context.store.info(paths.job_dir) is None, "the job's state is not resurrected"


def test_a_task_commit_after_the_job_commit_began_fails(destination: str) -> None:
    context = prepared(destination)
    context.store.write_bytes(context.paths.commit_started_path, b"{}")
    with pytest.raises(JobStateError, match="has begun its job commit"):
        SaveTaskManifestStage(context).apply(builder(context, []))
    assert context.store.info(context.paths.manifest_path(task_ids(0)[0])) is None
