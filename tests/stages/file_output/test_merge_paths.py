"""MergePaths (Hadoop's mergePaths for v1/v2): same relative paths, no overwrite, reruns move what is left."""

from __future__ import annotations

import pytest

from manifest_committer.config import CommitterConfig
from manifest_committer.errors import JobStateError, OutputConflictError
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.file_output.merge_paths import MergePathsArguments, MergePathsStage, MergeSource
from tests.fixtures.stage_context import FAST_CONFIG, dest_path, exists, fresh, make_context
from tests.fixtures.stores import store_changes_the_outcome


def merge(context: StageContext, *sources: MergeSource, target: str | None = None) -> list[tuple[str, int]]:
    arguments = MergePathsArguments(list(sources), target or context.paths.dest)
    result = MergePathsStage(fresh(context)).apply(arguments)
    return [(moved.target_relative, moved.size) for moved in result.moved]


def source_tree(context: StageContext, files: dict[str, bytes]) -> str:
    root = context.paths.dest + "/_temporary/0/_temporary/attempt_0"
    for relative, data in files.items():
        context.store.write_bytes(f"{root}/{relative}", data)
    return root


@store_changes_the_outcome  # object stores imply directories from file names
def test_every_file_keeps_its_relative_path(destination: str) -> None:
    context = make_context(destination)
    root = source_tree(context, {"a.csv": b"a", "dt=1/b.csv": b"bb", "dt=1/x/c.csv": b"ccc"})

    moved = merge(context, MergeSource("task_0", root))

    assert sorted(moved) == [("a.csv", 1), ("dt=1/b.csv", 2), ("dt=1/x/c.csv", 3)]
    assert context.store.read_bytes(dest_path(context, "dt=1/x/c.csv")) == b"ccc"
    assert not exists(context, root + "/dt=1/b.csv")


@store_changes_the_outcome  # the store's own rename never overwrites
def test_a_file_in_place_is_a_conflict_not_overwritten(destination: str) -> None:
    context = make_context(destination)
    context.store.write_bytes(dest_path(context, "dt=1/b.csv"), b"someone else's")
    root = source_tree(context, {"dt=1/b.csv": b"ours"})

    with pytest.raises(OutputConflictError, match=r"dt=1/b\.csv: a file is already there; task task_0"):
        merge(context, MergeSource("task_0", root))

    assert context.store.read_bytes(dest_path(context, "dt=1/b.csv")) == b"someone else's"


@store_changes_the_outcome  # the store's own rename and delete
def test_delete_target_files_replaces(destination: str) -> None:
    context = make_context(destination, config=CommitterConfig(delete_target_files=True, store_retry_interval=0))
    context.store.write_bytes(dest_path(context, "b.csv"), b"old")
    root = source_tree(context, {"b.csv": b"new"})

    merge(context, MergeSource("task_0", root))

    assert context.store.read_bytes(dest_path(context, "b.csv")) == b"new"


def test_a_missing_source_is_no_output(destination: str) -> None:
    context = make_context(destination)
    assert merge(context, MergeSource("task_0", context.paths.dest + "/_temporary/0/never")) == []


@store_changes_the_outcome  # object stores imply directories from file names
def test_a_rerun_moves_what_is_left(destination: str) -> None:
    context = make_context(destination)
    root = source_tree(context, {"a.csv": b"a", "b.csv": b"b"})
    context.store.rename_file(root + "/a.csv", dest_path(context, "a.csv"))  # an interrupted run moved this one

    assert merge(context, MergeSource("task_0", root)) == [("b.csv", 1)]
    assert context.store.read_bytes(dest_path(context, "a.csv")) == b"a"


def test_declared_outputs_move_alone_to_their_declared_paths(destination: str) -> None:
    context = make_context(destination, config=FAST_CONFIG)
    root = source_tree(context, {"f0": b"0", "scratch": b"never"})

    moved = merge(context, MergeSource("task_0", root, {"f0": "dt=2/part-0.csv"}))

    assert moved == [("dt=2/part-0.csv", 1)]
    assert exists(context, root + "/scratch")
    with pytest.raises(JobStateError, match="declared output of task task_0 does not exist"):
        merge(context, MergeSource("task_0", root, {"gone": "x.csv"}))
