"""LoadManifestsStage: reads and checks every manifest, spills the file list, merges directories."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from manifest_committer.duplicates import DuplicateHashes
from manifest_committer.errors import DuplicateDestinationError, JobStateError, ManifestError
from manifest_committer.manifest import DirEntry, EntryStatus, FileColumns, FileEntry, TaskManifest
from manifest_committer.parallel import CALLS_A_BATCH
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.job_types import TargetDirectory
from manifest_committer.stages.manifest.load_manifests import (
    LoadManifestsArguments,
    LoadManifestsResult,
    LoadManifestsStage,
)
from manifest_committer.statistic_names import (
    COMMITTER_TASK_MANIFEST_FILE_SIZE,
    JOB_STAGE_LOAD_MANIFESTS,
    OP_LOAD_ALL_MANIFESTS,
    OP_LOAD_MANIFEST,
    TASK_STAGE_SCAN_DIRECTORY,
)
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.stage_context import commit_task, dest_path, fresh, make_context, set_up_job, task_ids
from tests.fixtures.stores import store_changes_the_outcome


def load(context: StageContext) -> LoadManifestsResult:
    return LoadManifestsStage(context).apply(LoadManifestsArguments())


def save_manifest(
    context: StageContext,
    index: int,
    files: list[tuple[str, int]] = (),  # type: ignore[assignment]
    directories: list[tuple[str, EntryStatus]] = (),  # type: ignore[assignment]
) -> TaskManifest:
    """Write a hand-made manifest of task ``index`` (files and directories relative to the destination)."""
    task_id, attempt_id = task_ids(index)
    to_url = context.store.to_url
    source_root = context.paths.task_attempt_dir(attempt_id)
    manifest = TaskManifest(
        job_id=context.paths.job_id,
        job_attempt_number=context.paths.job_attempt,
        task_id=task_id,
        task_attempt_id=attempt_id,
        task_attempt_dir=to_url(source_root),
        files=[
            FileEntry(to_url(f"{source_root}/{name}"), to_url(dest_path(context, name)), size) for name, size in files
        ],
        directories=[
            DirEntry(to_url(dest_path(context, name)), status, name.count("/") + 1) for name, status in directories
        ],
    )
    context.store.write_bytes(context.paths.manifest_path(task_id), manifest.to_json())
    return manifest


@store_changes_the_outcome  # object stores imply directories from file names
def test_spills_every_file_and_summarises(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    first = commit_task(context, 0, {"a/one.csv": b"1", "two.csv": b"22"})
    second = commit_task(context, 1, {"a/three.csv": b"333"})
    loading = fresh(context)
    result = load(loading)
    with result.entry_file:
        chunks = list(result.entry_file.chunks())
        assert sorted(chunk.task_attempt_id for chunk in chunks) == [task_ids(0)[1], task_ids(1)[1]]
        rows = sorted(row for chunk in chunks for row in chunk.rows)
        expected = sorted(
            (
                context.store.from_url(entry.source),
                context.store.from_url(entry.dest),
                entry.size,
                entry.etag,
                entry.dest,
            )
            for entry in first.files + second.files
        )
        assert rows == expected
        assert result.file_count == 3
        assert result.total_size == 6
    assert result.task_ids == [task_ids(0)[0], task_ids(1)[0]]
    assert result.task_attempt_ids == [task_ids(0)[1], task_ids(1)[1]]
    assert result.manifest_count == 2
    manifest_sizes = [len(context.store.read_bytes(context.paths.manifest_path(t))) for t in result.task_ids]
    assert result.manifest_bytes == sum(manifest_sizes)
    assert [d.path for d in result.directories] == [dest_path(context, "a")]

    snapshot = loading.stats.snapshot()
    assert snapshot.counters[JOB_STAGE_LOAD_MANIFESTS] == 1
    assert snapshot.counters[OP_LOAD_ALL_MANIFESTS] == 1
    assert snapshot.counters[OP_LOAD_MANIFEST] == 2
    assert snapshot.counters[COMMITTER_TASK_MANIFEST_FILE_SIZE] == sum(manifest_sizes)
    assert snapshot.meanstatistics[COMMITTER_TASK_MANIFEST_FILE_SIZE].samples == 2
    assert snapshot.counters[TASK_STAGE_SCAN_DIRECTORY] == 2, "task statistics are merged in"


def test_the_spill_file_is_removed_on_close(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 0, {"f": b"1"})
    result = load(fresh(context))
    path = result.entry_file.path
    with result.entry_file:
        assert os.path.isfile(path)
        assert sum(len(chunk.rows) for chunk in result.entry_file.chunks()) == 1
    assert not os.path.exists(path)


def test_only_manifest_files_are_loaded(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    save_manifest(context, 0, [("f", 1)])
    manifests = context.paths.manifest_dir
    good = context.store.read_bytes(context.paths.manifest_path(task_ids(0)[0]))
    context.store.write_bytes(f"{manifests}/{task_ids(1)[1]}-manifest.json.tmp", good)
    context.store.write_bytes(f"{manifests}/notes.txt", b"not a manifest")
    result = load(fresh(context))
    result.entry_file.close()
    assert result.task_ids == [task_ids(0)[0]]


def test_no_manifests_is_an_empty_job(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    result = load(fresh(context))
    result.entry_file.close()
    assert (result.manifest_count, result.file_count, result.directories) == (0, 0, [])


def test_a_manifest_without_files_still_brings_its_directories(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    save_manifest(context, 0, [], [("empty", EntryStatus.NOT_FOUND)])
    result = load(fresh(context))
    result.entry_file.close()
    assert result.directories == [TargetDirectory(dest_path(context, "empty"), 1, EntryStatus.NOT_FOUND)]


@pytest.mark.parametrize(
    ("statuses", "merged"),
    [
        ((EntryStatus.DIR, EntryStatus.DIR), EntryStatus.DIR),
        ((EntryStatus.DIR, EntryStatus.NOT_FOUND), EntryStatus.NOT_FOUND),
        ((EntryStatus.NOT_FOUND, EntryStatus.DIR), EntryStatus.NOT_FOUND),
        ((EntryStatus.DIR, EntryStatus.FILE), EntryStatus.FILE),
        ((EntryStatus.FILE, EntryStatus.NOT_FOUND), EntryStatus.FILE),
        ((EntryStatus.CREATED_DIR, EntryStatus.UNKNOWN), EntryStatus.UNKNOWN),
        ((EntryStatus.DIR, EntryStatus.DIR, EntryStatus.NOT_FOUND), EntryStatus.NOT_FOUND),
    ],
)
@store_changes_the_outcome  # object stores imply directories from file names
def test_directory_merge_precedence(destination: str, statuses: tuple[EntryStatus, ...], merged: EntryStatus) -> None:
    """A file in the way wins over a missing directory, which wins over one that some task saw existing."""
    context = make_context(destination)
    set_up_job(context)
    for index, status in enumerate(statuses):
        save_manifest(context, index, [(f"p/f{index}", 1)], [("p", status)])
    result = load(fresh(context))
    result.entry_file.close()
    implied = not context.store.capabilities.real_directories  # only worked out where directories are implied
    assert result.directories == [TargetDirectory(dest_path(context, "p"), 1, merged, receives_files=implied)]


def test_directories_are_sorted_by_level_then_path(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    save_manifest(context, 0, [], [("b/c", EntryStatus.NOT_FOUND), ("b", EntryStatus.DIR)])
    save_manifest(context, 1, [], [("a", EntryStatus.NOT_FOUND), ("a/z/y", EntryStatus.NOT_FOUND)])
    result = load(fresh(context))
    result.entry_file.close()
    assert [(d.path.rsplit("/out/", 1)[-1], d.level) for d in result.directories] == [
        ("a", 1),
        ("b", 1),
        ("b/c", 2),
        ("a/z/y", 3),
    ]


def test_the_pool_reads_and_the_calling_thread_parses(destination: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing is under the GIL: manifests parsed in the pool's threads, all at once as their reads came back,
    only contended for it."""
    context = make_context(destination)
    set_up_job(context)
    for index in range(8):
        save_manifest(context, index, [(f"f{index}", index)])
    reading: set[str] = set()
    parsing: set[str] = set()
    read_bytes, read_files = FaultInjectingStore.read_bytes, FaultInjectingStore.read_files
    decode = TaskManifest.from_dict_with_columns

    def recorded_read(store: FaultInjectingStore, path: str) -> bytes:
        reading.add(threading.current_thread().name)
        return read_bytes(store, path)

    def recorded_reads(store: FaultInjectingStore, paths: Sequence[str]) -> list[bytes | Exception]:
        reading.add(threading.current_thread().name)
        return read_files(store, paths)

    def recorded_decode(raw: Any, origin: str = "") -> tuple[TaskManifest, FileColumns]:
        parsing.add(threading.current_thread().name)
        return decode(raw, origin)

    monkeypatch.setattr(FaultInjectingStore, "read_bytes", recorded_read)
    monkeypatch.setattr(FaultInjectingStore, "read_files", recorded_reads)
    monkeypatch.setattr(TaskManifest, "from_dict_with_columns", staticmethod(recorded_decode))
    slow = FaultInjectingStore(context.store, latency=0.001)  # calls of milliseconds: reads go to the pool
    with ThreadPoolExecutor(4, thread_name_prefix="pool") as pool:
        result = load(fresh(context, pool=pool, store=slow))
    result.entry_file.close()
    assert result.manifest_count == 8
    assert reading and all(name.startswith("pool") for name in reading)
    assert parsing == {threading.current_thread().name}


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_a_store_that_takes_batches_reads_the_manifests_a_batch_a_call(destination: str) -> None:
    """A thread and a call for every 16 manifests, not one each; a failed read of a batch is retried by the
    committer's policy, counted as a failure, and the load goes on."""
    context = make_context(destination)
    set_up_job(context)
    for index in range(CALLS_A_BATCH * 2 + 3):
        save_manifest(context, index, [(f"f{index}", index)])
    together = InFlightTogether(context.store)
    flaky = FaultInjectingStore(together, [Fault("read_bytes", task_ids(20)[0], times=1, error=TimeoutError)])
    with ThreadPoolExecutor(4) as pool:
        loading = fresh(context, store=flaky, pool=pool)
        result = load(loading)
    result.entry_file.close()
    assert result.manifest_count == CALLS_A_BATCH * 2 + 3
    assert sorted(len(batch) for batch in together.read_batches) == [3, CALLS_A_BATCH - 1, CALLS_A_BATCH], (
        "the faulted read never reached the store in its batch"
    )
    assert flaky.calls["read_bytes"] == CALLS_A_BATCH * 2 + 4, "each manifest once, the faulted one twice"
    counters = loading.stats.snapshot().counters
    assert counters[OP_LOAD_MANIFEST] == CALLS_A_BATCH * 2 + 3
    assert counters[OP_LOAD_MANIFEST + ".failures"] == 1


