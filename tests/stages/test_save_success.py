"""SaveSuccessStage: writes _SUCCESS through a temp file and a rename, retried."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from manifest_committer.errors import JobStateError
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.save_success import SaveSuccessArguments, SaveSuccessStage
from manifest_committer.statistic_names import (
    COMMIT_FILE_RENAME,
    JOB_STAGE_SAVE_SUCCESS_MARKER,
    TASK_STAGE_SAVE_SUMMARY_FILE,
)
from manifest_committer.store import Fault, FaultInjectingStore
from manifest_committer.success_data import SUCCESS_MARKER, SuccessData
from tests.fixtures.stage_context import JOB_ID, make_context, set_up_job
from tests.fixtures.stores import CLOUD_STORES, CORE_STORES, store_changes_the_outcome
from tests.fixtures.together import MeetInFlight


def prepared(destination: str) -> StageContext:
    context = make_context(destination)
    set_up_job(context)
    return make_context(destination)


def summary() -> SuccessData:
    success = SuccessData.create(JOB_ID, "JobID", "committer_commit_job")
    success.filenames = ["file:///out/a", "file:///out/b"]
    success.iostatistics.counters["committer_files_committed"] = 2
    return success


def test_writes_the_summary_and_leaves_no_temp_file(destination: str) -> None:
    context = prepared(destination)
    success = summary()
    result = SaveSuccessStage(context).apply(SaveSuccessArguments(success))
    assert result.path == context.paths.success_path
    assert result.path.endswith("/out/" + SUCCESS_MARKER)
    assert SuccessData.from_json(context.store.read_bytes(result.path)) == success
    assert context.store.info(context.paths.temp_success_path) is None
    counters = context.stats.snapshot().counters
    assert counters[JOB_STAGE_SAVE_SUCCESS_MARKER] == 1
    assert counters[TASK_STAGE_SAVE_SUMMARY_FILE] == 1
    assert counters[COMMIT_FILE_RENAME] == 1


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_replaces_an_existing_success_file(destination: str) -> None:
    context = prepared(destination)
    context.store.write_bytes(context.paths.success_path, b"")
    SaveSuccessStage(context).apply(SaveSuccessArguments(summary()))
    assert SuccessData.from_json(context.store.read_bytes(context.paths.success_path)).job_id == JOB_ID


# On the emulators too: object stores imply directories from file names. Not on faulty://, whose memory filesystem
# lets a file take a directory's name although its binding declares real_directories (the contract suite says so).
@pytest.mark.parametrize("destination", [*CORE_STORES, *CLOUD_STORES], indirect=True)
def test_a_leftover_directory_at_the_temp_path_is_removed(destination: str) -> None:
    context = prepared(destination)
    context.store.write_bytes(context.paths.temp_success_path + "/junk", b"x")
    SaveSuccessStage(context).apply(SaveSuccessArguments(summary()))
    assert SuccessData.from_json(context.store.read_bytes(context.paths.success_path)).success


def test_a_failed_attempt_is_retried(destination: str) -> None:
    context = prepared(destination)
    faulty = FaultInjectingStore(context.store, [Fault("write_bytes", "_SUCCESS", error=lambda: OSError("once"))])
    context.store = faulty
    SaveSuccessStage(context).apply(SaveSuccessArguments(summary()))
    assert faulty.injected["write_bytes"] == 1
    assert faulty.calls["write_bytes"] == 2
    assert context.stats.snapshot().counters[TASK_STAGE_SAVE_SUMMARY_FILE + ".failures"] == 1
    assert SuccessData.from_json(faulty.inner.read_bytes(context.paths.success_path)).success


def test_gives_up_after_the_configured_attempts(destination: str) -> None:
    context = prepared(destination)
    faulty = FaultInjectingStore(
        context.store, [Fault("rename_file", "_SUCCESS", error=lambda: OSError("always"), times=None)]
    )
    context.store = faulty
    with pytest.raises(OSError, match="always"):
        SaveSuccessStage(context).apply(SaveSuccessArguments(summary()))
    assert faulty.injected["rename_file"] == context.config.manifest_save_attempts == 5
    assert faulty.inner.info(context.paths.success_path) is None
    counters = context.stats.snapshot().counters
    assert counters[TASK_STAGE_SAVE_SUMMARY_FILE + ".failures"] == 5
    assert counters[JOB_STAGE_SAVE_SUCCESS_MARKER + ".failures"] == 1


def test_applied_twice_raises(destination: str) -> None:
    stage = SaveSuccessStage(prepared(destination))
    stage.apply(SaveSuccessArguments(summary()))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(SaveSuccessArguments(summary()))


def test_the_temp_file_is_written_while_success_is_probed(destination: str) -> None:
    context = prepared(destination)
    expected = [("write_bytes", context.paths.temp_success_path), ("info", context.paths.success_path)]
    with ThreadPoolExecutor(4) as pool:
        context.pool = pool
        meeting = MeetInFlight(context.store, expected)
        context.store = meeting
        SaveSuccessStage(context).apply(SaveSuccessArguments(summary()))
    assert sorted(meeting.met) == sorted(expected)
    assert SuccessData.from_json(meeting.inner.read_bytes(context.paths.success_path)).job_id == JOB_ID
