"""The shipped store contract suite (``manifest_committer.testing.store_contract``) on every built-in binding, on
the fault-injecting wrapper and on a user's binding of their own fsspec filesystem.

S3 has no rename: it runs the parts of the contract it has, and the upload protocol's conditional write.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import FaultInjectingStore, OpenedStore, StoreBindings, open_store
from manifest_committer.store.s3 import S3Store, open_s3_store
from manifest_committer.testing.store_contract import (
    BatchContract,
    DeclarationContract,
    DeleteContract,
    DirectoryContract,
    ErrorContract,
    ProbeContract,
    ReadWriteContract,
    StoreContract,
    UploadContract,
)
from tests.fixtures.emulators import Emulator, fresh_root
from tests.fixtures.faulty_filesystem import FAULTY_CAPABILITIES, FaultyFileSystem
from tests.fixtures.stores import clear_memory_filesystem


def _known_gap(test: Callable[..., None], reason: str) -> Callable[..., None]:
    """A contract test this store is known to fail, as a test of its own class: strict, so a fix shows."""

    @functools.wraps(test)
    def known(*args: Any, **kwargs: Any) -> None:
        test(*args, **kwargs)

    marked: Callable[..., None] = pytest.mark.xfail(strict=True, reason=reason)(known)
    return marked


def _opened(url: str) -> Iterator[OpenedStore]:
    opened = open_store(url)
    yield opened
    opened.store.close()


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def contract_store(self) -> Iterator[OpenedStore]:
        clear_memory_filesystem()
        yield from _opened(f"memory://contract-{uuid.uuid4().hex[:8]}/root")
        clear_memory_filesystem()


class TestLocalStore(StoreContract):
    @pytest.fixture
    def contract_store(self, tmp_path: Path) -> Iterator[OpenedStore]:
        (tmp_path / "root").mkdir()
        yield from _opened(str(tmp_path / "root"))


@pytest.mark.azure
class TestAzureStore(StoreContract):
    @pytest.fixture
    def contract_store(self, azurite: Emulator) -> Iterator[OpenedStore]:
        with fresh_root(azurite) as container:
            yield from _opened(f"abfs://{container}/root")


@pytest.mark.gcs
class TestGcsStore(StoreContract):
    @pytest.fixture
    def contract_store(self, fake_gcs: Emulator) -> Iterator[OpenedStore]:
        with fresh_root(fake_gcs) as bucket:
            yield from _opened(f"gs://{bucket}/root")

    _NO_PRECONDITION_ON_REWRITE = (
        "fake-gcs-server ignores ifGenerationMatch=0 on rewrite (store/gcs.py): only the store's probe guards the "
        "destination, and real GCS's 412 is tested against scripted answers (tests/store/test_gcs_direct.py)"
    )
    test_racing_renames_to_one_destination_move_exactly_one = _known_gap(
        StoreContract.test_racing_renames_to_one_destination_move_exactly_one, _NO_PRECONDITION_ON_REWRITE
    )
    test_hints_never_weaken_a_rename = _known_gap(
        StoreContract.test_hints_never_weaken_a_rename, _NO_PRECONDITION_ON_REWRITE
    )


@pytest.mark.s3
class TestS3Store(
    DeclarationContract,
    ProbeContract,
    ReadWriteContract,
    DirectoryContract,
    DeleteContract,
    BatchContract,
    ErrorContract,
    UploadContract,
):
    """The session's S3 store (a new s3fs client costs about a second), so the close test gets one of its own."""

    @pytest.fixture
    def contract_store(
        self, s3_store: S3Store, s3_bucket: str, request: pytest.FixtureRequest
    ) -> Iterator[OpenedStore]:
        if request.node.name == "test_close_may_be_repeated":
            opened = open_s3_store(f"s3://{s3_bucket}/root")
            yield opened
            opened.store.close()
        else:
            yield OpenedStore(s3_store, f"{s3_bucket}/root")

    _DELETE_ANSWERS_NO_KEY = "S3's DeleteObject answers 204 for a missing key: delete_file cannot tell it was missing"
    test_delete_file_says_whether_anything_was_there = _known_gap(
        DeleteContract.test_delete_file_says_whether_anything_was_there, _DELETE_ANSWERS_NO_KEY
    )
    test_delete_file_below = _known_gap(DeleteContract.test_delete_file_below, _DELETE_ANSWERS_NO_KEY)


class TestFaultInjectingStoreOverLocalDisk(StoreContract):
    """The wrapper without faults passes every call and batch through unchanged; with latency, memory-speed
    calls become batches in flight at once (``concurrent_calls``)."""

    @pytest.fixture
    def contract_store(self, tmp_path: Path) -> Iterator[OpenedStore]:
        (tmp_path / "root").mkdir()
        for opened in _opened(str(tmp_path / "root")):
            yield OpenedStore(FaultInjectingStore(opened.store, latency=0.001), opened.path)


class TestFaultInjectingStoreOverMemory(StoreContract):
    @pytest.fixture
    def contract_store(self) -> Iterator[OpenedStore]:
        clear_memory_filesystem()
        for opened in _opened(f"memory://contract-{uuid.uuid4().hex[:8]}/root"):
            yield OpenedStore(FaultInjectingStore(opened.store), opened.path)
        clear_memory_filesystem()


HONEST_CAPABILITIES = dataclasses.replace(FAULTY_CAPABILITIES, real_directories=False)
"""What fsspec's memory filesystem keeps under a binding of its own: directories exist on their own, but a file
may take a directory's name (``MemoryStore`` refuses that itself), so it declares no ``real_directories``."""


class TestUsersOwnBinding(StoreContract):
    """``faulty://``: a user's fsspec filesystem bound with ``fsspec_store_binding`` in a few lines."""

    @pytest.fixture
    def contract_store(self, store_bindings: StoreBindings) -> Iterator[OpenedStore]:
        FaultyFileSystem.reset()
        mc.register_store_binding(mc.fsspec_store_binding(FaultyFileSystem, HONEST_CAPABILITIES))
        yield from _opened(f"faulty://contract-{uuid.uuid4().hex[:8]}/root")
        FaultyFileSystem.reset()
