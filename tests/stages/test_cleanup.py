"""CleanupStage: deletes this job's directory under _temporary, and only that.

Every protocol with a ``_temporary`` state cleans up through it, the upload protocol too: these tests run on S3
(moto) as well as on the stores of tests/stages/conftest.py.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from manifest_committer.background import wait_for_all_background_work
from manifest_committer.errors import JobStateError
from manifest_committer.parallel import CALLS_A_BATCH
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.cleanup import (
    CleanupArguments,
    CleanupOutcome,
    CleanupResult,
    CleanupStage,
    summary_in_trash,
)
from manifest_committer.statistic_names import JOB_STAGE_CLEANUP, OP_DELETE_DIR
from manifest_committer.store import Fault, FaultInjectingStore, FileStatus
from manifest_committer.success_data import SuccessData
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.stage_context import exists, fresh, make_context, set_up_job, task_ids, write_task_output
from tests.fixtures.stores import CLOUD_STORES, S3_STORE, STAGE_STORES, store_destination
from tests.fixtures.together import MeetInFlight


@pytest.fixture(params=[*STAGE_STORES, S3_STORE])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store of the stage tests, and S3, where the upload protocol's job commit and abort clean up."""
    yield from store_destination(request, tmp_path)


on_every_store = pytest.mark.parametrize("destination", [*STAGE_STORES, *CLOUD_STORES, S3_STORE], indirect=True)
"""A cleanup test whose outcome hangs on the store: the Azure and GCS emulators too."""


def job_with_tasks(destination: str, job_id: str = "job_a", tasks: int = 3) -> StageContext:
    context = make_context(destination, job_id=job_id)
    set_up_job(context)
    for index in range(tasks):
        write_task_output(context, task_ids(index)[1], {"part/f.csv": b"x"})
    return fresh(context)


def clean(context: StageContext, **arguments: bool) -> CleanupResult:
    return CleanupStage(context).apply(CleanupArguments(**arguments))


@on_every_store  # deletes in flight at once (concurrent_calls)
def test_parallel_delete_of_task_attempts_then_the_job(destination: str) -> None:
    context = job_with_tasks(destination)
    with ThreadPoolExecutor(2) as pool:
        context.pool = pool
        result = clean(context)
    assert result == CleanupResult(CleanupOutcome.PARALLEL_DELETE, 4)
    assert not exists(context, context.paths.job_dir)
    assert not exists(context, context.paths.temporary_dir), "the last job out removes _temporary"
    # On an object store an empty destination is no directory at all.
    assert exists(context, context.paths.dest) or not context.store.capabilities.real_directories
    counters = context.stats.snapshot().counters
    # Three attempts, the job directory, and removing the then empty _temporary (and .trash, where the store has
    # one): every call through the gate.
    assert counters[OP_DELETE_DIR] == 5 + context.store.capabilities.directory_rename
    assert counters[JOB_STAGE_CLEANUP] == 1


def test_on_a_store_that_takes_batches_task_attempts_go_a_batch_a_call(local_destination: str) -> None:
    """A thread and a call for every 16 task attempts; a delete that failed in its batch is made again through the
    gate, and everything goes."""
    context = job_with_tasks(local_destination, tasks=CALLS_A_BATCH + 4)
    together = InFlightTogether(context.store)
    context.store = FaultInjectingStore(together, [Fault("delete_dir", task_ids(3)[1])])
    with ThreadPoolExecutor(4) as pool:
        context.pool = pool
        result = clean(context)
    assert result == CleanupResult(CleanupOutcome.PARALLEL_DELETE, CALLS_A_BATCH + 5)
    attempts = sorted(len(batch) for batch in together.delete_batches if "/tasks/" in batch[0])
    assert attempts == [4, CALLS_A_BATCH - 1], "the faulted delete never reached the store in its batch"
    assert not exists(context, context.paths.job_dir)
    counters = context.stats.snapshot().counters
    assert counters[OP_DELETE_DIR + ".failures"] == 1
    assert counters[OP_DELETE_DIR] >= CALLS_A_BATCH + 4, "each attempt's delete timed, the failed one's retry too"


