"""RenameFilesStage: moves every spilled file into place in batches, never overwriting what it finds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import orjson
import pytest

from manifest_committer.entry_file import EntryFile, FilesToCommit, FileToCommit
from manifest_committer.errors import CommitterError, JobStateError, OutputConflictError
from manifest_committer.parallel import CONCURRENT_DEMAND
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.journal import Journal, JournalRun
from manifest_committer.stages.manifest.rename_files import (
    MICROSECOND_UNIT_FACTOR,
    RenameFilesArguments,
    RenameFilesResult,
    RenameFilesStage,
    unit_size,
)
from manifest_committer.statistic_names import (
    COMMIT_FILE_RENAME,
    COMMIT_FILE_RENAME_RECOVERED,
    JOB_STAGE_RENAME_FILES,
    OP_DELETE,
)
from manifest_committer.store import Fault, FaultInjectingStore, RenameHint, StoreOperations
from manifest_committer.success_data import SUCCESS_FILENAME_LIMIT
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.stage_context import FAST_CONFIG, dest_path, fresh, make_context, set_up_job, task_ids
from tests.fixtures.stores import store_changes_the_outcome

ATTEMPT_ID = task_ids(0)[1]


@pytest.fixture
def spill() -> Iterator[EntryFile]:
    with EntryFile() as entry_file:
        yield entry_file


def prepared(destination: str, **config: object) -> StageContext:
    context = make_context(destination, config=replace(FAST_CONFIG, **config))  # type: ignore[arg-type]
    set_up_job(context)
    return context


def add_files(context: StageContext, spill: EntryFile, names: list[str], data: bytes = b"data") -> list[FileToCommit]:
    """Write ``names`` into the task attempt directory and spill their rows, as job commit would."""
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    rows: list[FileToCommit] = []
    for name in names:
        context.store.write_bytes(f"{root}/{name}", data)
        dest = dest_path(context, name)
        rows.append(FileToCommit(f"{root}/{name}", dest, len(data), None, context.store.to_url(dest)))
    spill.append(ATTEMPT_ID, FilesToCommit.of_rows(rows))
    return rows


def first_run(context: StageContext, spill: EntryFile) -> JournalRun:
    return JournalRun.first(unit_size(context.config, spill.file_count))


def rename(context: StageContext, spill: EntryFile, journal: JournalRun | None = None) -> RenameFilesResult:
    return RenameFilesStage(context).apply(RenameFilesArguments(spill, journal or first_run(context, spill)))


@pytest.mark.parametrize("batch_size", [1, 3, 128])
@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_every_file_is_moved_whatever_the_batch_size(destination: str, spill: EntryFile, batch_size: int) -> None:
    context = prepared(destination, rename_batch_size=batch_size)
    rows = add_files(context, spill, [f"d{n % 3}/f{n:02d}.csv" for n in range(10)], b"12345")
    result = rename(context, spill)
    assert (result.files_committed, result.bytes_committed) == (10, 50)
    assert (result.already_committed, result.recovered) == (0, 0)
    for source, dest, *_ in rows:
        assert context.store.read_bytes(dest) == b"12345"
        assert context.store.info(source) is None
    assert result.first_filenames == sorted(row[4] for row in rows)
    counters = context.stats.snapshot().counters
    assert counters[COMMIT_FILE_RENAME] == 10
    assert counters[JOB_STAGE_RENAME_FILES] == 1
    assert COMMIT_FILE_RENAME_RECOVERED not in counters


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_batches_run_on_the_pool(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=4, io_threads=4)
    threads: set[str] = set()
    store = context.store

    class Recording(FaultInjectingStore):
        passes_batches = False  # intercepts rename_file: batches must reach it

        def rename_file(self, source: str, dest: str) -> None:
            threads.add(threading.current_thread().name)
            super().rename_file(source, dest)

    context.store = Recording(store)
    add_files(context, spill, [f"f{n:03d}" for n in range(200)])
    with ThreadPoolExecutor(4, thread_name_prefix="renamer") as pool:
        context.pool = pool
        result = rename(context, spill)
    assert result.files_committed == 200
    assert threads and all(name.startswith("renamer") for name in threads)
    assert len(store.list_dir(context.paths.dest)) == 201, "200 files and _temporary"


def test_filenames_are_the_sorted_first_hundred(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=7)
    rows = add_files(context, spill, [f"f{n:04d}" for n in range(150, 0, -1)])
    result = rename(context, spill)
    assert len(result.first_filenames) == SUCCESS_FILENAME_LIMIT
    assert result.first_filenames == sorted(row[4] for row in rows)[:SUCCESS_FILENAME_LIMIT]


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_an_existing_different_file_is_never_overwritten(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    (row,) = add_files(context, spill, ["taken.csv"])
    context.store.write_bytes(row[1], b"someone else's, longer")
    with pytest.raises(OutputConflictError) as raised:
        rename(context, spill)
    assert row[4] in str(raised.value)
    assert "delete.target.files" in str(raised.value)
    assert context.store.read_bytes(row[1]) == b"someone else's, longer"
    assert context.store.read_bytes(row[0]) == b"data"
    assert context.stats.snapshot().counters[JOB_STAGE_RENAME_FILES + ".failures"] == 1


@store_changes_the_outcome  # object stores imply directories from file names
def test_an_existing_directory_is_never_replaced(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    (row,) = add_files(context, spill, ["f.csv"])
    context.store.write_bytes(row[1] + "/inner", b"x")
    with pytest.raises(OutputConflictError, match="a directory"):
        rename(context, spill)
    assert context.store.read_bytes(row[1] + "/inner") == b"x"


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_delete_target_files_replaces_what_is_there(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, delete_target_files=True)
    (row,) = add_files(context, spill, ["taken.csv"])
    context.store.write_bytes(row[1], b"old and longer")
    result = rename(context, spill)
    assert result.files_committed == 1
    assert context.store.read_bytes(row[1]) == b"data"
    assert context.stats.snapshot().counters[OP_DELETE] == 1


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_a_file_of_the_same_size_already_there_is_a_conflict_not_done(destination: str, spill: EntryFile) -> None:
    """Issue 8: size alone made a user's file of the same size count as committed (and pass validation)."""
    context = prepared(destination)
    (row,) = add_files(context, spill, ["same.csv"], b"ours")
    context.store.write_bytes(row.dest, b"user")
    with pytest.raises(OutputConflictError, match="did not write"):
        rename(context, spill)
    assert context.store.read_bytes(row.dest) == b"user"
    assert context.store.read_bytes(row.source) == b"ours"


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_a_missing_source_is_an_error_even_with_a_file_of_its_size_there(destination: str, spill: EntryFile) -> None:
    """A first run never takes "source gone, destination of the right size" for an earlier commit's work."""
    context = prepared(destination)
    (row,) = add_files(context, spill, ["lost.csv"], b"ours")
    context.store.delete_file(row.source)
    context.store.write_bytes(row.dest, b"user")
    with pytest.raises(CommitterError, match=r"source .* is missing|did not write"):  # the store checks either first
        rename(context, spill)
    assert context.store.read_bytes(row.dest) == b"user"