@store_changes_the_outcome  # batches in flight at once (concurrent_calls) on the cloud stores
def test_parallel_load_with_a_pool_matches_serial_load(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    for index in range(40):
        save_manifest(
            context, index, [(f"d{index % 5}/f{index}", index), (f"g{index}", 1)], [(f"d{index % 5}", EntryStatus.DIR)]
        )
    serial = load(fresh(context))
    with ThreadPoolExecutor(4) as pool:
        parallel = load(fresh(context, pool=pool))
    with serial.entry_file, parallel.entry_file:
        serial_rows = sorted(row for chunk in serial.entry_file.chunks() for row in chunk.rows)
        parallel_rows = sorted(row for chunk in parallel.entry_file.chunks() for row in chunk.rows)
    assert len(serial_rows) == 80
    assert parallel_rows == serial_rows
    assert sorted(parallel.task_ids) == sorted(serial.task_ids)
    assert parallel.directories == serial.directories
    assert parallel.total_size == serial.total_size == sum(range(40)) + 40


def test_a_missing_manifest_directory_is_a_job_state_error(destination: str) -> None:
    context = make_context(destination)
    with pytest.raises(JobStateError, match="no manifest directory"):
        load(context)
    assert context.stats.snapshot().counters[JOB_STAGE_LOAD_MANIFESTS + ".failures"] == 1


def test_manifests_with_file_colon_slash_urls_load(local_destination: str) -> None:
    """Hadoop writes ``file:/x`` destinations next to ``file:///x`` sources; both name the same path."""
    context = make_context(local_destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [("year=2024/f 1.csv", 4)], [("year=2024", EntryStatus.NOT_FOUND)])
    short = TaskManifest(
        manifest.job_id,
        manifest.job_attempt_number,
        manifest.task_id,
        manifest.task_attempt_id,
        manifest.task_attempt_dir.replace("file:///", "file:/", 1),
        files=[FileEntry(e.source, e.dest.replace("file:///", "file:/", 1), e.size) for e in manifest.files],
        directories=[DirEntry(d.dir.replace("file:///", "file:/", 1), d.status, d.level) for d in manifest.directories],
    )
    assert short.files[0].dest.startswith("file:/") and not short.files[0].dest.startswith("file://")
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), short.to_json())
    result = load(fresh(context))
    with result.entry_file:
        (chunk,) = result.entry_file.chunks()
    assert chunk.rows[0][1] == dest_path(context, "year=2024/f 1.csv")
    assert result.directories[0].path == dest_path(context, "year=2024")


