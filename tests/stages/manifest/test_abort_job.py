"""AbortJobStage: reverts what an interrupted job commit moved, then deletes this job's state."""

from __future__ import annotations

from dataclasses import replace

import pytest

from manifest_committer.errors import CommitterError, JobStateError, OutputConflictError
from manifest_committer.operate.status import inspect_destination
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.cleanup import CleanupOutcome
from manifest_committer.stages.manifest.abort_job import AbortJobArguments, AbortJobResult, AbortJobStage
from manifest_committer.stages.manifest.commit_job import CommitJobArguments, CommitJobStage
from manifest_committer.statistic_names import JOB_STAGE_ABORT
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.batching_store import InFlightTogether
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

SERIAL = replace(FAST_CONFIG, io_threads=1, rename_batch_size=1)


def abort(context: StageContext) -> AbortJobResult:
    return AbortJobStage(context).apply(AbortJobArguments())


def interrupted_commit(destination: str) -> StageContext:
    """Two tasks of three files each; the job commit fails on the fifth rename, after moving four files."""
    context = make_context(destination, config=SERIAL)
    context.store.write_bytes(dest_path(context, "before.csv"), b"was here before the job")
    set_up_job(context)
    commit_task(context, 0, {"p=0/f0.csv": b"00", "p=0/f1.csv": b"01", "p=0/f2.csv": b"02"})
    commit_task(context, 1, {"p=1/f3.csv": b"13", "p=1/f4.csv": b"14", "p=1/f5.csv": b"15"})
    faulty = FaultInjectingStore(context.store, [Fault("rename_file", "f4.csv", error=lambda: PermissionError("x"))])
    with pytest.raises(PermissionError):
        CommitJobStage(fresh(context, store=faulty)).apply(CommitJobArguments())
    moved = [n for n in range(6) if exists(context, dest_path(context, f"p={n // 3}/f{n}.csv"))]
    assert moved == [0, 1, 2, 3], "the commit moved some files before it failed"
    return fresh(context)


def test_reverts_the_renames_of_a_batch_that_moved_after_its_conflict(destination: str) -> None:
    """On a store that takes a unit's renames at once, rows after the one that failed may have moved: the
    journal lists them, so abort reverts them too, and leaves the file that was in the way."""
    context = make_context(destination, config=replace(FAST_CONFIG, io_threads=2))
    set_up_job(context)
    commit_task(context, 0, {"p=0/f0.csv": b"00", "p=0/f1.csv": b"01", "p=0/f2.csv": b"02", "p=0/f3.csv": b"03"})
    context.store.write_bytes(dest_path(context, "p=0/f0.csv"), b"a user's file")
    together = InFlightTogether(context.store)
    with pytest.raises(OutputConflictError, match=r"f0\.csv"):
        CommitJobStage(fresh(context, store=together)).apply(CommitJobArguments())
    assert [dest.rsplit("/", 1)[-1] for _, dest in together.batches[0]] == ["f0.csv", "f1.csv"]
    assert exists(context, dest_path(context, "p=0/f1.csv")), "the batch moved the row after the conflict"
    status = inspect_destination(context.store, context.paths.dest)
    (commit,) = [a.commit for job in status.jobs for a in job.attempts if a.commit is not None]
    assert (commit.files_renamed, commit.units_in_doubt) == (1, 0), "status counts the row moved after the conflict"
    result = abort(context)
    assert result.files_reverted == 1
    names = sorted(s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(dest_path(context, "p=0")))
    assert names == ["f0.csv"]
    assert context.store.read_bytes(dest_path(context, "p=0/f0.csv")) == b"a user's file"


@store_changes_the_outcome  # object stores imply directories from file names
def test_reverts_an_interrupted_job_commit(destination: str) -> None:
    context = interrupted_commit(destination)
    result = abort(context)
    assert result.files_reverted == 4
    # Object stores: the directories had no markers (their files made them) and went with their files.
    assert result.directories_removed == (2 if context.store.capabilities.real_directories else 0)
    assert result.cleanup.outcome is CleanupOutcome.PARALLEL_DELETE
    names = sorted(s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(context.paths.dest))
    assert names == ["before.csv"], "the destination is as it was before the job"
    assert context.store.read_bytes(dest_path(context, "before.csv")) == b"was here before the job"
    assert context.stats.snapshot().counters[JOB_STAGE_ABORT] == 1
    assert context.active_stage == JOB_STAGE_ABORT


def test_a_second_abort_does_nothing_and_succeeds(destination: str) -> None:
    context = interrupted_commit(destination)
    abort(context)
    again = abort(fresh(context))
    assert (again.files_reverted, again.directories_removed) == (0, 0)
    assert again.cleanup.outcome is CleanupOutcome.NOTHING_TO_CLEAN_UP
    assert exists(context, dest_path(context, "before.csv"))


def test_without_a_started_commit_only_the_job_state_goes(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 0, {"f.csv": b"x"})
    context.store.write_bytes(dest_path(context, "f.csv"), b"x")  # same size: must not be taken for this job's
    result = abort(fresh(context))
    assert (result.files_reverted, result.directories_removed) == (0, 0)
    assert not exists(context, context.paths.job_dir)
    assert context.store.read_bytes(dest_path(context, "f.csv")) == b"x"


