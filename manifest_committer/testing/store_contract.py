"""The store contract as pytest tests: every promise of ``StoreOperations`` and of each ``StoreCapabilities`` flag.

A binding author runs them against their own store (as fsspec ships ``fsspec/tests/abstract`` for its
implementations): subclass ``StoreContract`` in a test module (a name starting with ``Test``) and give it a
fixture ``contract_store`` that yields an ``OpenedStore``: a store of its own for the test and an empty directory
in it (on an object store, a prefix holding nothing). The store's declared ``capabilities`` choose which promises
of each flag are tested: a flag promises what its docstring says, and the tests hold the store to it.

    import uuid

    import pytest

    from manifest_committer.store import OpenedStore, open_store
    from manifest_committer.testing.store_contract import StoreContract


    class TestMyStore(StoreContract):
        @pytest.fixture
        def contract_store(self):
            opened = open_store(f"scratch://bucket/contract-{uuid.uuid4().hex}")
            yield opened
            opened.store.close()

A store without a rename (one that serves only the ``upload`` protocol) subclasses the parts it has instead:
``ProbeContract``, ``ReadWriteContract``, ``DirectoryContract``, ``DeleteContract``, ``BatchContract``,
``ErrorContract``, ``UploadContract`` (and ``DeclarationContract``). Tests of a flag the store does not declare,
and of which the contract says nothing without it, are skipped, naming the flag.

This module imports pytest: import it from tests only (the library never does).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..store.bindings import OpenedStore
from ..store.operations import (
    FileStatus,
    LinkInPathError,
    RenameHint,
    StoreCapabilities,
    StoreOperations,
    rewritten_path,
)

__all__ = [
    "BatchContract",
    "CapabilityContract",
    "DeclarationContract",
    "DeleteContract",
    "DirectoryContract",
    "DirectoryRenameContract",
    "ErrorContract",
    "ProbeContract",
    "ReadWriteContract",
    "RenameContract",
    "StoreContract",
    "UploadContract",
]

RACERS = 8
"""Renames racing to one destination in ``test_racing_renames_to_one_destination_move_exactly_one``."""
BATCH = 24
"""Calls in one batch of the batch tests."""


def _name(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def _names(statuses: list[FileStatus]) -> set[str]:
    return {_name(status.path) for status in statuses}


def _kept_as_given(store: StoreOperations, path: str, below: str) -> bool:
    """Whether the store declares it keeps ``path`` and its directories down to ``below`` as given
    (``StoreCapabilities.kept_name``)."""
    return rewritten_path(store.capabilities.kept_name, path, below) is None


REWRITE_CANDIDATES = ("b?", "h#", "a?b#c", "a?#c", "a?b.csv", "x#y.csv", "z??", "h##", "a#b?", "t\tab")
"""Names a client that reads a path as a URL might rewrite, none of them into another's rewritten name."""


def _require(capabilities: StoreCapabilities, flag: str) -> None:
    if not getattr(capabilities, flag):
        pytest.skip(f"the store does not declare {flag}")


class _Contract:
    """What every part shares: the fixture a subclass provides, and helpers over it."""

    @pytest.fixture
    def contract_store(self) -> Iterator[OpenedStore]:
        """A store of the test's own and an empty directory in it: a subclass provides it."""
        pytest.fail(f"{type(self).__name__} must define the fixture contract_store (an OpenedStore)")
        yield  # pragma: no cover

    @pytest.fixture
    def store(self, contract_store: OpenedStore) -> StoreOperations:
        return contract_store.store

    @pytest.fixture
    def root(self, contract_store: OpenedStore) -> str:
        return contract_store.path.rstrip("/")

    @staticmethod
    def write(store: StoreOperations, path: str, data: bytes = b"contract") -> str:
        store.write_bytes(path, data)
        return path

    def make_directory_link(self, store: StoreOperations, target: str, link: str) -> None:
        """Make ``link`` a symbolic link to the directory ``target`` (for stores declaring ``symbolic_links``);
        paths are the store's own. Override for a store whose paths are not this machine's."""
        os.symlink(target, link)


