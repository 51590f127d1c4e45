"""CreateDirectoriesStage: makes leaf directories only; a file in the way is a conflict unless replacing is asked."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from manifest_committer.errors import JobStateError, OutputConflictError
from manifest_committer.manifest import EntryStatus
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.journal import Journal, JournalRun
from manifest_committer.stages.manifest.create_directories import (
    CreateDirectoriesArguments,
    CreateDirectoriesResult,
    CreateDirectoriesStage,
)
from manifest_committer.stages.manifest.job_types import TargetDirectory
from manifest_committer.statistic_names import (
    JOB_STAGE_CREATE_TARGET_DIRS,
    OP_CREATE_DIRECTORIES,
    OP_DELETE,
    OP_GET_FILE_STATUS,
    OP_LIST_STATUS,
    OP_MKDIRS,
    OP_PREPARE_DIR_ANCESTORS,
)
from tests.fixtures.stage_context import FAST_CONFIG, dest_path, fresh, make_context, set_up_job
from tests.fixtures.stores import store_changes_the_outcome


def target(context: StageContext, relative: str, status: EntryStatus = EntryStatus.NOT_FOUND) -> TargetDirectory:
    return TargetDirectory(dest_path(context, relative), relative.count("/") + 1, status)


def create(context: StageContext, *targets: TargetDirectory) -> CreateDirectoriesResult:
    return CreateDirectoriesStage(context).apply(CreateDirectoriesArguments(list(targets)))


def is_dir(context: StageContext, relative: str) -> bool:
    status = context.store.info(dest_path(context, relative))
    return status is not None and status.is_dir


def files_deleted(context: StageContext) -> int:
    """Files deleted where a directory must go: found by ``mkdirs`` or, on object stores, by the probe."""
    return context.stats.snapshot().counters.get(OP_DELETE, 0)  # every delete passes the gate as op_delete


def prepared(destination: str, *, replace_files: bool = False) -> StageContext:
    """A set-up job; ``replace_files`` sets ``delete.target.files``."""
    setup = make_context(destination)
    set_up_job(setup)
    return make_context(destination, config=replace(FAST_CONFIG, delete_target_files=replace_files))


@store_changes_the_outcome  # object stores imply directories from file names
def test_only_leaves_are_created(destination: str) -> None:
    context = prepared(destination)
    result = create(
        context,
        target(context, "a/b/c"),
        target(context, "a"),
        target(context, "a/b"),
        target(context, "d"),
        target(context, "a/x"),
    )
    assert result.created == frozenset(dest_path(context, p) for p in ("a/b/c", "d", "a/x"))
    for relative in ("a", "a/b", "a/b/c", "d", "a/x"):
        assert is_dir(context, relative), relative
    counters = context.stats.snapshot().counters
    assert counters[OP_MKDIRS] == 3
    assert counters[JOB_STAGE_CREATE_TARGET_DIRS] == 1
    assert counters[OP_CREATE_DIRECTORIES] == 1
    if context.store.capabilities.real_directories:
        assert OP_PREPARE_DIR_ANCESTORS not in counters, "no file was recorded in the way"
    else:  # every directory is probed once for a file in its place: a, a/b, a/b/c, a/x, d
        assert counters[OP_GET_FILE_STATUS] >= 5


def test_directories_seen_as_existing_are_trusted(destination: str) -> None:
    context = prepared(destination)
    context.store.mkdirs(dest_path(context, "there"))
    result = create(context, target(context, "there", EntryStatus.DIR), target(context, "vanished", EntryStatus.DIR))
    assert result.created == frozenset()
    assert context.stats.snapshot().counters.get(OP_MKDIRS, 0) == 0
    assert not is_dir(context, "vanished"), "not re-probed: the rename stage recreates a vanished parent"


def test_existing_directories_with_another_status_are_fine(destination: str) -> None:
    """A leaf the probe finds as a directory is not made again, and not reported as made (it was not journaled)."""
    context = prepared(destination)
    context.store.mkdirs(dest_path(context, "a/b"))
    context.store.write_bytes(dest_path(context, "a/b/keep.csv"), b"k")
    result = create(context, target(context, "a/b", EntryStatus.NOT_FOUND))
    assert result.created == frozenset()
    assert context.stats.snapshot().counters.get(OP_MKDIRS, 0) == 0
    assert context.store.read_bytes(dest_path(context, "a/b/keep.csv")) == b"k"


def test_a_file_recorded_in_the_way_is_deleted(destination: str) -> None:
    context = prepared(destination, replace_files=True)
    context.store.write_bytes(dest_path(context, "year=2024"), b"a file where a directory must go")
    result = create(context, target(context, "year=2024", EntryStatus.FILE), target(context, "year=2024/m=1"))
    assert is_dir(context, "year=2024/m=1")
    assert result.created == frozenset({dest_path(context, "year=2024/m=1")})
    counters = context.stats.snapshot().counters
    assert counters[OP_PREPARE_DIR_ANCESTORS] == 1
    assert counters[OP_DELETE] == 1


def test_a_file_at_a_leaf_is_deleted_when_replacing(destination: str) -> None:
    context = prepared(destination, replace_files=True)
    context.store.write_bytes(dest_path(context, "leaf"), b"appeared after task commit")
    result = create(context, target(context, "leaf", EntryStatus.NOT_FOUND))
    assert is_dir(context, "leaf")
    assert result.created == frozenset({dest_path(context, "leaf")})
    assert files_deleted(context) == 1
    assert context.stats.snapshot().counters[OP_PREPARE_DIR_ANCESTORS] == 1, "found by the probe, before mkdirs"


def test_a_file_at_an_ancestor_of_a_leaf_is_deleted(destination: str) -> None:
    context = prepared(destination, replace_files=True)
    context.store.write_bytes(dest_path(context, "p"), b"a file above the leaf")
    create(context, target(context, "p/q/r", EntryStatus.NOT_FOUND))
    assert is_dir(context, "p") and is_dir(context, "p/q/r")
    assert files_deleted(context) == 1


@store_changes_the_outcome  # object stores imply directories from file names
def test_object_stores_make_no_marker_where_files_go(destination: str) -> None:
    """A leaf that receives files comes into being with them; one that stays empty still gets a marker."""
    context = prepared(destination, replace_files=True)
    context.store.write_bytes(dest_path(context, "full"), b"a file where a directory must go")
    full = TargetDirectory(dest_path(context, "full"), 1, EntryStatus.NOT_FOUND, receives_files=True)
    result = create(context, full, target(context, "empty"))
    assert is_dir(context, "empty")
    assert files_deleted(context) == 1, "the file in the way went all the same"
    if context.store.capabilities.real_directories:
        assert result.created == frozenset({dest_path(context, "full"), dest_path(context, "empty")})
        assert is_dir(context, "full")
    else:
        assert result.created == frozenset({dest_path(context, "empty")})
        assert context.store.info(dest_path(context, "full")) is None, "no marker object"


@pytest.mark.parametrize("where", ["year=2024", "year=2024/m=1", "p"])
@store_changes_the_outcome  # object stores imply directories from file names
def test_a_users_file_where_a_directory_must_go_is_a_conflict(destination: str, where: str) -> None:
    """Issue 8: it was deleted even with delete.target.files=false. Now nothing changes and the error names it."""
    context = prepared(destination)
    context.store.write_bytes(dest_path(context, where), b"a user's file")
    status = EntryStatus.FILE if where == "year=2024" else EntryStatus.NOT_FOUND
    targets = [target(context, "year=2024", status), target(context, "year=2024/m=1"), target(context, "p/q/r")]
    with pytest.raises(OutputConflictError, match=re.escape(where)) as raised:
        create(context, *targets)
    assert "delete.target.files" in str(raised.value)
    assert context.store.read_bytes(dest_path(context, where)) == b"a user's file"
    assert context.stats.snapshot().counters.get(OP_MKDIRS, 0) == 0, "refused before any directory is made"


def test_the_directories_to_create_are_journaled_first(destination: str) -> None:
    """Abort removes exactly the directories the job created: the journal records them before mkdirs."""
    context = prepared(destination)
    context.store.mkdirs(dest_path(context, "old"))
    context.store.write_bytes(dest_path(context, "old/keep.csv"), b"k")
    run = JournalRun.first(1)
    CreateDirectoriesStage(context).apply(
        CreateDirectoriesArguments([target(context, "old/new"), target(context, "old", EntryStatus.NOT_FOUND)], run)
    )
    reader = Journal(
        CreateDirectoriesStage(fresh(context)), JournalRun.abort(CreateDirectoriesStage(fresh(context)), 1)
    )
    assert reader.created_directories() == [dest_path(context, "old/new")]


def test_parallel_with_a_pool(destination: str) -> None:
    context = prepared(destination)
    targets = [target(context, f"part={n}/sub") for n in range(30)] + [target(context, f"part={n}") for n in range(30)]
    with ThreadPoolExecutor(4) as pool:
        context.pool = pool
        result = create(context, *targets)
    assert len(result.created) == 30
    assert all(is_dir(context, f"part={n}/sub") for n in range(30))


R = TypeVar("R")


class CountingPool(ThreadPoolExecutor):
    """Counts the units of work handed to it."""

    def __init__(self) -> None:
        super().__init__(4)
        self.submitted = 0

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@store_changes_the_outcome  # object stores imply directories from file names
def test_many_new_partitions_are_one_listing(destination: str) -> None:
    """A partitioned job's new partitions of one directory: one listing of it, not a probe each (10,000 probes
    were most of a 10,000-partition local job commit), and every one is still journaled before it is made."""
    context = prepared(destination)
    context.store.mkdirs(dest_path(context, "old"))
    targets = [target(context, f"p={n}") for n in range(40)] + [target(context, "old")]
    run = JournalRun.first(1)
    result = CreateDirectoriesStage(context).apply(CreateDirectoriesArguments(targets, run))
    assert result.created == frozenset(dest_path(context, f"p={n}") for n in range(40))
    assert all(is_dir(context, f"p={n}") for n in range(40))
    counters = context.stats.snapshot().counters
    if context.store.capabilities.real_directories:
        assert counters[OP_LIST_STATUS] == 1
        assert counters.get(OP_GET_FILE_STATUS, 0) == 0
    else:  # a listing can show a file and a directory of one name there: every directory is probed
        assert counters[OP_GET_FILE_STATUS] >= 41
    reader = Journal(
        CreateDirectoriesStage(fresh(context)), JournalRun.abort(CreateDirectoriesStage(fresh(context)), 1)
    )
    assert reader.created_directories() == sorted(dest_path(context, f"p={n}") for n in range(40))


def test_a_file_among_many_new_partitions_is_a_conflict(destination: str) -> None:
    """The listing sees a user's file at a partition's place as the probe did: nothing changes."""
    context = prepared(destination)
    context.store.write_bytes(dest_path(context, "p=7"), b"a user's file")
    targets = [target(context, f"p={n}") for n in range(20)]
    with pytest.raises(OutputConflictError, match=re.escape("p=7")):
        create(context, *targets)
    assert context.store.read_bytes(dest_path(context, "p=7")) == b"a user's file"
    assert context.stats.snapshot().counters.get(OP_MKDIRS, 0) == 0


def test_a_link_to_a_directory_among_many_new_partitions_is_a_directory(tmp_path: Path) -> None:
    """A listing shows a symbolic link as a link; it is probed, and a link to a directory is a directory (local
    disk, where links exist)."""
    context = prepared(str(tmp_path / "out"))
    (tmp_path / "elsewhere").mkdir()
    Path(dest_path(context, "p=3")).symlink_to(tmp_path / "elsewhere")
    targets = [target(context, f"p={n}") for n in range(20)]
    result = create(context, *targets)
    assert result.created == frozenset(dest_path(context, f"p={n}") for n in range(20) if n != 3)
    assert context.stats.snapshot().counters[OP_GET_FILE_STATUS] == 1, "the link alone is probed"


def test_fast_stores_get_units_of_many_calls(destination: str) -> None:
    """Where a call takes microseconds a pool task per call costs more than the call: units hold many."""
    context = prepared(destination)
    context.pool = pool = CountingPool()
    with pool:
        create(context, *[target(context, f"a={n}/b") for n in range(100)])
    calls = 100 + 100  # a probe (or a share of a listing) and a mkdirs per leaf
    if context.store.capabilities.microsecond_calls:
        assert pool.submitted <= calls // 4
    else:
        assert pool.submitted >= 100, "one call per unit: every thread of the pool stays busy"
    assert all(is_dir(context, f"a={n}/b") for n in range(100))


def test_nothing_to_create(destination: str) -> None:
    context = prepared(destination)
    assert create(context).created == frozenset()


def test_applied_twice_raises(destination: str) -> None:
    context = prepared(destination)
    stage = CreateDirectoriesStage(context)
    stage.apply(CreateDirectoriesArguments([]))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(CreateDirectoriesArguments([]))


def test_the_directories_found_missing_are_clear_on_object_stores(protocol_destination: str) -> None:
    """On a store without real directories the rename stage may tell the store that nothing is in the way in a
    directory the probe found missing; an existing one is never clear, and on real directories nothing is."""
    context = prepared(protocol_destination)
    context.store.write_bytes(dest_path(context, "old/f.csv"), b"a file of an earlier job")
    old = TargetDirectory(dest_path(context, "old"), 1, EntryStatus.UNKNOWN, receives_files=True)
    new = TargetDirectory(dest_path(context, "new/p=1"), 2, EntryStatus.NOT_FOUND, receives_files=True)
    result = create(context, old, new)
    if context.store.capabilities.real_directories:
        assert result.clear == frozenset()
    else:
        assert result.clear == frozenset({dest_path(context, "new"), dest_path(context, "new/p=1")})
