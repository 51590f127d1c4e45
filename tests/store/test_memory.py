"""The memory store keeps the promises of a store with real directories, which fsspec's memory filesystem does not."""

from __future__ import annotations

import uuid

import pytest

from manifest_committer.store import open_store
from manifest_committer.store.memory import MemoryStore


def fresh_store() -> tuple[MemoryStore, str]:
    opened = open_store(f"memory://test-{uuid.uuid4().hex[:8]}/out")
    assert isinstance(opened.store, MemoryStore)
    return opened.store, opened.path


@pytest.mark.parametrize("made_by", ["mkdirs", "a file below it"])
def test_a_write_onto_a_directory_is_refused(made_by: str) -> None:
    store, root = fresh_store()
    if made_by == "mkdirs":
        store.mkdirs(f"{root}/d")
    else:
        store.write_bytes(f"{root}/d/f", b"below")
    with pytest.raises(IsADirectoryError, match=f"{store.to_url(root)}/d: a directory"):
        store.write_bytes(f"{root}/d", b"x")
    status = store.info(f"{root}/d")
    assert status is not None and status.is_dir


def test_a_write_replaces_a_file() -> None:
    store, root = fresh_store()
    store.write_bytes(f"{root}/f", b"old")
    store.write_bytes(f"{root}/f", b"new")
    assert store.read_bytes(f"{root}/f") == b"new"