def test_serial_delete_is_one_call(destination: str) -> None:
    context = job_with_tasks(destination)
    assert clean(context, parallel=False) == CleanupResult(CleanupOutcome.DELETED, 1)
    assert not exists(context, context.paths.job_dir)


def test_base_first_is_one_call(destination: str) -> None:
    context = job_with_tasks(destination)
    assert clean(context, base_first=True) == CleanupResult(CleanupOutcome.DELETED, 1)
    assert not exists(context, context.paths.job_dir)


def test_base_first_falls_back_to_parallel_delete(destination: str) -> None:
    context = job_with_tasks(destination)
    faulty = FaultInjectingStore(context.store, [Fault("delete_dir", error=lambda: OSError("busy"))])
    context.store = faulty
    result = clean(context, base_first=True)
    assert result.outcome is CleanupOutcome.PARALLEL_DELETE
    assert result.delete_calls == 1 + 3 + 1
    assert faulty.injected["delete_dir"] == 1
    assert not exists(context, context.paths.job_dir)


@on_every_store  # a prefix delete on object stores must stop at the job's own name
def test_only_this_jobs_directory_is_deleted(destination: str) -> None:
    other = job_with_tasks(destination, job_id="job_b", tasks=1)
    context = job_with_tasks(destination, job_id="job_a")
    context.store.write_bytes(f"{context.paths.dest}/data.csv", b"committed earlier")
    clean(context)
    assert not exists(context, context.paths.job_dir)
    assert exists(context, context.paths.temporary_dir), "_temporary is kept while another job uses it"
    assert exists(other, other.paths.job_dir)
    assert exists(other, f"{other.paths.task_attempt_dir(task_ids(0)[1])}/part/f.csv")
    assert context.store.read_bytes(f"{context.paths.dest}/data.csv") == b"committed earlier"


def test_other_attempts_of_the_same_job_go_too(destination: str) -> None:
    first = job_with_tasks(destination)
    second = make_context(destination, job_id="job_a", job_attempt=1)
    set_up_job(second)
    clean(fresh(second))
    assert not exists(first, first.paths.job_dir)


def test_disabled_touches_nothing(destination: str) -> None:
    context = job_with_tasks(destination)
    assert clean(context, enabled=False) == CleanupResult(CleanupOutcome.DISABLED, 0)
    # What the job wrote: on S3 an empty directory (``manifests/`` after setup) is nothing at all.
    assert exists(context, f"{context.paths.task_attempt_dir(task_ids(0)[1])}/part/f.csv")


def test_nothing_to_clean_up(destination: str) -> None:
    context = make_context(destination)
    assert clean(context) == CleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP, 0)


def test_a_failure_is_raised_unless_suppressed(destination: str) -> None:
    context = job_with_tasks(destination)
    context.store = FaultInjectingStore(
        context.store, [Fault("delete_dir", error=lambda: PermissionError("denied"), times=None)]
    )
    with pytest.raises(PermissionError, match="denied"):
        clean(fresh(context), parallel=False)
    result = clean(fresh(context), parallel=False, suppress_errors=True)
    assert result.outcome is CleanupOutcome.FAILURE
    assert isinstance(result.error, PermissionError)
    assert exists(context, context.paths.job_dir)


@pytest.mark.parametrize("finished", [True, False], ids=["committed", "not committed"])
@on_every_store  # listings of implied directories
def test_what_to_delete_is_found_in_one_round_trip(destination: str, finished: bool) -> None:
    """Is the job directory there, is ``commit-finished``, which task attempts and other entries: four calls, one
    latency, whichever way the cleanup then goes."""
    context = job_with_tasks(destination)
    paths = context.paths
    if finished:
        context.store.write_bytes(paths.commit_finished_path, b"{}")
    expected = [
        ("info", paths.job_dir),
        ("info", paths.commit_finished_path),
        ("list_dir", paths.task_attempts_dir.rstrip("/")),
        ("list_dir", paths.job_attempt_dir.rstrip("/")),
    ]
    with ThreadPoolExecutor(8) as pool:
        context.pool = pool
        meeting = MeetInFlight(context.store, expected)
        context.store = meeting
        result = clean(context)
    assert sorted(meeting.met) == sorted(expected)
    assert result.outcome is CleanupOutcome.PARALLEL_DELETE
    assert not exists(context, paths.job_dir)