class DeclarationContract(_Contract):
    """What the declared ``capabilities`` say of each other, and that the store has the calls they promise."""

    def test_capabilities_are_a_store_capabilities(self, store: StoreOperations) -> None:
        assert isinstance(store.capabilities, StoreCapabilities)
        assert isinstance(store.scheme, str) and store.scheme
        assert isinstance(store.credential_sources, str)

    def test_a_directory_rename_needs_real_directories(self, store: StoreOperations) -> None:
        if store.capabilities.directory_rename:
            assert store.capabilities.real_directories, "directory_rename without real_directories"

    def test_symbolic_links_need_real_directories(self, store: StoreOperations) -> None:
        if store.capabilities.symbolic_links:
            assert store.capabilities.real_directories, "symbolic_links without real_directories"

    def test_an_atomic_rename_says_whether_it_happened(self, store: StoreOperations) -> None:
        if store.capabilities.atomic_rename:
            assert store.capabilities.rename_outcome_known, "atomic_rename without rename_outcome_known"

    def test_pending_uploads_offer_the_upload_calls(self, store: StoreOperations) -> None:
        _require(store.capabilities, "pending_uploads")
        for call in ("put_if_absent", "complete_upload", "complete_uploads", "holds", "abort_upload", "list_uploads"):
            assert callable(getattr(store, call, None)), f"pending_uploads declared, but no {call}"


class ProbeContract(_Contract):
    """URLs, ``info``, ``list_dir`` and ``same_content``."""

    def test_a_url_names_its_path_and_back(self, store: StoreOperations, root: str) -> None:
        for name in ("plain", "with space", "per%cent", "dt=2026-11-22", "ünïcode", "a#b?c"):
            path = store.join(root, name)
            url = store.to_url(path)
            assert url.startswith(f"{store.scheme}:"), url
            assert " " not in url and "#" not in url and "?" not in url, f"{url}: not percent-encoded"
            assert store.from_url(url) == path

    def test_a_url_of_another_scheme_is_refused(self, store: StoreOperations, root: str) -> None:
        other = "gs" if store.scheme != "gs" else "abfs"
        with pytest.raises(ValueError):
            store.from_url(f"{other}://elsewhere/{_name(root)}/x")

    def test_join_and_parent(self, store: StoreOperations, root: str) -> None:
        path = store.join(root, "a", "b")
        assert path == f"{root}/a/b"
        assert store.parent(path) == f"{root}/a"
        assert store.parent(f"{path}/") == f"{root}/a"

    def test_info_of_nothing_is_none(self, store: StoreOperations, root: str) -> None:
        assert store.info(store.join(root, "missing")) is None
        assert store.info(store.join(root, "missing", "below")) is None

    def test_info_of_a_file(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "f"), b"12345")
        status = store.info(path)
        assert status is not None
        assert status.path.rstrip("/") == path
        assert (status.size, status.is_dir, status.is_link) == (5, False, False)
        if status.modified is not None:
            assert abs(status.modified - time.time()) < 24 * 3600, "modified is seconds since the epoch"

    def test_info_of_a_directory_implied_by_a_file(self, store: StoreOperations, root: str) -> None:
        self.write(store, store.join(root, "d", "f"))
        status = store.info(store.join(root, "d"))
        assert status is not None and status.is_dir

    def test_list_dir_lists_the_direct_children(self, store: StoreOperations, root: str) -> None:
        self.write(store, store.join(root, "d", "one"), b"1")
        self.write(store, store.join(root, "d", "two"), b"22")
        self.write(store, store.join(root, "d", "sub", "deeper"))
        listed = {_name(status.path): status for status in store.list_dir(store.join(root, "d"))}
        assert set(listed) == {"one", "two", "sub"}
        assert (listed["one"].size, listed["one"].is_dir) == (1, False)
        assert (listed["two"].size, listed["two"].is_dir) == (2, False)
        assert listed["sub"].is_dir
        assert all(status.path.rstrip("/").startswith(f"{root}/d/") for status in listed.values())

    def test_list_dir_of_nothing_is_file_not_found(self, store: StoreOperations, root: str) -> None:
        with pytest.raises(FileNotFoundError):
            store.list_dir(store.join(root, "missing"))

    def test_same_content_proves_only_what_it_can(self, store: StoreOperations, root: str) -> None:
        first = store.info(self.write(store, store.join(root, "a"), b"abcd"))
        different = store.info(self.write(store, store.join(root, "b"), b"abce"))
        longer = store.info(self.write(store, store.join(root, "c"), b"abcde"))
        self.write(store, store.join(root, "d", "f"))
        directory = store.info(store.join(root, "d"))
        assert first is not None and different is not None and longer is not None and directory is not None
        assert not store.same_content(first, different), "same size, different bytes"
        assert not store.same_content(first, longer)
        assert not store.same_content(directory, directory), "a directory holds no bytes to compare"

    def test_checksums_preserved_in_rename_are_reported(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "checksums_preserved_in_rename")
        first = store.info(self.write(store, store.join(root, "a"), b"abcd"))
        copy = store.info(self.write(store, store.join(root, "b"), b"abcd"))
        assert first is not None and copy is not None
        assert first.checksum, "checksums_preserved_in_rename declared, but info reports no checksum"
        assert store.same_content(first, copy), "two files of the same bytes and checksums"