def test_a_destination_claimed_by_two_tasks_fails_the_load(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    save_manifest(context, 0, [("same.csv", 1), ("mine.csv", 1)])
    save_manifest(context, 1, [("same.csv", 1)])
    with pytest.raises(DuplicateDestinationError) as raised:
        load(fresh(context))
    message = str(raised.value)
    assert "same.csv" in message and task_ids(0)[1] in message and task_ids(1)[1] in message


def test_one_destination_in_two_spellings_in_one_manifest_fails_the_load(local_destination: str) -> None:
    """``file:/x`` and ``file:///x`` are one path: a manifest listing both claims one file twice (the check compared
    the raw URLs within a manifest, and only other manifests' paths across them)."""
    context = make_context(local_destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [("a.csv", 1), ("b.csv", 1)])
    second = manifest.files[1]
    manifest.files[1] = FileEntry(second.source, manifest.files[0].dest.replace("file:///", "file:/", 1), 1)
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), manifest.to_json())
    with pytest.raises(DuplicateDestinationError, match=r"a\.csv: destination listed twice by task attempt"):
        load(fresh(context))


def test_one_task_attempt_committed_as_two_tasks_fails_the_load(destination: str) -> None:
    """A copy of one attempt's manifest under another task's name would rename its sources twice."""
    context = make_context(destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [("a.csv", 1)])
    manifest.task_id = task_ids(1)[0]
    manifest.files = [FileEntry(manifest.files[0].source, context.store.to_url(dest_path(context, "b.csv")), 1)]
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), manifest.to_json())
    with pytest.raises(ManifestError, match=f"task attempt {task_ids(0)[1]} also committed as another task"):
        load(fresh(context))