def test_applied_twice_raises(destination: str) -> None:
    stage = CleanupStage(make_context(destination))
    stage.apply(CleanupArguments())
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(CleanupArguments())


# --- in the background, through the trash (stores with directory_rename) ------------------------------------------


@pytest.fixture
def local_destination(tmp_path: Path) -> str:
    """The trash needs a store that renames directories in one call: local disk (the others delete in place)."""
    return str(tmp_path / "out")


@on_every_store  # no directory rename on object stores
def test_background_moves_the_job_into_the_trash_in_one_rename_then_deletes_it(destination: str) -> None:
    context = job_with_tasks(destination)
    if not context.store.capabilities.directory_rename:
        assert clean(context, background=True).outcome is CleanupOutcome.PARALLEL_DELETE  # deleted in place
        return
    blocked = threading.Event()

    class Slow(FaultInjectingStore):
        def list_dir(self, path: str) -> list[FileStatus]:
            blocked.wait(10)  # the background delete waits until the test has looked
            return super().list_dir(path)

    result = clean(fresh(context, store=Slow(context.store)), background=True)
    assert result.outcome is CleanupOutcome.MOVED_TO_TRASH and result.trash is not None
    assert not exists(context, context.paths.job_dir), "the job's state left the way before the stage returned"
    assert exists(context, posixpath.join(result.trash, "00", "tasks"))
    blocked.set()
    assert wait_for_all_background_work(timeout=10)
    assert not exists(context, context.paths.temporary_dir)


def test_cleanup_skipped_moves_nothing(destination: str) -> None:
    context = job_with_tasks(destination)
    assert clean(context, enabled=False, background=True) == CleanupResult(CleanupOutcome.DISABLED, 0)
    assert exists(context, context.paths.job_dir)
    assert not exists(context, context.paths.trash_dir)


def trash_left_by_a_killed_delete(context: StageContext, job_id: str) -> str:
    """A trash entry as a process killed mid-delete leaves it: only ``commit-finished`` and an emptied task dir."""
    entry = posixpath.join(context.paths.trash_dir, f"{job_id}=20260101T000000-abc")
    context.store.mkdirs(posixpath.join(entry, "00", "tasks"))
    summary = SuccessData.create(job_id, "JobID", "committer_commit_job")
    context.store.write_bytes(posixpath.join(entry, "00", "commit-finished"), summary.to_json())
    return entry


def test_the_next_job_commit_sweeps_what_a_killed_delete_left(local_destination: str) -> None:
    context = job_with_tasks(local_destination)
    left = trash_left_by_a_killed_delete(context, "job_dead")
    stray = posixpath.join(context.paths.trash_dir, "not-a-trash-entry")
    context.store.mkdirs(stray)
    clean(context, background=True)
    assert wait_for_all_background_work(timeout=10)
    assert not exists(context, left)
    assert exists(context, stray), "only names of the trash's own form are deleted"


def test_a_rerun_finds_the_commit_record_in_the_trash(local_destination: str) -> None:
    """marksuccessfuljobs=false: no _SUCCESS; the job directory moved; the record in the trash says committed."""
    context = make_context(local_destination, job_id="job_moved")
    entry = trash_left_by_a_killed_delete(context, "job_moved")
    trash_left_by_a_killed_delete(context, "job_moved.other")  # another job's entry with a longer id: not ours
    found = summary_in_trash(CleanupStage(context))
    assert found is not None and found.job_id == "job_moved"
    context.store.delete_file(posixpath.join(entry, "00", "commit-finished"))
    assert summary_in_trash(CleanupStage(fresh(context))) is None


def test_abort_deletes_this_jobs_trash_entries_synchronously(local_destination: str) -> None:
    context = make_context(local_destination, job_id="job_gone")
    mine = trash_left_by_a_killed_delete(context, "job_gone")
    other = trash_left_by_a_killed_delete(context, "job_other")
    assert clean(context) == CleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP, 0)
    assert not exists(context, mine)
    assert exists(context, other), "another job's entry is left to its own cleanup or the next sweep"
