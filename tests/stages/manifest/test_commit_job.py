"""CommitJobStage: load, create directories, rename, validate, save _SUCCESS, clean up."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from manifest_committer.background import wait_for_all_background_work
from manifest_committer.errors import CommitterError, JobStateError, ManifestError, OutputValidationError
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.cleanup import CleanupOutcome
from manifest_committer.stages.manifest.commit_job import (
    CommitJobArguments,
    CommitJobResult,
    CommitJobStage,
)
from manifest_committer.statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_CREATE_TARGET_DIRS,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    JOB_STAGE_RENAME_FILES,
    OP_LOAD_FILE,
)
from manifest_committer.store import Fault, FaultInjectingStore
from manifest_committer.success_data import SuccessData
from tests.fixtures.stage_context import (
    FAST_CONFIG,
    commit_task,
    dest_path,
    exists,
    fresh,
    make_context,
    set_up_job,
    task_ids,
)
from tests.fixtures.stores import store_changes_the_outcome
from tests.fixtures.together import MeetInFlight

FILES = {0: {"year=2024/a.csv": b"aaa", "b.csv": b"b"}, 1: {"year=2024/c.csv": b"cc", "year=2025/d.csv": b"dddd"}}


def job(destination: str, **config: object) -> StageContext:
    context = make_context(destination, config=replace(FAST_CONFIG, **config))  # type: ignore[arg-type]
    set_up_job(context)
    for index, files in FILES.items():
        commit_task(context, index, files)
    return fresh(context)


def commit(context: StageContext) -> CommitJobResult:
    return CommitJobStage(context).apply(CommitJobArguments())


@store_changes_the_outcome  # object stores imply directories from file names
def test_commits_every_file_and_writes_success(destination: str) -> None:
    context = job(destination)
    with ThreadPoolExecutor(4) as pool:
        committing = fresh(context, pool=pool)
        result = commit(committing)
    for files in FILES.values():
        for name, data in files.items():
            assert context.store.read_bytes(dest_path(context, name)) == data
    assert (result.manifests_loaded, result.files_committed, result.already_committed) == (2, 4, False)
    moved = context.store.capabilities.directory_rename  # then deleted after returning
    assert result.cleanup is not None
    assert result.cleanup.outcome is (CleanupOutcome.MOVED_TO_TRASH if moved else CleanupOutcome.PARALLEL_DELETE)
    assert wait_for_all_background_work(timeout=10)
    assert not exists(context, context.paths.temporary_dir)

    saved = SuccessData.from_json(context.store.read_bytes(context.paths.success_path))
    assert saved == result.success
    assert saved.success and saved.job_id == context.paths.job_id
    assert saved.diagnostics["stage"] == COMMITTER_COMMIT_JOB
    expected = sorted(context.store.to_url(dest_path(context, n)) for f in FILES.values() for n in f)
    assert saved.filenames == expected
    counters = saved.iostatistics.counters
    assert counters[COMMITTER_FILES_COMMITTED] == 4
    assert counters[COMMITTER_BYTES_COMMITTED] == 10
    assert counters[COMMITTER_TASKS_COMPLETED] == 2
    for stage in (JOB_STAGE_LOAD_MANIFESTS, JOB_STAGE_CREATE_TARGET_DIRS, JOB_STAGE_RENAME_FILES):
        assert counters[stage] == 1, stage
    assert JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT not in counters
    assert committing.stats.snapshot().counters[COMMITTER_COMMIT_JOB] == 1
    assert committing.active_stage == COMMITTER_COMMIT_JOB


def test_a_rerun_after_success_returns_the_saved_summary(destination: str) -> None:
    context = job(destination)
    first = commit(context)
    again = commit(fresh(context))
    assert again.already_committed
    assert again.success == first.success
    assert again.files_committed == 0


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_a_rerun_after_a_crash_finishes_the_job(destination: str) -> None:
    context = job(destination, io_threads=1, rename_batch_size=1)
    faulty = FaultInjectingStore(context.store, [Fault("rename_file", "c.csv", error=lambda: PermissionError("x"))])
    with pytest.raises(PermissionError):
        commit(fresh(context, store=faulty))
    assert exists(context, context.paths.commit_started_path)
    result = commit(fresh(context))
    assert result.files_committed == 4
    assert result.success.iostatistics.counters[COMMITTER_FILES_COMMITTED] == 4
    assert context.store.read_bytes(dest_path(context, "year=2024/c.csv")) == b"cc"


def posix_join(*parts: str) -> str:
    return "/".join(parts)


def test_validation_runs_before_success_is_written(destination: str) -> None:
    context = job(destination, validate_output=True)
    faulty = FaultInjectingStore(context.store, [Fault("info", "d.csv", error=lambda: PermissionError("probe"))])
    with pytest.raises(PermissionError, match="probe"):
        commit(fresh(context, store=faulty))
    assert not exists(context, context.paths.success_path)
    assert exists(context, context.paths.manifest_dir), "no cleanup after a failed validation"


def test_validation_when_enabled(destination: str) -> None:
    context = job(destination, validate_output=True)
    result = commit(context)
    assert result.success.iostatistics.counters[JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT] == 1


def test_validation_failure_names_the_file(destination: str) -> None:
    context = job(destination, validate_output=True)

    class Shrinking(FaultInjectingStore):
        passes_batches = False  # intercepts rename_file: batches must reach it

        def rename_file(self, source: str, dest: str) -> None:
            super().rename_file(source, dest)
            if dest.endswith("d.csv"):
                self.inner.delete_file(dest)
                self.inner.write_bytes(dest, b"d")

        def rename_dir(self, source: str, dest: str) -> None:  # a directory of one file moved in whole
            super().rename_dir(source, dest)
            for moved in self.inner.list_dir(dest):
                if moved.path.endswith("d.csv"):
                    self.inner.delete_file(moved.path)
                    self.inner.write_bytes(moved.path, b"d")

    with pytest.raises(OutputValidationError, match=r"d\.csv"):
        commit(fresh(context, store=Shrinking(context.store)))
    assert not exists(context, context.paths.success_path)


def test_no_success_marker_when_turned_off(destination: str) -> None:
    context = job(destination, mark_successful_jobs=False)
    result = commit(context)
    assert not exists(context, context.paths.success_path)
    assert result.success.success
    assert exists(context, dest_path(context, "b.csv"))


def test_cleanup_skipped_keeps_the_job_state(destination: str) -> None:
    context = job(destination, cleanup_skipped=True)
    result = commit(context)
    assert result.cleanup is not None and result.cleanup.outcome is CleanupOutcome.DISABLED
    assert exists(context, context.paths.manifest_dir)


def test_a_bad_manifest_touches_nothing_in_the_destination(destination: str) -> None:
    context = job(destination)
    context.store.write_bytes(context.paths.manifest_path("task_20241122_0001_m_000009"), b"{broken")
    with pytest.raises(ManifestError, match="task_20241122_0001_m_000009"):
        commit(context)
    names = sorted(s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(context.paths.dest))
    assert names == ["_temporary"]
    assert not exists(context, context.paths.commit_started_path)


def test_manifests_are_kept_for_diagnosis(destination: str, tmp_path: Path) -> None:
    keep = tmp_path / "kept manifests"
    context = job(destination, diagnostics_manifest_directory=str(keep))
    result = commit(context)
    copies = sorted(p.name for p in (keep / context.paths.job_id).iterdir())
    assert copies == ["task_20241122_0001_m_000000-manifest.json", "task_20241122_0001_m_000001-manifest.json"]
    assert json.loads((keep / context.paths.job_id / copies[0]).read_bytes())["jobId"] == context.paths.job_id
    assert result.success.diagnostics["manifests"].endswith(context.paths.job_id)


def test_applied_twice_raises(destination: str) -> None:
    context = job(destination)
    stage = CommitJobStage(context)
    stage.apply(CommitJobArguments())
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(CommitJobArguments())


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_a_users_file_of_the_same_size_is_never_taken_for_committed_output(destination: str) -> None:
    """Issue 8: with the source gone, a pre-existing file of the manifest's size counted as committed and passed
    validate.output: silent wrong output. Only the journal says a file is this job's."""
    context = job(destination, validate_output=True)
    attempt_dir = context.paths.task_attempt_dir(task_ids(0)[1])
    context.store.delete_file(f"{attempt_dir}/b.csv")
    context.store.write_bytes(dest_path(context, "b.csv"), b"u")  # same size as task 0's b.csv
    with pytest.raises(CommitterError, match=r"b\.csv"):
        commit(context)
    assert context.store.read_bytes(dest_path(context, "b.csv")) == b"u"
    assert not exists(context, context.paths.success_path)


