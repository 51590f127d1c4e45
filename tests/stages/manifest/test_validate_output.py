"""ValidateOutputStage: every committed file must be a file of the manifest's size (and etag, if kept)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from manifest_committer.entry_file import EntryFile, FilesToCommit, FileToCommit
from manifest_committer.errors import JobStateError, OutputValidationError
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.validate_output import ValidateOutputArguments, ValidateOutputStage
from manifest_committer.statistic_names import JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT, OP_GET_FILE_STATUS
from manifest_committer.store import FileStatus, StoreCapabilities, StoreOperations
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.stage_context import dest_path, make_context
from tests.fixtures.stores import store_changes_the_outcome


@pytest.fixture
def spill() -> Iterator[EntryFile]:
    with EntryFile() as entry_file:
        yield entry_file


def committed(
    context: StageContext, spill: EntryFile, files: dict[str, bytes], etag: str | None = None
) -> list[FileToCommit]:
    """Files already in the destination, and their spilled rows."""
    rows: list[FileToCommit] = []
    for name, data in files.items():
        dest = dest_path(context, name)
        context.store.write_bytes(dest, data)
        rows.append(FileToCommit(f"/nowhere/{name}", dest, len(data), etag, context.store.to_url(dest)))
    spill.append("attempt", FilesToCommit.of_rows(rows))
    return rows


def validate(context: StageContext, spill: EntryFile) -> int:
    return ValidateOutputStage(context).apply(ValidateOutputArguments(spill)).files_validated


def test_good_output_validates(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    committed(context, spill, {f"d/f{n}": b"x" * n for n in range(12)})
    with ThreadPoolExecutor(3) as pool:
        context.pool = pool
        assert validate(context, spill) == 12
    counters = context.stats.snapshot().counters
    assert counters[OP_GET_FILE_STATUS] == 12
    assert counters[JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT] == 1


def test_a_missing_file_fails_naming_it(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    rows = committed(context, spill, {"a": b"1", "b": b"2"})
    context.store.delete_file(rows[1][1])
    with pytest.raises(OutputValidationError, match="nothing is there") as raised:
        validate(context, spill)
    assert rows[1][4] in str(raised.value)
    assert context.stats.snapshot().counters[JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT + ".failures"] == 1


@store_changes_the_outcome  # object stores imply directories from file names
def test_a_directory_fails(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    (row,) = committed(context, spill, {"f": b"1"})
    context.store.delete_file(row[1])
    context.store.write_bytes(row[1] + "/inside", b"1")
    with pytest.raises(OutputValidationError, match="found a directory"):
        validate(context, spill)


def test_a_wrong_size_fails(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    (row,) = committed(context, spill, {"f": b"1234"})
    context.store.delete_file(row[1])
    context.store.write_bytes(row[1], b"12345678")
    with pytest.raises(OutputValidationError, match="length 4 but found one of length 8"):
        validate(context, spill)


class EtagStore(WrappingStore):
    """A store that keeps etags through renames, reporting one etag for every file."""

    def __init__(self, inner: StoreOperations, etag: str) -> None:
        super().__init__(inner)
        self.capabilities = StoreCapabilities(atomic_rename=True, etags_preserved_in_rename=True, real_directories=True)
        self.etag = etag

    def info(self, path: str) -> FileStatus | None:
        status = self.inner.info(path)
        return None if status is None else replace(status, etag=self.etag)


@pytest.mark.parametrize(("store_etag", "fails"), [("etag-1", False), ("etag-2", True)])
def test_etags_are_compared_where_the_store_keeps_them(
    destination: str, spill: EntryFile, store_etag: str, fails: bool
) -> None:
    context = make_context(destination)
    committed(context, spill, {"f": b"1"}, etag="etag-1")
    context.store = EtagStore(context.store, store_etag)
    if fails:
        with pytest.raises(OutputValidationError, match="etag 'etag-2' differs"):
            validate(context, spill)
    else:
        assert validate(context, spill) == 1


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_etags_are_ignored_where_the_store_does_not_keep_them(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    committed(context, spill, {"f": b"1"}, etag="from-the-listing")
    assert not context.store.capabilities.etags_preserved_in_rename
    assert validate(context, spill) == 1


def test_validation_changes_nothing(destination: str, spill: EntryFile) -> None:
    context = make_context(destination)
    rows = committed(context, spill, {"a": b"1", "b/c": b"22"})
    validate(context, spill)
    assert [context.store.read_bytes(row[1]) for row in rows] == [b"1", b"22"]


def test_applied_twice_raises(destination: str, spill: EntryFile) -> None:
    stage = ValidateOutputStage(make_context(destination))
    stage.apply(ValidateOutputArguments(spill))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(ValidateOutputArguments(spill))