def rerun(context: StageContext, spill: EntryFile) -> RenameFilesResult:
    """A second run of the same commit, reading what the first recorded."""
    return rename(
        fresh(context),
        spill,
        JournalRun.rerun(RenameFilesStage(fresh(context)), unit_size(context.config, spill.file_count)),
    )


def test_a_rerun_counts_the_recorded_units_as_done_without_touching_them(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=2, io_threads=1)
    rows = add_files(context, spill, [f"f{n}.csv" for n in range(5)])
    assert unit_size(context.config, 5) == 2
    context.store = FaultInjectingStore(
        context.store, [Fault("rename_file", "f3.csv", error=lambda: PermissionError("denied"))]
    )
    with pytest.raises(PermissionError):
        rename(context, spill)
    context.store = context.store.inner
    counting = FaultInjectingStore(context.store, [])
    result = rename(fresh(context, store=counting), spill, JournalRun.rerun(RenameFilesStage(fresh(context)), 2))
    assert (result.files_committed, result.bytes_committed) == (5, 20)
    assert result.already_committed == 3, "f0, f1 (a done unit) and f2 (below the failed unit's mark)"
    assert counting.calls["rename_file"] == 2, "only f3 and f4 are renamed"
    assert all(context.store.read_bytes(row.dest) == b"data" for row in rows)


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_a_unit_killed_mid_way_is_settled_from_evidence(destination: str, spill: EntryFile) -> None:
    """An intent without its done record: a row whose source is gone and destination present is this job's."""
    context = prepared(destination, rename_batch_size=4, io_threads=1)
    moved, other, unmoved = add_files(context, spill, ["moved.csv", "other.csv", "unmoved.csv"])
    journal = Journal(RenameFilesStage(fresh(context)), JournalRun.first(4))
    (unit,) = spill.units(4)
    journal.begin(unit)  # then "killed" after the first rename
    context.store.rename_file(moved.source, moved.dest)
    result = rename(context, spill, JournalRun.rerun(RenameFilesStage(fresh(context)), 4))
    assert (result.files_committed, result.already_committed) == (3, 1)
    assert context.store.read_bytes(other.dest) == context.store.read_bytes(unmoved.dest) == b"data"