def test_a_committed_job_is_not_reverted(destination: str) -> None:
    context = make_context(destination, config=replace(SERIAL, cleanup_skipped=True))
    set_up_job(context)
    commit_task(context, 0, {"f.csv": b"x"})
    CommitJobStage(fresh(context)).apply(CommitJobArguments())
    result = abort(fresh(context))
    assert result.files_reverted == 0
    assert result.cleanup.outcome is CleanupOutcome.DISABLED
    assert context.store.read_bytes(dest_path(context, "f.csv")) == b"x"
    assert exists(context, context.paths.success_path)


def test_other_jobs_are_untouched(destination: str) -> None:
    other = make_context(destination, job_id="job_other")
    set_up_job(other)
    commit_task(other, 0, {"theirs.csv": b"t"})
    context = interrupted_commit(destination)
    abort(context)
    assert exists(other, other.paths.manifest_path(task_ids(0)[0]))
    assert exists(other, other.paths.temporary_dir)


def test_applied_twice_raises(destination: str) -> None:
    stage = AbortJobStage(make_context(destination))
    stage.apply(AbortJobArguments())
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(AbortJobArguments())


def test_an_extra_manifest_does_not_cancel_the_revert(destination: str) -> None:
    """Issue 8: abort reloaded every manifest, so one more (here a corrupt one) cancelled the whole revert."""
    context = interrupted_commit(destination)
    context.store.write_bytes(context.paths.manifest_path("task_extra"), b"{not a manifest")
    result = abort(context)
    assert result.files_reverted == 4
    names = sorted(s.path.rsplit("/", 1)[-1] for s in context.store.list_dir(context.paths.dest))
    assert names == ["before.csv"]


def test_a_users_file_of_the_same_size_is_never_deleted(destination: str) -> None:
    """Issue 8: abort took any file of the manifest's size, with the source gone, for one this job moved."""
    context = make_context(destination, config=SERIAL)
    set_up_job(context)
    commit_task(context, 0, {"a.csv": b"00", "b.csv": b"01"})
    _, attempt = task_ids(0)
    # The source of b.csv vanished and a user's file of its size sits at its destination: not movable.
    context.store.delete_file(f"{context.paths.task_attempt_dir(attempt)}/b.csv")
    context.store.write_bytes(dest_path(context, "b.csv"), b"us")
    with pytest.raises(CommitterError):
        CommitJobStage(fresh(context)).apply(CommitJobArguments())
    result = abort(fresh(context))
    assert result.files_reverted == 1
    assert not exists(context, dest_path(context, "a.csv"))
    assert context.store.read_bytes(dest_path(context, "b.csv")) == b"us"


def test_an_earlier_jobs_success_is_put_back(destination: str) -> None:
    """Issue 8: _SUCCESS was replaced by delete-then-rename, so an abort after that lost the earlier one."""
    context = make_context(destination, config=SERIAL)
    set_up_job(context)
    earlier = b'{"name": "earlier job"}'
    context.store.write_bytes(context.paths.success_path, earlier)
    commit_task(context, 0, {"a.csv": b"00"})
    faulty = FaultInjectingStore(
        context.store, [Fault("rename_file", "_SUCCESS.tmp", error=lambda: PermissionError("x"), times=None)]
    )
    with pytest.raises(PermissionError):
        CommitJobStage(fresh(context, store=faulty)).apply(CommitJobArguments())
    assert not exists(context, context.paths.success_path), "moved aside, not deleted"
    abort(fresh(context))
    assert context.store.read_bytes(context.paths.success_path) == earlier
    assert not exists(context, dest_path(context, "a.csv"))


def test_after_the_commit_point_a_failed_cleanup_never_leads_to_a_revert(destination: str) -> None:
    """Issue 8: cleanup deleted commit-finished, failed, and commit_job raised; the caller's abort then deleted the
    committed output. The record now goes last, and _SUCCESS alone is the commit point anyway."""
    context = make_context(destination, config=replace(SERIAL, mark_successful_jobs=False))
    set_up_job(context)
    commit_task(context, 0, {"a.csv": b"00"})
    paths = context.paths

    class HalfDelete(FaultInjectingStore):
        """Deleting the job directory removes the commit record first, then fails (a recursive delete's order)."""

        def delete_dir(self, path: str) -> bool:
            if path == paths.job_dir:
                self.inner.delete_file(paths.commit_finished_path)
                raise PermissionError("denied")
            return super().delete_dir(path)

    with pytest.raises(PermissionError):  # the synchronous delete (object stores, or a failed move to the trash)
        CommitJobStage(fresh(context, store=HalfDelete(context.store))).apply(
            CommitJobArguments(background_cleanup=False)
        )
    result = abort(fresh(context))
    assert result.files_reverted == 0
    assert context.store.read_bytes(dest_path(context, "a.csv")) == b"00"
    assert not exists(context, context.paths.job_dir)


@store_changes_the_outcome  # object stores imply directories from file names
def test_only_the_directories_the_job_created_are_removed(destination: str) -> None:
    context = make_context(destination, config=SERIAL)
    context.store.mkdirs(dest_path(context, "p=0/empty-before"))
    context = interrupted_commit(destination)
    abort(context)
    assert exists(context, dest_path(context, "p=0/empty-before")) or not context.store.capabilities.real_directories
    assert not exists(context, dest_path(context, "p=1"))