def test_a_rerun_commits_exactly_what_the_first_run_accepted(destination: str) -> None:
    context = job(destination)
    refused = [  # d.csv alone in its directory: the directory is moved in whole
        Fault(call, where, error=lambda: PermissionError("x"))
        for call, where in (("rename_file", "d.csv"), ("rename_dir", "year=2025"))
    ]
    faulty = FaultInjectingStore(context.store, refused)
    with pytest.raises(PermissionError):
        CommitJobStage(fresh(context, store=faulty)).apply(CommitJobArguments())
    # A manifest the first run did not accept (a task commit that late now fails; this one came some other way).
    context.store.write_bytes(context.paths.manifest_path("task_late"), b"{not even a manifest")
    other = {"task_20241122_0001_m_000000": "attempt_20241122_0001_m_000000_1"}
    with pytest.raises(JobStateError, match="attempt_20241122_0001_m_000000_0") as raised:
        CommitJobStage(fresh(context)).apply(CommitJobArguments(accepted_attempts=other))
    assert "attempt_20241122_0001_m_000000_1" in str(raised.value)
    result = commit(fresh(context))
    assert result.manifests_loaded == 2
    assert context.store.read_bytes(dest_path(context, "year=2025/d.csv")) == b"dddd"


def test_commit_finished_holds_the_summary_a_rerun_returns(destination: str) -> None:
    """Without _SUCCESS (marksuccessfuljobs=false) the record of the finish is the commit point and the summary."""
    context = job(destination, mark_successful_jobs=False, cleanup_skipped=True)
    first = commit(context)
    recorded = SuccessData.from_json(context.store.read_bytes(context.paths.commit_finished_path))
    assert recorded.to_json() == first.success.to_json()
    again = commit(fresh(context, config=replace(context.config, cleanup_skipped=False)))
    assert again.already_committed and again.success.to_json() == first.success.to_json()
    assert not exists(context, context.paths.job_dir)
    assert not exists(context, context.paths.success_path)


