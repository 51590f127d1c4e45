"""The latency benchmark's indexed memory store answers as ``memory://`` does: a wrong index would falsify the
benchmark's numbers (a probe answering "absent" skips work), so it is checked against the filesystem itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import fsspec
import pytest

from benchmarks.indexed_memory_store import IndexedMemoryStore
from manifest_committer.store import FileStatus
from manifest_committer.store.memory import MemoryStore


@pytest.fixture
def store() -> IndexedMemoryStore:
    return IndexedMemoryStore(fsspec.filesystem("memory"))


def test_probes_renames_and_deletes_agree_with_the_filesystem(store: IndexedMemoryStore) -> None:
    root = f"/indexed-{uuid.uuid4().hex[:8]}"
    store.fs.pipe_file(f"{root}/job/task1/a/f1", b"1")  # written past the store: the index is rebuilt
    store.write_bytes(f"{root}/job/task2/f2", b"22")
    store.mkdirs(f"{root}/out/p=1")
    directory, file = store.info(f"{root}/job/task1/a"), store.info(f"{root}/job/task2/f2")
    assert directory is not None and directory.is_dir
    assert file is not None and file.size == 2

    store.rename_file(f"{root}/job/task2/f2", f"{root}/out/p=1/f2")
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/job/task1/a/f1", f"{root}/out/p=1/f2")
    with pytest.raises(FileNotFoundError):
        store.rename_file(f"{root}/job/task2/f2", f"{root}/out/f3")

    assert store.delete_dir(f"{root}/job")
    assert store.info(f"{root}/job") is None and store.info(f"{root}/job/task1/a/f1") is None
    assert not [key for key in store.fs.store if key.startswith(f"{root}/job")]
    assert store.fs.cat_file(f"{root}/out/p=1/f2") == b"22"  # outside the subtree: untouched
    assert store.info(f"{root}/out/p=1") is not None
    assert not store.delete_dir(f"{root}/job")
    assert store.delete_file(f"{root}/out/p=1/f2") and store.info(f"{root}/out/p=1/f2") is None
    assert store.info(f"{root}/out/p=1") is not None  # a deleted file's directory stays


def test_listings_agree_with_the_filesystem(store: IndexedMemoryStore) -> None:
    root = f"/indexed-{uuid.uuid4().hex[:8]}"
    store.fs.pipe_file(f"{root}/job/tasks/a1/f1", b"1")
    store.write_bytes(f"{root}/job/tasks/a2/f2", b"22")
    store.write_bytes(f"{root}/job/manifest.json", b"333")
    store.rename_file(f"{root}/job/tasks/a2/f2", f"{root}/job/f2")

    def described(listing: list[FileStatus]) -> list[tuple[str, int, bool]]:
        return sorted((status.path, status.size, status.is_dir) for status in listing)

    emptied = (f"{root}/job/tasks/a2", 0, True)  # a directory whose last file left stays, as a real one would
    for path in (f"{root}/job", f"{root}/job/tasks", f"{root}/job/tasks/a1"):
        plain = described(MemoryStore.list_dir(store, path))  # fsspec's own listing, past the index
        indexed = [entry for entry in described(store.list_dir(path)) if entry != emptied]
        assert indexed == plain, path
    assert emptied in described(store.list_dir(f"{root}/job/tasks"))
    with pytest.raises(FileNotFoundError):
        store.list_dir(f"{root}/missing")


def test_mkdirs_keeps_the_index_current(store: IndexedMemoryStore) -> None:
    root = f"/indexed-{uuid.uuid4().hex[:8]}"
    store.write_bytes(f"{root}/a/f", b"1")
    store.info(f"{root}/a")  # the index is current
    rebuilds = 0
    build = store._add_file

    def counting(key: str) -> None:
        nonlocal rebuilds
        rebuilds += 1
        build(key)

    store._add_file = counting  # type: ignore[method-assign]
    store.mkdirs(f"{root}/b/c")
    probed = store.info(f"{root}/b/c"), store.info(f"{root}/b")
    assert all(status is not None and status.is_dir for status in probed)
    assert rebuilds == 0, "mkdirs made the next probe rescan every key"
    assert store.info(f"{root}/a/f") is not None


def test_a_file_written_while_the_index_is_rebuilt_is_listed(store: IndexedMemoryStore) -> None:
    """Tasks write through the filesystem while the store rebuilds its index for another task's listing."""
    root = f"/indexed-{uuid.uuid4().hex[:8]}"
    store.fs.pipe_file(f"{root}/a/f1", b"1")
    snapshot = list

    files: dict[str, Any] = store.fs.store

    def write_during_the_snapshot(items: Iterable[Any]) -> list[Any]:
        taken = snapshot(items)
        if items is files and f"{root}/b/late" not in files:
            files[f"{root}/b/late"] = files[f"{root}/a/f1"]  # lands after the key snapshot
        return taken

    import benchmarks.indexed_memory_store as bench

    bench.list = write_during_the_snapshot  # type: ignore[attr-defined]
    try:
        store.list_dir(f"{root}/a")
    finally:
        del bench.list  # type: ignore[attr-defined]
    assert [status.path for status in store.list_dir(f"{root}/b")] == [f"{root}/b/late"]


@pytest.mark.parametrize("made_by", ["mkdirs", "a file below it"])
def test_a_write_onto_a_directory_is_refused_as_by_the_memory_store(store: IndexedMemoryStore, made_by: str) -> None:
    root = f"/indexed-{uuid.uuid4().hex[:8]}"
    if made_by == "mkdirs":
        store.mkdirs(f"{root}/d")
    else:
        store.fs.pipe_file(f"{root}/d/f", b"below")  # past the store: the index is rebuilt first
    with pytest.raises(IsADirectoryError):
        store.write_bytes(f"{root}/d", b"x")
    assert f"{root}/d" not in store.fs.store
    store.write_bytes(f"{root}/e", b"new")  # and a write elsewhere keeps the index current
    found = store.info(f"{root}/e")
    assert found is not None and found.size == 3
