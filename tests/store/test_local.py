"""LocalStore: a whole-file write is atomic for readers in other threads and processes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from manifest_committer.store import open_store
from manifest_committer.store.local import is_write_in_progress
from manifest_committer.store.wrapping import WrappingStore


def test_a_reader_never_sees_a_rewritten_file_empty_or_half_written(tmp_path: Path) -> None:
    opened = open_store(str(tmp_path))
    store, root = opened.store, opened.path
    path = f"{root}/heartbeat"
    versions = [bytes([65 + n]) * 200_000 for n in range(5)]
    store.write_bytes(path, versions[0])
    seen: set[bytes] = set()
    done = threading.Event()

    def read_while_written() -> None:
        while not done.is_set():
            seen.add(store.read_bytes(path))

    reader = threading.Thread(target=read_while_written)
    reader.start()
    try:
        for round_ in range(60):
            store.write_bytes(path, versions[round_ % len(versions)])
    finally:
        done.set()
        reader.join()
    assert seen <= set(versions), "a reader saw a truncated or partly written file"
    assert os.listdir(tmp_path) == ["heartbeat"], "no temporary file is left behind"


def test_temporary_names_are_recognised_and_data_names_are_not() -> None:
    assert is_write_in_progress(".MARKERS0.k2j3_x.tmp")
    assert not is_write_in_progress("part-0.tmp")
    assert not is_write_in_progress(".hidden.marker.CREATE")


def test_mkdirs_makes_missing_parents_accepts_a_directory_and_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    opened = open_store(str(tmp_path))
    store, root = opened.store, opened.path
    store.mkdirs(f"{root}/a/b/c")  # parents missing
    store.mkdirs(f"{root}/a/b/c")  # there already: fine
    store.mkdirs(f"{root}/a/d")  # parent there
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "elsewhere")
    store.mkdirs(f"{root}/a/link")  # a link to a directory counts as one, as with os.makedirs(exist_ok=True)
    (tmp_path / "file").write_bytes(b"data")
    with pytest.raises(FileExistsError, match="in the way of a directory"):
        store.mkdirs(f"{root}/file")
    with pytest.raises(FileExistsError, match="in the way of a parent directory"):
        store.mkdirs(f"{root}/file/below")
    with pytest.raises(FileExistsError, match="in the way of a parent directory"):
        store.mkdirs(f"{root}/file/below/deeper")
    assert sorted(os.listdir(tmp_path / "a")) == ["b", "d", "link"]
    assert os.listdir(tmp_path / "a" / "b") == ["c"]
    assert (tmp_path / "file").read_bytes() == b"data"


def test_a_listing_tells_files_directories_and_links_apart(tmp_path: Path) -> None:
    store, root = open_store(str(tmp_path)).store, str(tmp_path)
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_bytes(b"12345")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    listed = {status.path.rsplit("/", 1)[1]: status for status in store.list_dir(root)}
    assert listed["dir"].is_dir and not listed["dir"].is_link
    assert (listed["file"].size, listed["file"].is_dir, listed["file"].is_link) == (5, False, False)
    assert listed["file"].modified == pytest.approx(os.stat(tmp_path / "file").st_mtime)
    assert listed["link"].is_link and not listed["link"].is_dir, "a link to a directory is listed as the link"


def test_a_directory_rename_moves_a_directory_only_and_never_lands_on_anything(tmp_path: Path) -> None:
    store, root = open_store(str(tmp_path)).store, str(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    (tmp_path / "taken").mkdir()
    (tmp_path / "file").write_bytes(b"y")
    with pytest.raises(FileExistsError):
        store.rename_dir(f"{root}/a", f"{root}/taken")  # an empty directory, which rename(2) would replace
    with pytest.raises(FileNotFoundError, match="not a directory"):
        store.rename_dir(f"{root}/file", f"{root}/moved-file")
    with pytest.raises(FileNotFoundError):
        store.rename_dir(f"{root}/missing", f"{root}/moved-missing")
    store.rename_dir(f"{root}/a", f"{root}/b")
    assert sorted(os.listdir(tmp_path)) == ["b", "file", "taken"]
    assert (tmp_path / "b" / "f").read_bytes() == b"x"


@pytest.mark.parametrize("wrapped", [False, True], ids=["local", "composed"])
def test_a_directory_moves_whole_only_while_it_holds_its_one_file_alone(tmp_path: Path, wrapped: bool) -> None:
    """``move_dir_holding``: local disk's own calls and the one made of probe, listing and ``rename_dir`` (what
    every wrapper runs) answer alike; nothing moves unless the directory holds that regular file and no more."""
    local = open_store(str(tmp_path)).store
    store = WrappingStore(local) if wrapped else local
    root = str(tmp_path)

    def directory(name: str, *children: str) -> str:
        (tmp_path / name).mkdir()
        for child in children:
            (tmp_path / name / child).write_bytes(child.encode())
        return f"{root}/{name}"

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_bytes(b"not the job's")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with_link = directory("with-link")
    (tmp_path / "with-link" / "f").symlink_to(tmp_path / "elsewhere" / "f")
    with_dir = directory("with-dir")
    (tmp_path / "with-dir" / "f").mkdir()
    (tmp_path / "taken").mkdir()
    refused = {
        "two files": directory("two", "f", "g"),
        "another name": directory("other", "g"),
        "empty": directory("empty"),
        "a link to the file": with_link,
        "a directory of the name": with_dir,
        "the directory a link": f"{root}/link",
        "missing": f"{root}/missing",
    }
    for why, source in refused.items():
        assert not store.move_dir_holding(source, "f", f"{root}/moved"), why
        assert not (tmp_path / "moved").exists(), why
    one = directory("one", "f")
    with pytest.raises(FileExistsError):
        store.move_dir_holding(one, "f", f"{root}/taken")  # never onto anything, an empty directory included
    assert store.move_dir_holding(one, "f", f"{root}/moved")
    assert os.listdir(tmp_path / "moved") == ["f"] and not (tmp_path / "one").exists()
    assert (tmp_path / "link").is_symlink() and os.listdir(tmp_path / "elsewhere") == ["f"]