def test_a_missing_source_with_nothing_at_the_destination_fails(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    (row,) = add_files(context, spill, ["lost.csv"])
    context.store.delete_file(row[0])
    with pytest.raises(CommitterError, match=r"source .* is missing") as raised:
        rename(context, spill)
    assert row[4] in str(raised.value)


@store_changes_the_outcome  # object stores imply directories from file names
def test_a_vanished_parent_directory_is_recreated(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    (row,) = add_files(context, spill, ["gone/sub/f.csv"])
    result = rename(context, spill)
    assert result.files_committed == 1
    assert context.store.read_bytes(row[1]) == b"data"


@store_changes_the_outcome  # the store's own rename: a copy then a delete on object stores
def test_a_rename_that_took_effect_before_failing_is_recovered(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    inner: StoreOperations = context.store
    context.store = FaultInjectingStore(inner, [Fault("rename_file", "f1.csv", when="after", error=TimeoutError)])
    rows = add_files(context, spill, ["f0.csv", "f1.csv", "f2.csv"])
    result = rename(context, spill)
    assert (result.files_committed, result.recovered) == (3, 1)
    assert all(inner.read_bytes(row[1]) == b"data" for row in rows)
    assert context.stats.snapshot().counters[COMMIT_FILE_RENAME_RECOVERED] == 1


def test_a_transient_failure_is_retried(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    faulty = FaultInjectingStore(context.store, [Fault("rename_file", "f.csv", error=ConnectionError, times=2)])
    context.store = faulty
    (row,) = add_files(context, spill, ["f.csv"])
    result = rename(context, spill)
    assert (result.files_committed, result.recovered) == (1, 0)
    assert faulty.injected["rename_file"] == 2
    assert faulty.inner.read_bytes(row[1]) == b"data"


def test_a_permanent_failure_stops_the_stage(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=1)
    context.store = FaultInjectingStore(
        context.store, [Fault("rename_file", "f3", error=lambda: PermissionError("denied"), times=None)]
    )
    add_files(context, spill, [f"f{n}" for n in range(6)])
    with pytest.raises(PermissionError, match="denied"):
        rename(context, spill)


def test_applied_twice_raises(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    stage = RenameFilesStage(context)
    stage.apply(RenameFilesArguments(spill, first_run(context, spill)))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(RenameFilesArguments(spill, first_run(context, spill)))


def test_units_are_larger_where_store_calls_take_microseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two journal records a unit cost as much as dozens of local renames: local units are cut for the two units
    per core in flight, up to MICROSECOND_UNIT_FACTOR times rename_batch_size; remote ones stay as they were."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    config = replace(FAST_CONFIG, io_threads=32, rename_batch_size=128)
    assert unit_size(config, 10_000) == 79
    local = unit_size(config, 10_000, microsecond_calls=True)
    assert local == 626
    assert 4 * 4 <= -(-10_000 // local) <= 4 * 4 + 1, "four units per worker in flight"
    assert unit_size(config, 10_000_000, microsecond_calls=True) == 128 * MICROSECOND_UNIT_FACTOR
    assert unit_size(config, 3, microsecond_calls=True) == 1
    assert unit_size(replace(config, io_threads=1), 5, microsecond_calls=True) == 2


def test_progress_is_reported_per_unit_from_zero_to_the_total(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=4, io_threads=2)
    add_files(context, spill, [f"f{n:02d}" for n in range(10)])
    calls: list[tuple[int, int]] = []
    with ThreadPoolExecutor(2) as pool:
        context.pool = pool
        RenameFilesStage(context).apply(
            RenameFilesArguments(spill, first_run(context, spill), lambda done, total: calls.append((done, total)))
        )
    assert calls[0] == (0, 10), "the bar starts before the first rename"
    assert calls[-1] == (10, 10)
    units = -(-10 // unit_size(context.config, 10))
    assert units < 10
    assert len(calls) == 1 + units, "once at the start and once per unit, never per file"
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_a_failing_progress_callback_never_fails_the_renames(destination: str, spill: EntryFile) -> None:
    context = prepared(destination, rename_batch_size=2)
    add_files(context, spill, [f"f{n}" for n in range(5)])
    calls: list[int] = []

    def broken(done: int, total: int) -> None:
        calls.append(done)
        raise RuntimeError("terminal gone")

    result = RenameFilesStage(context).apply(RenameFilesArguments(spill, first_run(context, spill), broken))
    assert result.files_committed == 5
    assert calls == [0], "dropped after its first failure"


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_a_units_renames_go_to_the_store_together_never_more_than_io_threads(
    destination: str, spill: EntryFile
) -> None:
    context = prepared(destination, io_threads=4)
    together = InFlightTogether(context.store)
    context.store = together
    rows = add_files(context, spill, [f"d{n % 3}/f{n:03d}.csv" for n in range(60)])
    journal = JournalRun.first(unit_size(context.config, spill.file_count, concurrent_calls=True))
    assert journal.unit_size == 60 // 4 + 1
    with ThreadPoolExecutor(4) as pool:
        result = rename(fresh(context, pool=pool), spill, journal)
    assert result.files_committed == 60
    assert all(context.store.info(row.dest) is not None for row in rows)
    assert sum(len(batch) for batch in together.batches) == 60
    assert max(len(batch) for batch in together.batches) > 1, "no unit put more than one rename in flight"
    assert together.peak_in_flight <= 4


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_a_rerun_after_a_conflict_inside_a_batch_finishes_what_the_batch_did_not(
    destination: str, spill: EntryFile
) -> None:
    context = prepared(destination, io_threads=8)
    context.store = InFlightTogether(context.store)
    rows = add_files(context, spill, [f"f{n}.csv" for n in range(6)])
    context.store.write_bytes(rows[2].dest, b"in the way")
    journal = JournalRun.first(6)  # one unit: all six renames in one batch
    with pytest.raises(OutputConflictError, match=r"f2\.csv"):
        rename(context, spill, journal)
    history = Journal(RenameFilesStage(fresh(context)), JournalRun.rerun(RenameFilesStage(fresh(context)), 6))
    unit = next(iter(spill.units(6)))
    recorded = history.history(unit)
    assert [recorded.recorded_ours(n) for n in range(6)] == [True, True, False, True, True, True]
    assert not recorded.in_doubt(2), "the conflict is certain: that row was not moved"

    context.store.delete_file(rows[2].dest)
    result = rename(fresh(context), spill, JournalRun.rerun(RenameFilesStage(fresh(context)), 6))
    assert (result.files_committed, result.already_committed) == (6, 5)
    assert all(context.store.read_bytes(row.dest) == b"data" for row in rows)


def test_a_done_record_with_malformed_rows_after_it_counts_as_missing(destination: str, spill: EntryFile) -> None:
    context = prepared(destination)
    add_files(context, spill, [f"f{n}.csv" for n in range(4)])
    gate = RenameFilesStage(fresh(context))
    journal = Journal(gate, JournalRun.first(4))
    unit = next(iter(spill.units(4)))
    journal.begin(unit)
    done = f"{context.paths.journal_dir}/00/{unit.key}.done"
    for malformed in (["1"], [0], [4], [True], "2"):
        context.store.write_bytes(done, orjson.dumps({"rows": 4, "upTo": 1, "notMovable": True, "alsoOurs": malformed}))
        history = Journal(gate, JournalRun(4, 1, 1)).history(unit)
        assert not history.recorded_ours(0), malformed
        assert history.in_doubt(0) and history.in_doubt(3), "the intent without a readable done: all in doubt"


def test_units_in_flight_ask_for_a_few_times_the_slots_not_a_unit_a_thread(destination: str, spill: EntryFile) -> None:
    """Hundreds of units each waiting on the slots cost a wake-up a call; a few that fill them do not."""
    context = prepared(destination, io_threads=4)
    together = InFlightTogether(context.store)
    context.store = together
    add_files(context, spill, [f"f{n:03d}.csv" for n in range(96)])
    size = 12  # CONCURRENT_DEMAND x io.threads / 12 = 2 units at once
    assert -(-CONCURRENT_DEMAND * 4 // size) == 2
    with ThreadPoolExecutor(16) as pool:
        result = rename(fresh(context, pool=pool), spill, JournalRun.first(size))
    assert result.files_committed == 96
    assert together.peak_batches <= 2
    assert together.peak_in_flight <= 4


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_a_units_renames_carry_the_tasks_etag_and_whether_the_destination_is_clear(
    destination: str, spill: EntryFile
) -> None:
    """The store is told what the job knows: the etag the task listed, and a destination in a directory the job
    found missing; a file at a path that is itself a directory of the job is never said to be clear."""
    context = prepared(destination, io_threads=4)
    together = InFlightTogether(context.store)
    context.store = together
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    names = ["new/a.csv", "new/b", "old/c.csv"]
    rows = []
    for name in names:
        context.store.write_bytes(f"{root}/{name}", b"data")
        dest = dest_path(context, name)
        rows.append(FileToCommit(f"{root}/{name}", dest, 4, f"etag-{name}", context.store.to_url(dest)))
    spill.append(ATTEMPT_ID, FilesToCommit.of_rows(rows))
    arguments = RenameFilesArguments(
        spill,
        first_run(context, spill),
        clear_directories=frozenset({dest_path(context, "new")}),
        job_directories=frozenset({dest_path(context, "new"), dest_path(context, "new/b"), dest_path(context, "old")}),
    )
    result = RenameFilesStage(context).apply(arguments)
    assert result.files_committed == 3
    by_dest = dict(zip([dest for batch in together.batches for _, dest in batch], together.hints, strict=True))
    assert by_dest[rows[0].dest] == RenameHint("etag-new/a.csv", dest_clear=True)
    assert by_dest[rows[1].dest] == RenameHint("etag-new/b", dest_clear=False), "a directory of the job is there"
    assert by_dest[rows[2].dest] == RenameHint("etag-old/c.csv", dest_clear=False), "a directory that existed"