def test_a_clean_commit_records_no_failed_store_call(destination: str) -> None:
    """Probing for a record that is not there yet (commit-finished, an earlier _SUCCESS) is an answer, and was
    counted as ``op_load_file.failures``, which the success printer shows to people looking for errors."""
    context = job(destination)
    result = commit(context)
    assert wait_for_all_background_work(timeout=10)
    failures = {name: count for name, count in result.success.iostatistics.counters.items() if ".failures" in name}
    assert failures == {}
    assert result.success.iostatistics.counters.get(OP_LOAD_FILE, 0) >= 1, "the probes still count as calls"


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_the_records_and_the_manifests_are_read_in_one_round_trip(destination: str) -> None:
    """Whether the job committed or began committing, and which manifests it has: four calls, one latency."""
    context = job(destination)
    with ThreadPoolExecutor(8) as pool:
        committing = fresh(context, pool=pool)
        paths = committing.paths
        meeting = MeetInFlight(
            committing.store,
            [
                ("read_bytes", paths.commit_finished_path),
                ("read_bytes", paths.success_path),
                ("read_bytes", paths.commit_started_path),
                ("list_dir", paths.manifest_dir),
            ],
        )
        committing.store = meeting
        result = commit(committing)
    assert len(meeting.met) == 4
    assert result.files_committed == 4


def test_commit_started_is_written_while_the_directories_are_probed(destination: str) -> None:
    context = job(destination)
    with ThreadPoolExecutor(8) as pool:
        committing = fresh(context, pool=pool)
        expected = [("write_bytes", committing.paths.commit_started_path), ("info", dest_path(committing, "year=2025"))]
        meeting = MeetInFlight(committing.store, expected)
        committing.store = meeting
        result = commit(committing)
    assert sorted(meeting.met) == sorted(expected)
    assert result.files_committed == 4


def test_a_failed_commit_started_record_fails_the_commit_before_any_change(destination: str) -> None:
    context = job(destination)
    before = context.store.info(dest_path(context, "year=2024"))
    with ThreadPoolExecutor(8) as pool:
        committing = fresh(context, pool=pool)
        committing.store = FaultInjectingStore(
            committing.store, [Fault("write_bytes", "/commit-started", error=lambda: PermissionError("refused"))]
        )
        with pytest.raises(PermissionError, match="refused"):
            commit(committing)
    assert context.store.info(dest_path(context, "year=2024")) == before is None
    assert context.store.info(dest_path(context, "b.csv")) is None