class ReadWriteContract(_Contract):
    """``write_bytes``, ``read_bytes``, ``append_bytes``, private files and ``copy_file``."""

    def test_written_bytes_read_back(self, store: StoreOperations, root: str) -> None:
        data = bytes(range(256)) * 1000
        path = self.write(store, store.join(root, "deep", "er", "f.bin"), data)
        assert store.read_bytes(path) == data

    def test_an_empty_file(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "empty"), b"")
        assert store.read_bytes(path) == b""
        status = store.info(path)
        assert status is not None and (status.size, status.is_dir) == (0, False)

    def test_a_write_replaces_the_file(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "f"), b"old bytes")
        store.write_bytes(path, b"new")
        assert store.read_bytes(path) == b"new"

    def test_a_reader_sees_the_old_or_the_new_bytes_never_a_part(self, store: StoreOperations, root: str) -> None:
        old, new = b"o" * 200_000, b"n" * 300_000
        path = self.write(store, store.join(root, "f"), old)
        seen: list[bytes] = []
        done = threading.Event()

        def read() -> None:
            while not done.is_set():
                seen.append(store.read_bytes(path))

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for _ in range(5):
                store.write_bytes(path, new)
                store.write_bytes(path, old)
        finally:
            done.set()
            reader.join()
        assert seen and all(data in (old, new) for data in seen), "a reader saw part of a write"

    def test_a_missing_file_is_file_not_found(self, store: StoreOperations, root: str) -> None:
        with pytest.raises(FileNotFoundError):
            store.read_bytes(store.join(root, "missing"))

    def test_names_are_taken_literally(self, store: StoreOperations, root: str) -> None:
        """Every name the store does not declare rewritten (``kept_name``) is kept as given, glob characters too."""
        names = [
            name
            for name in ("a[1]", "b?", "c*", "dt=x y", "%41")
            if _kept_as_given(store, store.join(root, name), root)
        ]
        for name in names:
            path = self.write(store, store.join(root, name), name.encode())
            assert store.read_bytes(path) == name.encode()
        assert _names(store.list_dir(root)) == set(names)

    def test_a_declared_rewrite_is_what_the_store_does(self, store: StoreOperations, root: str) -> None:
        """``kept_name`` says where the store keeps a path it is given: it neither hides a rewrite nor invents one."""
        kept_name = store.capabilities.kept_name
        expected: dict[str, bytes] = {}
        for name in REWRITE_CANDIDATES:
            path = self.write(store, store.join(root, name), name.encode())
            expected[_name(kept_name(path)) if kept_name is not None else name] = name.encode()
        assert len(expected) == len(REWRITE_CANDIDATES), "no two candidates are declared to land on one name"
        assert _names(store.list_dir(root)) == set(expected)
        for name, data in expected.items():
            assert store.read_bytes(store.join(root, name)) == data, f"{name!r} holds what was written as it"

    def test_a_directory_declared_kept_lists_under_its_name(self, store: StoreOperations, root: str) -> None:
        """A directory the store declares it keeps as given (``kept_name``) lists its files under that name; one it
        declares rewritten may be written into but not reached by its name, which is why protocols refuse it."""
        for directory in ("d?", "d#", "d?e", "d#e"):
            self.write(store, store.join(root, directory, "f"), directory.encode())
        for directory in ("d?", "d#", "d?e", "d#e"):
            path = store.join(root, directory)
            if _kept_as_given(store, store.join(path, "f"), root):
                assert _names(store.list_dir(path)) == {"f"}, f"{directory!r} lists its file"
                assert store.read_bytes(store.join(path, "f")) == directory.encode()

    def test_private_bytes_read_back(self, store: StoreOperations, root: str) -> None:
        path = store.join(root, "secret")
        store.write_private_bytes(path, b"s3cr3t")
        assert store.read_private_bytes(path) == b"s3cr3t"
        assert store.read_bytes(path) == b"s3cr3t"

    def test_copy_file_copies_and_keeps_the_source(self, store: StoreOperations, root: str) -> None:
        source = self.write(store, store.join(root, "a[1]"), b"copied")
        dest = store.join(root, "b", "copy")
        store.mkdirs(store.join(root, "b"))
        store.copy_file(source, dest)
        assert store.read_bytes(dest) == b"copied"
        assert store.read_bytes(source) == b"copied"

    def test_appendable_appends_in_place(self, store: StoreOperations, root: str) -> None:
        path = store.join(root, "log")
        if not store.capabilities.appendable:
            with pytest.raises(NotImplementedError):
                store.append_bytes(path, b"x")
            return
        store.append_bytes(path, b"one,")
        store.append_bytes(path, b"two")
        assert store.read_bytes(path) == b"one,two"