def test_duplicates_are_found_across_many_spilled_hash_runs(
    destination: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With tiny hash runs the check goes through spill and merge, and still finds the one repeated file."""
    monkeypatch.setattr(
        DuplicateHashes.__init__, "__defaults__", (None, 3, 2, "manifest-committer-")
    )  # run_size 3, fan_in 2
    spill = tmp_path / "spill"
    spill.mkdir()
    context = make_context(destination)
    set_up_job(context)
    for index in range(4):
        save_manifest(context, index, [(f"t{index}/f{n}.csv", 1) for n in range(5)])
    save_manifest(context, 4, [("t4/own.csv", 1), ("t2/f3.csv", 1)])
    with pytest.raises(DuplicateDestinationError) as raised:
        LoadManifestsStage(fresh(context)).apply(LoadManifestsArguments(spill_directory=str(spill)))
    message = str(raised.value)
    assert "t2/f3.csv" in message and task_ids(2)[1] in message and task_ids(4)[1] in message
    assert os.listdir(spill) == [], "both spill files are removed when the load fails"


def test_the_hash_spill_file_is_removed_after_a_good_load(
    destination: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(DuplicateHashes.__init__, "__defaults__", (None, 3, 2, "manifest-committer-"))
    spill = tmp_path / "spill"
    spill.mkdir()
    context = make_context(destination)
    set_up_job(context)
    for index in range(3):
        save_manifest(context, index, [(f"t{index}/f{n}.csv", 1) for n in range(4)])
    result = LoadManifestsStage(fresh(context)).apply(LoadManifestsArguments(spill_directory=str(spill)))
    with result.entry_file:
        assert result.file_count == 12
        assert [name for name in os.listdir(spill) if not name.endswith(".entries")] == []


@pytest.mark.parametrize(
    ("corruption", "message"),
    [
        (b"", "empty"),
        (b"{not json", "failed to read JSON"),
        (b'{"type": "something else", "version": 1}', "wrong type"),
    ],
)
@store_changes_the_outcome  # the store's own answers and errors
def test_unreadable_manifests_fail_naming_the_file(destination: str, corruption: bytes, message: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    save_manifest(context, 0, [("f", 1)])
    bad_task = task_ids(1)[0]
    context.store.write_bytes(context.paths.manifest_path(bad_task), corruption)
    with pytest.raises(ManifestError, match=message) as raised:
        load(fresh(context))
    assert bad_task in str(raised.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("job_id", "job_someone_else", "not of this job"),
        ("job_attempt_number", 3, "job attempt 3"),
        ("task_id", "task_renamed", "does not match"),
    ],
)
def test_a_manifest_of_another_job_or_task_fails(destination: str, field: str, value: object, message: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [("f", 1)])
    path = context.paths.manifest_path(manifest.task_id)
    setattr(manifest, field, value)
    context.store.write_bytes(path, manifest.to_json())
    with pytest.raises(ManifestError, match=message):
        load(fresh(context))


@pytest.mark.parametrize(
    ("source_suffix", "dest_suffix", "message"),
    [
        ("/../../other/f", "/f", "source"),
        ("/f", "/../escaped", "destination .* has a '.' or '..' segment"),
        ("/f", "/_temporary/x/f", "destination .* lies inside the destination's _temporary directory"),
    ],
)
def test_entries_outside_the_job_fail(destination: str, source_suffix: str, dest_suffix: str, message: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    manifest = save_manifest(context, 0)
    to_url = context.store.to_url
    source = context.paths.task_attempt_dir(manifest.task_attempt_id) + source_suffix
    manifest.files = [FileEntry(to_url(source), to_url(context.paths.dest + dest_suffix), 1)]
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), manifest.to_json())
    with pytest.raises(ManifestError, match=message):
        load(fresh(context))


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        ("/_temporary", "directory .* lies inside the destination's _temporary directory"),
        ("/a/../..", "directory .* has a '.' or '..' segment"),
        ("/a//b", "directory .* has an empty path segment"),
        ("/", "directory .* lies outside the job.s destination"),
    ],
)
def test_directories_outside_the_job_fail(destination: str, directory: str, message: str) -> None:
    """A manifest checked as a whole (every URL a plain slice of its prefix) still names the one bad entry."""
    context = make_context(destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [(f"d{n}/f{n}", 1) for n in range(20)], [("d0", EntryStatus.NOT_FOUND)])
    manifest.directories.append(DirEntry(context.store.to_url(context.paths.dest + directory), EntryStatus.DIR, 1))
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), manifest.to_json())
    with pytest.raises(ManifestError, match=message):
        load(fresh(context))


def test_the_last_bad_entry_of_a_long_manifest_is_named(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    manifest = save_manifest(context, 0, [(f"d/f{n}", 1) for n in range(50)])
    to_url = context.store.to_url
    source = context.paths.task_attempt_dir(manifest.task_attempt_id) + "/g"
    manifest.files.append(FileEntry(to_url(source), to_url(context.paths.dest + "/d/./g"), 1))
    context.store.write_bytes(context.paths.manifest_path(manifest.task_id), manifest.to_json())
    with pytest.raises(ManifestError, match=r"destination .*/d/\./g has a '.' or '..' segment"):
        load(fresh(context))


def test_names_that_only_look_refused_load(destination: str) -> None:
    """``_temporary`` after a newline or inside a name, ``..`` inside a name: legal, whatever route admits them."""
    context = make_context(destination)
    set_up_job(context)
    names = ["a\n_temporary/x", "_temporaryish", "b/_temporary/y", "c..d/e", "f/..g"]
    save_manifest(context, 0, [(name, 1) for name in names], [("b", EntryStatus.NOT_FOUND)])
    result = load(fresh(context))
    with result.entry_file:
        rows = [row for chunk in result.entry_file.chunks() for row in chunk.rows]
    assert sorted(row.dest for row in rows) == sorted(dest_path(context, name) for name in names)
    assert [d.path for d in result.directories] == [dest_path(context, "b")]


def test_loading_changes_nothing_in_the_store(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    commit_task(context, 0, {"a/f": b"1"})
    before = sorted(context.store.fs.find(context.paths.dest, withdirs=True))
    result = load(fresh(context))
    result.entry_file.close()
    assert sorted(context.store.fs.find(context.paths.dest, withdirs=True)) == before


def test_applied_twice_raises(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    stage = LoadManifestsStage(context)
    stage.apply(LoadManifestsArguments()).entry_file.close()
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(LoadManifestsArguments())


def test_accepted_attempts_load_only_those_manifests(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    for index in range(3):
        commit_task(context, index, {f"f{index}.csv": b"x"})
    (task0, attempt0), (task1, _), (task2, attempt2) = (task_ids(index) for index in range(3))
    result = LoadManifestsStage(fresh(context)).apply(
        LoadManifestsArguments(accepted_attempts={task0: attempt0, task2: attempt2})
    )
    with result.entry_file:
        assert sorted(result.task_ids) == [task0, task2]
        assert result.file_count == 2
    with pytest.raises(ManifestError, match=f"but attempt {task1}_9 of task {task1} was accepted"):
        LoadManifestsStage(fresh(context)).apply(LoadManifestsArguments(accepted_attempts={task1: task1 + "_9"}))
    with pytest.raises(ManifestError, match="no manifest of accepted task"):
        LoadManifestsStage(fresh(context)).apply(LoadManifestsArguments(accepted_attempts={"task_9": "attempt_9"}))
