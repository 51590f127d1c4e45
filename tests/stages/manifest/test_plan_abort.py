"""PlanAbortStage: the dry run of an abort lists exactly what the abort then reverts, and changes nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.abort_job import AbortJobArguments, AbortJobStage
from manifest_committer.stages.manifest.commit_job import CommitJobArguments, CommitJobStage
from manifest_committer.stages.manifest.plan_abort import AbortPlan, PlanAbortArguments, PlanAbortStage
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.stage_context import FAST_CONFIG, commit_task, dest_path, exists, fresh, make_context, set_up_job
from tests.fixtures.stores import store_changes_the_outcome

SERIAL = replace(FAST_CONFIG, io_threads=1, rename_batch_size=1)


def plan(context: StageContext) -> AbortPlan:
    return PlanAbortStage(fresh(context)).apply(PlanAbortArguments())


def everything(context: StageContext) -> dict[str, int]:
    """Every path below the destination with its size: what a dry run must leave exactly as it was."""
    fs = context.store.fs
    return {name: detail["size"] for name, detail in fs.find(context.paths.dest, withdirs=True, detail=True).items()}


def interrupted(destination: str) -> StageContext:
    context = make_context(destination, config=SERIAL)
    context.store.write_bytes(dest_path(context, "before.csv"), b"xx")  # a user's file of the same size
    set_up_job(context)
    commit_task(context, 0, {"p=0/f0.csv": b"00", "p=0/f1.csv": b"01"})
    commit_task(context, 1, {"p=1/f2.csv": b"12", "p=1/f3.csv": b"13"})
    faulty = FaultInjectingStore(context.store, [Fault("rename_file", "f3.csv", error=lambda: PermissionError("x"))])
    with pytest.raises(PermissionError):
        CommitJobStage(fresh(context, store=faulty)).apply(CommitJobArguments())
    return fresh(context)


@store_changes_the_outcome  # object stores imply directories from file names
def test_lists_what_the_abort_then_reverts_and_changes_nothing(destination: str) -> None:
    context = interrupted(destination)
    before = everything(context)
    planned = plan(context)
    assert everything(context) == before, "a dry run changes nothing"
    assert (planned.committed, planned.commit_started) == (False, True)
    assert planned.files == [context.store.to_url(dest_path(context, f"p={n // 2}/f{n}.csv")) for n in range(3)]
    assert planned.job_directory == context.store.to_url(context.paths.job_dir)
    assert planned.manifests_unusable is None
    result = AbortJobStage(fresh(context)).apply(AbortJobArguments())
    assert result.files_reverted == len(planned.files)
    assert result.directories_removed == len(planned.directories)
    assert exists(context, dest_path(context, "before.csv"))


def test_a_committed_job_keeps_its_output(destination: str) -> None:
    context = make_context(destination, config=replace(SERIAL, cleanup_skipped=True))
    set_up_job(context)
    commit_task(context, 0, {"f.csv": b"x"})
    CommitJobStage(fresh(context)).apply(CommitJobArguments())
    planned = plan(context)
    assert (planned.committed, planned.files, planned.job_directory) == (True, [], None)


def test_without_a_started_commit_only_the_state_would_go(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 0, {"f.csv": b"x"})
    planned = plan(context)
    assert (planned.commit_started, planned.files, planned.directories) == (False, [], [])
    assert planned.job_directory is not None


def test_the_earlier_success_would_be_put_back(destination: str) -> None:
    context = make_context(destination, config=SERIAL)
    set_up_job(context)
    context.store.write_bytes(context.paths.success_path, b'{"name": "earlier job"}')
    commit_task(context, 0, {"a.csv": b"00"})
    faulty = FaultInjectingStore(
        context.store, [Fault("rename_file", "_SUCCESS.tmp", error=lambda: PermissionError("x"), times=None)]
    )
    with pytest.raises(PermissionError):
        CommitJobStage(fresh(context, store=faulty)).apply(CommitJobArguments())
    planned = plan(context)
    assert planned.restore_success
    assert planned.files == [context.store.to_url(dest_path(context, "a.csv"))]