class DirectoryContract(_Contract):
    """``mkdirs``, ``remove_empty_dir`` and what ``real_directories`` promises."""

    def test_mkdirs_makes_the_parents_and_may_be_repeated(self, store: StoreOperations, root: str) -> None:
        path = store.join(root, "a", "b", "c")
        store.mkdirs(path)
        store.mkdirs(path)
        self.write(store, store.join(path, "f"))
        for directory in (store.join(root, "a"), store.join(root, "a", "b"), path):
            status = store.info(directory)
            assert status is not None and status.is_dir, directory

    def test_mkdirs_over_a_file_is_file_exists(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "f"), b"kept")
        with pytest.raises(FileExistsError):
            store.mkdirs(path)
        assert store.read_bytes(path) == b"kept"

    def test_real_directories_take_no_directory_below_a_file(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "real_directories")  # on object stores a key and a prefix may share a name
        path = self.write(store, store.join(root, "f"), b"kept")
        with pytest.raises(FileExistsError):
            store.mkdirs(store.join(path, "below"))
        assert store.read_bytes(path) == b"kept"

    def test_remove_empty_dir(self, store: StoreOperations, root: str) -> None:
        full, empty = store.join(root, "full"), store.join(root, "empty")
        self.write(store, store.join(full, "f"))
        store.mkdirs(empty)
        assert store.remove_empty_dir(full) is False
        assert store.read_bytes(store.join(full, "f")) == b"contract"
        if store.info(empty) is not None:  # an object store without directory markers makes no empty one
            assert store.remove_empty_dir(empty) is True
            assert store.info(empty) is None
        assert store.remove_empty_dir(store.join(root, "missing")) is False

    def test_real_directories_exist_on_their_own(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "real_directories")
        empty = store.join(root, "empty")
        store.mkdirs(empty)
        status = store.info(empty)
        assert status is not None and status.is_dir, "an empty directory made by mkdirs"
        assert "empty" in _names(store.list_dir(root))
        left = store.join(root, "left")
        store.mkdirs(left)
        self.write(store, store.join(left, "f"))
        assert store.delete_file(store.join(left, "f"))
        status = store.info(left)
        assert status is not None and status.is_dir, "a directory made by mkdirs outlives its last file"
        assert store.list_dir(left) == []

    def test_real_directories_take_no_file_of_their_name(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "real_directories")
        directory = store.join(root, "d")
        self.write(store, store.join(directory, "f"))
        with pytest.raises(OSError):
            store.write_bytes(directory, b"a file where a directory is")
        status = store.info(directory)
        assert status is not None and status.is_dir


class DeleteContract(_Contract):
    """``delete_file``, ``delete_dir``, ``delete_file_below`` and what ``symbolic_links`` promises."""

    def test_delete_file_says_whether_anything_was_there(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "f"))
        kept = self.write(store, store.join(root, "g"))
        assert store.delete_file(path) is True
        assert store.info(path) is None
        assert store.delete_file(path) is False
        assert store.read_bytes(kept) == b"contract"

    def test_delete_dir_deletes_the_tree_only(self, store: StoreOperations, root: str) -> None:
        tree = store.join(root, "tree")
        for relative in ("a", "b/c", "b/d/e"):
            self.write(store, store.join(tree, relative))
        sibling = self.write(store, store.join(root, "tree-sibling", "f"))
        prefix_twin = self.write(store, store.join(root, "treetop"))
        assert store.delete_dir(tree) is True
        assert store.info(tree) is None
        assert store.info(store.join(tree, "b", "d", "e")) is None
        assert store.read_bytes(sibling) == b"contract"
        assert store.read_bytes(prefix_twin) == b"contract"
        assert store.delete_dir(tree) is False

    def test_delete_dir_takes_glob_characters_literally(self, store: StoreOperations, root: str) -> None:
        """A glob character deletes only what it names (``dt=?`` where the store keeps it: ``kept_name``)."""
        globs = [name for name in ("dt=?", "dt=[12]") if _kept_as_given(store, store.join(root, name, "f"), root)]
        for name in ("dt=1", "dt=2", *globs):
            self.write(store, store.join(root, name, "f"))
        for name in globs:
            assert store.delete_dir(store.join(root, name)) is True
        assert _names(store.list_dir(root)) == {"dt=1", "dt=2"}

    def test_delete_file_below(self, store: StoreOperations, root: str) -> None:
        path = self.write(store, store.join(root, "a", "b", "f"))
        assert store.delete_file_below(root, path) is True
        assert store.info(path) is None
        assert store.delete_file_below(root, path) is False

    def test_symbolic_links_are_reported_and_never_followed_by_a_delete(
        self, store: StoreOperations, root: str
    ) -> None:
        _require(store.capabilities, "symbolic_links")
        outside = store.join(root, "outside")
        victim = self.write(store, store.join(outside, "victim"), b"not the job's")
        inside = store.join(root, "inside")
        store.mkdirs(inside)
        link = store.join(inside, "link")
        self.make_directory_link(store, outside, link)
        status = store.info(link)
        assert status is not None and status.is_link and status.is_dir
        assert [entry.is_link for entry in store.list_dir(inside)] == [True]
        with pytest.raises(LinkInPathError):
            store.delete_file_below(inside, store.join(link, "victim"))
        assert store.read_bytes(victim) == b"not the job's"


class RenameContract(_Contract):
    """``rename_file``, ``rename_files`` and what the rename flags promise (the rename-based protocols' need)."""

    def test_rename_moves_the_file(self, store: StoreOperations, root: str) -> None:
        source = self.write(store, store.join(root, "src", "a[1] b"), b"moved")
        store.mkdirs(store.join(root, "dst"))
        dest = store.join(root, "dst", "a[1] b")
        store.rename_file(source, dest)
        assert store.info(source) is None, "rename_outcome_known: it returns only once the source is gone"
        assert store.read_bytes(dest) == b"moved"

    def test_rename_never_replaces_a_file(self, store: StoreOperations, root: str) -> None:
        source = self.write(store, store.join(root, "a"), b"new")
        dest = self.write(store, store.join(root, "b"), b"existing")
        with pytest.raises(FileExistsError):
            store.rename_file(source, dest)
        assert store.read_bytes(dest) == b"existing"
        assert store.read_bytes(source) == b"new"

    def test_rename_never_replaces_a_directory(self, store: StoreOperations, root: str) -> None:
        source = self.write(store, store.join(root, "a"), b"new")
        dest = store.join(root, "d")
        self.write(store, store.join(dest, "inside"), b"kept")
        with pytest.raises(FileExistsError):
            store.rename_file(source, dest)
        assert store.read_bytes(store.join(dest, "inside")) == b"kept"
        assert store.read_bytes(source) == b"new"

    def test_rename_of_nothing_is_file_not_found(self, store: StoreOperations, root: str) -> None:
        with pytest.raises(FileNotFoundError):
            store.rename_file(store.join(root, "missing"), store.join(root, "dest"))
        assert store.info(store.join(root, "dest")) is None

    def test_racing_renames_to_one_destination_move_exactly_one(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "rename_never_overwrites")
        sources = [self.write(store, store.join(root, f"racer-{n}"), f"racer {n}".encode()) for n in range(RACERS)]
        dest = store.join(root, "prize")
        start = threading.Barrier(RACERS)
        outcomes: list[BaseException | None] = [None] * RACERS

        def race(n: int) -> None:
            start.wait()
            try:
                store.rename_file(sources[n], dest)
            except BaseException as error:
                outcomes[n] = error

        racers = [threading.Thread(target=race, args=(n,)) for n in range(RACERS)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        winners = [n for n, outcome in enumerate(outcomes) if outcome is None]
        assert len(winners) == 1, f"renames that said they moved: {winners}; outcomes: {outcomes}"
        assert all(isinstance(outcomes[n], FileExistsError) for n in range(RACERS) if n not in winners), outcomes
        assert store.read_bytes(dest) == f"racer {winners[0]}".encode()
        for n in range(RACERS):
            assert (store.info(sources[n]) is None) == (n in winners), f"racer {n}: said and done differ"

    def test_rename_files_gives_one_outcome_per_pair_in_order(self, store: StoreOperations, root: str) -> None:
        store.mkdirs(store.join(root, "dst"))
        taken = self.write(store, store.join(root, "dst", "taken"), b"kept")
        pairs = []
        for n in range(BATCH):
            source = self.write(store, store.join(root, "src", f"f{n}"), f"{n}".encode())
            pairs.append((source, store.join(root, "dst", f"f{n}")))
        pairs.insert(3, (store.join(root, "src", "missing"), store.join(root, "dst", "never")))
        pairs.insert(7, (self.write(store, store.join(root, "src", "blocked")), taken))
        outcomes = store.rename_files(pairs)
        assert len(outcomes) == len(pairs)
        assert isinstance(outcomes[3], FileNotFoundError), outcomes[3]
        assert isinstance(outcomes[7], FileExistsError), outcomes[7]
        for index, ((source, dest), outcome) in enumerate(zip(pairs, outcomes, strict=True)):
            if index in (3, 7):
                continue
            assert outcome is None, f"{source} -> {dest}: {outcome!r}"
            assert store.info(source) is None
            assert store.read_bytes(dest) == _name(source).removeprefix("f").encode()
        assert store.read_bytes(taken) == b"kept"
        assert store.info(store.join(root, "dst", "never")) is None
        assert store.rename_files([]) == []

    def test_hints_never_weaken_a_rename(self, store: StoreOperations, root: str) -> None:
        store.mkdirs(store.join(root, "dst"))
        fresh = self.write(store, store.join(root, "src", "fresh"), b"fresh")
        status = store.info(fresh)
        assert status is not None
        blocked = self.write(store, store.join(root, "src", "blocked"), b"blocked")
        taken = self.write(store, store.join(root, "dst", "taken"), b"kept")
        wrong_etag = self.write(store, store.join(root, "src", "wrong"), b"wrong")
        pairs = [
            (fresh, store.join(root, "dst", "fresh")),
            (blocked, taken),  # the hint says the destination is clear: it is not
            (wrong_etag, store.join(root, "dst", "wrong")),
        ]
        hints = [
            RenameHint(source_etag=status.etag, dest_clear=True),
            RenameHint(dest_clear=True),
            RenameHint(source_etag=f"not-{uuid.uuid4().hex}"),
        ]
        outcomes = store.rename_files(pairs, hints)
        assert outcomes[0] is None and store.read_bytes(store.join(root, "dst", "fresh")) == b"fresh"
        assert isinstance(outcomes[1], FileExistsError), outcomes[1]
        assert store.read_bytes(taken) == b"kept" and store.read_bytes(blocked) == b"blocked"
        # A wrong etag hint: the store either takes the path without the hint or refuses; it never loses the file.
        moved = store.info(wrong_etag) is None
        assert (outcomes[2] is None) == moved, outcomes[2]
        assert store.read_bytes(store.join(root, "dst", "wrong") if moved else wrong_etag) == b"wrong"

    def test_etags_preserved_in_rename(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "etags_preserved_in_rename")
        source = self.write(store, store.join(root, "a"))
        before = store.info(source)
        assert before is not None and before.etag, "etags_preserved_in_rename declared, but info reports no etag"
        store.rename_file(source, store.join(root, "b"))
        after = store.info(store.join(root, "b"))
        assert after is not None and after.etag == before.etag

    def test_checksums_preserved_in_rename(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "checksums_preserved_in_rename")
        source = self.write(store, store.join(root, "a"), b"checked")
        before = store.info(source)
        store.rename_file(source, store.join(root, "b"))
        after = store.info(store.join(root, "b"))
        assert before is not None and after is not None
        assert before.checksum and after.checksum == before.checksum
        assert store.same_content(before, after)


class DirectoryRenameContract(_Contract):
    """``rename_dir`` and ``move_dir_holding``, offered where ``directory_rename`` is declared."""

    def test_rename_dir_only_where_declared(self, store: StoreOperations, root: str) -> None:
        source = store.join(root, "tree")
        self.write(store, store.join(source, "a", "f"), b"tree")
        dest = store.join(root, "moved")
        if not store.capabilities.directory_rename:
            with pytest.raises(NotImplementedError):
                store.rename_dir(source, dest)
            assert store.read_bytes(store.join(source, "a", "f")) == b"tree"
            return
        store.rename_dir(source, dest)
        assert store.info(source) is None
        assert store.read_bytes(store.join(dest, "a", "f")) == b"tree"

    def test_rename_dir_never_onto_anything(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "directory_rename")
        source = store.join(root, "tree")
        self.write(store, store.join(source, "f"), b"tree")
        taken_by_a_file = self.write(store, store.join(root, "file"), b"kept")
        taken_by_a_directory = store.join(root, "empty")
        store.mkdirs(taken_by_a_directory)
        for dest in (taken_by_a_file, taken_by_a_directory):
            with pytest.raises(FileExistsError):
                store.rename_dir(source, dest)
        assert store.read_bytes(taken_by_a_file) == b"kept"
        assert store.list_dir(taken_by_a_directory) == []
        assert store.read_bytes(store.join(source, "f")) == b"tree"

    def test_rename_dir_of_nothing_or_to_no_parent_is_file_not_found(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "directory_rename")
        with pytest.raises(FileNotFoundError):
            store.rename_dir(store.join(root, "missing"), store.join(root, "dest"))
        source = store.join(root, "tree")
        self.write(store, store.join(source, "f"))
        with pytest.raises(FileNotFoundError):
            store.rename_dir(source, store.join(root, "no-parent", "dest"))
        assert store.read_bytes(store.join(source, "f")) == b"contract"

    def test_move_dir_holding_moves_a_directory_of_that_one_file(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "directory_rename")
        alone, crowded = store.join(root, "alone"), store.join(root, "crowded")
        self.write(store, store.join(alone, "part-0"), b"0")
        self.write(store, store.join(crowded, "part-0"), b"0")
        self.write(store, store.join(crowded, "other"), b"1")
        store.mkdirs(store.join(root, "to"))
        assert store.move_dir_holding(alone, "part-0", store.join(root, "to", "alone")) is True
        assert store.read_bytes(store.join(root, "to", "alone", "part-0")) == b"0"
        assert store.info(alone) is None
        assert store.move_dir_holding(crowded, "part-0", store.join(root, "to", "crowded")) is False
        assert store.move_dir_holding(alone, "part-0", store.join(root, "to", "again")) is False
        other_name = store.join(root, "other-name")
        self.write(store, store.join(other_name, "part-1"))
        assert store.move_dir_holding(other_name, "part-0", store.join(root, "to", "other-name")) is False
        assert store.info(store.join(root, "to", "crowded")) is None
        assert _names(store.list_dir(crowded)) == {"part-0", "other"}

    def test_move_dir_holding_never_moves_a_link(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "directory_rename")
        _require(store.capabilities, "symbolic_links")
        target = store.join(root, "target")
        self.write(store, store.join(target, "part-0"))
        self.make_directory_link(store, target, store.join(root, "link"))
        store.mkdirs(store.join(root, "to"))
        assert store.move_dir_holding(store.join(root, "link"), "part-0", store.join(root, "to", "link")) is False
        assert store.info(store.join(root, "to", "link")) is None


class BatchContract(_Contract):
    """``read_files`` and ``delete_dirs``: one outcome per item, in order; what ``concurrent_calls`` promises."""

    def test_read_files_gives_one_outcome_per_path_in_order(self, store: StoreOperations, root: str) -> None:
        paths = [self.write(store, store.join(root, f"f{n}"), f"{n}".encode()) for n in range(BATCH)]
        paths.insert(5, store.join(root, "missing"))
        outcomes = store.read_files(paths)
        assert len(outcomes) == len(paths)
        assert isinstance(outcomes[5], FileNotFoundError), outcomes[5]
        for path, outcome in zip(paths, outcomes, strict=True):
            if path.endswith("missing"):
                continue
            assert outcome == _name(path).removeprefix("f").encode(), (path, outcome)
        assert store.read_files([]) == []

    def test_delete_dirs_gives_one_outcome_per_path_in_order(self, store: StoreOperations, root: str) -> None:
        paths = []
        for n in range(BATCH):
            self.write(store, store.join(root, f"d{n}", "a", "f"))
            paths.append(store.join(root, f"d{n}"))
        paths.insert(2, store.join(root, "missing"))
        kept = self.write(store, store.join(root, "kept", "f"))
        outcomes = store.delete_dirs(paths)
        assert outcomes == [not path.endswith("missing") for path in paths]
        assert all(store.info(path) is None for path in paths)
        assert store.read_bytes(kept) == b"contract"
        assert store.delete_dirs([]) == []

    def test_concurrent_calls_put_a_batch_in_flight_at_once(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "concurrent_calls")
        paths = [self.write(store, store.join(root, f"f{n}"), b"x" * 1000) for n in range(BATCH)]
        ratios = []
        for _ in range(3):
            one_by_one = _seconds(lambda: [store.read_bytes(path) for path in paths])
            together = _seconds(lambda: store.read_files(paths))
            ratios.append(together / one_by_one)
        assert min(ratios) < 0.9, f"a batch took {min(ratios):.2f} of the time of its calls one by one"


class ErrorContract(_Contract):
    """``is_transient``, ``is_auth_error`` and ``close``."""

    def test_timeouts_and_lost_connections_are_transient(self, store: StoreOperations) -> None:
        assert store.is_transient(TimeoutError("timed out"))
        assert store.is_transient(ConnectionResetError("reset"))
        assert not store.is_transient(FileNotFoundError("missing"))
        assert not store.is_transient(FileExistsError("exists"))
        assert not store.is_transient(ValueError("bad"))

    def test_a_refused_credential_is_an_auth_error(self, store: StoreOperations) -> None:
        assert store.is_auth_error(PermissionError("denied"))
        wrapped = OSError("the backend's own error")
        wrapped.__cause__ = PermissionError("denied")
        assert store.is_auth_error(wrapped), "an explicit cause counts"
        assert not store.is_auth_error(FileNotFoundError("missing"))
        assert not store.is_auth_error(TimeoutError("timed out"))

    def test_close_may_be_repeated(self, store: StoreOperations) -> None:
        store.close()
        store.close()


class CapabilityContract(_Contract):
    """The flags that promise speed: ``microsecond_calls``."""

    def test_microsecond_calls_are_fast(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "microsecond_calls")
        path = self.write(store, store.join(root, "f"))
        best = min(_seconds(lambda: [store.info(path) for _ in range(100)]) for _ in range(3))
        assert best / 100 < 0.002, f"an info call took {best * 10:.2f} ms"


class UploadContract(_Contract):
    """The ``upload`` protocol's conditional write, where ``pending_uploads`` is declared."""

    def test_put_if_absent_never_replaces(self, store: StoreOperations, root: str) -> None:
        _require(store.capabilities, "pending_uploads")
        put: Callable[..., str] = getattr(store, "put_if_absent")  # noqa: B009  # only an upload store has it
        path = store.join(root, "record")
        assert put(path, b"first")
        assert store.read_bytes(path) == b"first"
        with pytest.raises(FileExistsError):
            put(path, b"second")
        assert store.read_bytes(path) == b"first"


class StoreContract(
    DeclarationContract,
    ProbeContract,
    ReadWriteContract,
    DirectoryContract,
    DeleteContract,
    RenameContract,
    DirectoryRenameContract,
    BatchContract,
    ErrorContract,
    CapabilityContract,
    UploadContract,
):
    """Every promise of the store contract: subclass it and provide ``contract_store``."""


def _seconds(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
