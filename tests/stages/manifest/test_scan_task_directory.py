"""ScanTaskDirectoryStage: lists a task attempt's output into file and directory entries."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

from manifest_committer.errors import JobStateError, ManifestError
from manifest_committer.manifest import EntryStatus
from manifest_committer.stages.base import StageContext
from manifest_committer.stages.manifest.scan_task_directory import ScanArguments, ScanResult, ScanTaskDirectoryStage
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    OP_GET_FILE_STATUS,
    OP_LIST_STATUS,
    TASK_STAGE_SCAN_DIRECTORY,
)
from tests.fixtures.stage_context import dest_path, fresh, make_context, set_up_job, task_ids, write_task_output
from tests.fixtures.stores import clear_memory_filesystem, store_changes_the_outcome

TASK_ID, ATTEMPT_ID = task_ids(0)


def prepare(destination: str, files: dict[str, bytes], dirs: tuple[str, ...] = ()) -> StageContext:
    context = make_context(destination)
    set_up_job(context)
    SetupTaskStage(fresh(context)).apply(SetupTaskArguments(TASK_ID, ATTEMPT_ID))
    write_task_output(context, ATTEMPT_ID, files)
    for directory in dirs:
        context.store.mkdirs(f"{context.paths.task_attempt_dir(ATTEMPT_ID)}/{directory}")
    return fresh(context)


def scan(context: StageContext) -> ScanResult:
    return ScanTaskDirectoryStage(context).apply(ScanArguments(ATTEMPT_ID))


def relative(context: StageContext, url: str) -> str:
    prefix = context.store.to_url(context.paths.dest) + "/"
    assert url.startswith(prefix)
    return url[len(prefix) :]


@store_changes_the_outcome  # evidence of a rename from the store's checksums and etags
def test_files_map_to_the_same_relative_path_under_the_destination(destination: str) -> None:
    context = prepare(destination, {"top.csv": b"1", "a/b/c/deep.csv": b"4444", "a/mid.csv": b"22"})
    result = scan(context)
    by_dest = {relative(context, entry.dest): entry for entry in result.files}
    assert sorted(by_dest) == ["a/b/c/deep.csv", "a/mid.csv", "top.csv"]
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    for name, entry in by_dest.items():
        assert entry.source == context.store.to_url(f"{root}/{name}")
        assert entry.size == len(context.store.read_bytes(f"{root}/{name}"))
        status = context.store.info(f"{root}/{name}")
        assert status is not None and entry.etag == status.etag  # the store's etag where it has one


@store_changes_the_outcome  # object stores imply directories from file names
def test_every_directory_with_its_depth_empty_ones_included(destination: str) -> None:
    context = prepare(destination, {"a/b/c/deep.csv": b"x", "z/f.csv": b"y"}, dirs=("empty", "a/hollow/inner"))
    result = scan(context)
    dirs = [(relative(context, entry.dir), entry.level) for entry in result.directories]
    assert dirs == [
        ("a", 1),
        ("empty", 1),
        ("z", 1),
        ("a/b", 2),
        ("a/hollow", 2),
        ("a/b/c", 3),
        ("a/hollow/inner", 3),
    ]
    counters = context.stats.snapshot().counters
    assert counters[COMMITTER_TASK_DIRECTORY_COUNT] == 7
    assert counters[COMMITTER_TASK_DIRECTORY_DEPTH] == 3
    assert counters[COMMITTER_TASK_FILE_COUNT] == 2
    assert counters[COMMITTER_TASK_FILE_SIZE] == 2
    assert counters[OP_LIST_STATUS] == 8, "the root and each of the seven directories is listed once"
    assert counters[TASK_STAGE_SCAN_DIRECTORY] == 1


def test_destination_probe_statuses(destination: str) -> None:
    context = prepare(
        destination,
        {"exists/f": b"1", "isfile/f": b"2", "missing/child/f": b"3", "isfile/under/f": b"4"},
    )
    context.store.mkdirs(dest_path(context, "exists"))
    context.store.write_bytes(dest_path(context, "isfile"), b"a file where the task has a directory")
    result = scan(context)
    statuses = {relative(context, entry.dir): entry.status for entry in result.directories}
    assert statuses == {
        "exists": EntryStatus.DIR,
        "isfile": EntryStatus.FILE,
        "isfile/under": EntryStatus.NOT_FOUND,
        "missing": EntryStatus.NOT_FOUND,
        "missing/child": EntryStatus.NOT_FOUND,
    }
    # Probed: the three level-1 dirs and isfile/under (a file parent counts as existing); missing/child is not.
    assert context.stats.snapshot().counters[OP_GET_FILE_STATUS] == 4


def test_hidden_and_underscore_files_are_committed(destination: str) -> None:
    context = prepare(destination, {".hidden": b"h", "_SUCCESS": b"", "_meta/.crc": b"c"})
    names = sorted(relative(context, entry.dest) for entry in scan(context).files)
    assert names == [".hidden", "_SUCCESS", "_meta/.crc"]


CHECKSUM_FILES = {
    "a/part-0": b"data",
    "a/.part-0.crc": b"crc",
    ".lonely.crc": b"kept: no sibling",
    "a/.x.crc.crc": b"k",
}


def test_checksum_side_files_of_hadoop_are_left_out_on_local_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only Hadoop's local filesystem hides ``.NAME.crc``: on local disk the side file is skipped, and logged."""
    with caplog.at_level(logging.DEBUG, logger="manifest_committer.stages.manifest.scan_task_directory"):
        result = scan(prepare(str(tmp_path / "out"), CHECKSUM_FILES))
    names = sorted(entry.dest.rsplit("/", 1)[-1] for entry in result.files)
    assert names == [".lonely.crc", ".x.crc.crc", "part-0"]
    assert any(".part-0.crc" in record.getMessage() for record in caplog.records if record.levelno == logging.DEBUG)
    assert any("skipped 1 .NAME.crc" in record.getMessage() for record in caplog.records)


def test_checksum_named_files_are_ordinary_files_on_other_stores() -> None:
    """A ``.NAME.crc`` in an object store or memory is a file like any other (was: silently dropped everywhere)."""
    clear_memory_filesystem()
    try:
        result = scan(prepare(f"memory://crc-{uuid.uuid4().hex[:8]}/out", CHECKSUM_FILES))
    finally:
        clear_memory_filesystem()
    names = sorted(entry.dest.rsplit("/", 1)[-1] for entry in result.files)
    assert names == [".lonely.crc", ".part-0.crc", ".x.crc.crc", "part-0"]


@store_changes_the_outcome  # the store's own URLs (Azure's name the account)
def test_names_are_percent_encoded_in_urls(destination: str) -> None:
    context = prepare(destination, {"year=2024/part 0%.csv": b"abc"})
    result = scan(context)
    (entry,) = result.files
    assert entry.dest.endswith("/year=2024/part%200%25.csv")
    assert context.store.from_url(entry.dest) == dest_path(context, "year=2024/part 0%.csv")
    assert context.store.from_url(entry.source).endswith("/year=2024/part 0%.csv")


def test_an_empty_attempt_scans_to_nothing(destination: str) -> None:
    context = prepare(destination, {})
    result = scan(context)
    assert result.files == [] and result.directories == []
    assert context.stats.snapshot().counters[COMMITTER_TASK_FILE_COUNT] == 0


def test_a_missing_attempt_directory_names_the_attempt(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    with pytest.raises(JobStateError) as raised:
        scan(context)
    assert ATTEMPT_ID in str(raised.value)
    assert context.stats.snapshot().counters[TASK_STAGE_SCAN_DIRECTORY + ".failures"] == 1


def test_applied_twice_raises(destination: str) -> None:
    stage = ScanTaskDirectoryStage(prepare(destination, {"f": b"1"}))
    stage.apply(ScanArguments(ATTEMPT_ID))
    with pytest.raises(JobStateError, match="attempted twice"):
        stage.apply(ScanArguments(ATTEMPT_ID))


# --- outputs the writer declares ------------------------------------------------------------------------------------


def scan_declared(context: StageContext, outputs: dict[str, str]) -> ScanResult:
    return ScanTaskDirectoryStage(context).apply(ScanArguments(ATTEMPT_ID, outputs))


def test_declared_outputs_go_where_the_writer_says(destination: str) -> None:
    """Flat files in the attempt directory, committed into partition directories; undeclared files stay out."""
    context = prepare(destination, {"f0.csv": b"1", "f1.csv": b"22", "sub/f2.csv": b"333", "stray.tmp": b"x"})
    context.store.write_bytes(dest_path(context, "dt=1/old.csv"), b"committed earlier")
    outputs = {"f0.csv": "dt=1/a.csv", "f1.csv": "dt=2/country=DE/b.csv", "sub/f2.csv": "top.csv"}
    result = scan_declared(context, outputs)
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    by_dest = {relative(context, entry.dest): entry for entry in result.files}
    assert sorted(by_dest) == ["dt=1/a.csv", "dt=2/country=DE/b.csv", "top.csv"]
    for source, dest in outputs.items():
        assert by_dest[dest].source == context.store.to_url(f"{root}/{source}")
        assert by_dest[dest].size == len(context.store.read_bytes(f"{root}/{source}"))
    directories = {relative(context, entry.dir): (entry.status, entry.level) for entry in result.directories}
    assert directories == {
        "dt=1": (EntryStatus.DIR, 1),
        "dt=2": (EntryStatus.NOT_FOUND, 1),
        "dt=2/country=DE": (EntryStatus.NOT_FOUND, 2),
    }
    counters = context.stats.snapshot().counters
    # sub/f2.csv, alone in its directory, is probed where a probe tells links apart (local disk), not listed; a
    # probe that takes microseconds goes ungated, uncounted.
    capabilities = context.store.capabilities
    alone_probed = 1 if capabilities.symbolic_links else 0
    counted_probe = alone_probed if not capabilities.microsecond_calls else 0
    assert counters[OP_LIST_STATUS] == 2 - alone_probed, "one listing per directory holding declared files"
    assert counters[OP_GET_FILE_STATUS] == 2 + counted_probe, "dt=2/country=DE is not probed: its parent is missing"


def test_declared_outputs_into_many_partitions_list_their_parent_once(destination: str) -> None:
    """A partitioned writer's task declaring files in 20 partition directories: one listing of the destination
    says which exist (a directory, a file in the way, missing), not 20 probes one by one (regression: 10,000
    partitions cost 10,000 serial probes in the task commit)."""
    files = {f"f{index}.csv": b"x" for index in range(20)}
    context = prepare(destination, files)
    context.store.mkdirs(dest_path(context, "p=0"))
    context.store.write_bytes(dest_path(context, "p=1"), b"a file where the task has a directory")
    outputs = {f"f{index}.csv": f"p={index}/part.csv" for index in range(20)}
    outputs["f19.csv"] = "p=0/sub/part.csv"
    result = scan_declared(context, outputs)
    statuses = {relative(context, entry.dir): entry.status for entry in result.directories}
    assert statuses == {
        "p=0": EntryStatus.DIR,
        "p=1": EntryStatus.FILE,
        "p=0/sub": EntryStatus.NOT_FOUND,
        **{f"p={index}": EntryStatus.NOT_FOUND for index in range(2, 19)},
    }
    counters = context.stats.snapshot().counters
    assert counters[OP_GET_FILE_STATUS] == 1, "only p=0/sub, alone under its parent, is probed"
    assert counters[OP_LIST_STATUS] == 2, "the attempt directory and the destination, once each"


def test_no_declared_outputs_is_an_empty_task(destination: str) -> None:
    context = prepare(destination, {"stray.tmp": b"x"})
    result = scan_declared(context, {})
    assert (result.files, result.directories) == ([], [])


def test_a_declared_output_that_is_missing_names_the_file(destination: str) -> None:
    context = prepare(destination, {"f0.csv": b"1"})
    with pytest.raises(JobStateError, match=r"f9\.csv: output of task attempt .* does not exist"):
        scan_declared(context, {"f0.csv": "a.csv", "f9.csv": "b.csv"})


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (
            {"f0.csv": "../escape.csv"},
            r"destination '\.\./escape\.csv' of output 'f0\.csv' has a '\.' or '\.\.' segment",
        ),
        ({"f0.csv": "/abs.csv"}, "destination '/abs.csv' of output 'f0.csv' has an empty path segment"),
        ({"../f0.csv": "a.csv"}, r"output '\.\./f0\.csv' has a '\.' or '\.\.' segment"),
        ({"f0.csv": "a//b.csv"}, "has an empty path segment"),
        ({"f0.csv": "dir/"}, "has an empty path segment"),
        ({"./f0.csv": "a.csv"}, r"output '\./f0\.csv' has a '\.' or '\.\.' segment"),
        ({"f0.csv": "a\x00.csv"}, "holds a NUL character"),
        ({"f0.csv": "_temporary/job/00/manifests/x.json"}, "lies inside the destination's _temporary directory"),
        ({"f0.csv": ""}, "names its root directory itself"),
        ({"f0.csv": "same.csv", "f1.csv": "same.csv"}, "outputs 'f0.csv' and 'f1.csv' both go to 'same.csv'"),
    ],
)
def test_bad_declared_outputs_name_the_task_and_path(destination: str, outputs: dict[str, str], message: str) -> None:
    context = prepare(destination, {"f0.csv": b"1", "f1.csv": b"2"})
    with pytest.raises(ManifestError, match=message) as raised:
        scan_declared(context, outputs)
    assert ATTEMPT_ID in str(raised.value)


def test_declared_outputs_of_a_missing_attempt_directory_name_the_attempt(destination: str) -> None:
    context = make_context(destination)
    set_up_job(context)
    with pytest.raises(JobStateError, match=f"task attempt {ATTEMPT_ID} has no working directory"):
        scan_declared(fresh(context), {"f0.csv": "a.csv"})


def test_declared_relative_paths_compare_in_normal_form(destination: str) -> None:
    """``x.csv`` and ``/x.csv`` were two claims on one file; a non-normal spelling is now refused outright."""
    context = prepare(destination, {"f0.csv": b"1", "f1.csv": b"2"})
    with pytest.raises(ManifestError, match=r"'/x\.csv' of output 'f1\.csv' has an empty path segment"):
        scan_declared(context, {"f0.csv": "x.csv", "f1.csv": "/x.csv"})


# --- what a scanned attempt directory may hold --------------------------------------------------------------------


def test_a_symbolic_link_in_the_attempt_directory_is_refused(tmp_path: Path) -> None:
    """A link was committed as a link: the output pointed outside the destination. Refused, naming the link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.csv").write_bytes(b"not the job's")
    context = prepare(str(tmp_path / "out"), {"dt=1/real.csv": b"1"})
    link = os.path.join(context.paths.task_attempt_dir(ATTEMPT_ID), "dt=1", "link.csv")
    os.symlink(elsewhere / "secret.csv", link)
    with pytest.raises(ManifestError, match="symbolic link") as raised:
        scan(context)
    assert "dt%3D1/link.csv" in str(raised.value) or "dt=1/link.csv" in str(raised.value)
    assert ATTEMPT_ID in str(raised.value)


def test_a_symbolic_link_to_a_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.csv").write_bytes(b"not the job's")
    context = prepare(str(tmp_path / "out"), {"real.csv": b"1"})
    os.symlink(elsewhere, os.path.join(context.paths.task_attempt_dir(ATTEMPT_ID), "linked"))
    with pytest.raises(ManifestError, match="linked: symbolic link"):
        scan(context)
    with pytest.raises(ManifestError, match="linked: symbolic link"):
        scan_declared(fresh(context), {"linked/victim.csv": "victim.csv"})
    assert (elsewhere / "victim.csv").read_bytes() == b"not the job's"


def test_a_link_anywhere_above_a_declared_output_is_refused(tmp_path: Path) -> None:
    """A link one or two directories up from a file declared beside others in real directories: found wherever
    it lies on the way, though each directory on the way is checked once for all the files below it."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "victim.csv").write_bytes(b"not the job's")
    context = prepare(str(tmp_path / "out"), {"a/real/1.csv": b"1", "a/real/2.csv": b"2"})
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    os.symlink(elsewhere, os.path.join(root, "a", "linked"))
    os.symlink(elsewhere, os.path.join(root, "top"))
    real = {"a/real/1.csv": "a/1.csv", "a/real/2.csv": "a/2.csv"}
    with pytest.raises(ManifestError, match="a/linked: symbolic link"):
        scan_declared(context, {**real, "a/linked/sub/victim.csv": "a/3.csv"})
    with pytest.raises(ManifestError, match="top: symbolic link"):
        scan_declared(fresh(context), {**real, "top/sub/victim.csv": "a/3.csv"})
    assert (elsewhere / "sub" / "victim.csv").read_bytes() == b"not the job's"


def test_a_declared_output_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    context = prepare(str(tmp_path / "out"), {"real.csv": b"1"})
    os.symlink(tmp_path / "anything", os.path.join(context.paths.task_attempt_dir(ATTEMPT_ID), "link.csv"))
    with pytest.raises(ManifestError, match=r"link\.csv: symbolic link"):
        scan_declared(context, {"real.csv": "a.csv", "link.csv": "b.csv"})


def test_a_declared_output_alone_in_its_directory_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    """A file alone in its directory is probed, not listed: the probe tells the link apart as the listing does,
    whether it points at a file or nowhere."""
    elsewhere = tmp_path / "secret.csv"
    elsewhere.write_bytes(b"not the job's")
    context = prepare(str(tmp_path / "out"), {"dt=1/real.csv": b"1"})
    root = context.paths.task_attempt_dir(ATTEMPT_ID)
    os.mkdir(os.path.join(root, "dt=2"))
    os.symlink(elsewhere, os.path.join(root, "dt=2", "link.csv"))
    os.mkdir(os.path.join(root, "dt=3"))
    os.symlink(tmp_path / "nothing", os.path.join(root, "dt=3", "dangling.csv"))
    with pytest.raises(ManifestError, match=r"dt=2/link\.csv: symbolic link"):
        scan_declared(context, {"dt=1/real.csv": "dt=1/a.csv", "dt=2/link.csv": "dt=2/b.csv"})
    with pytest.raises(ManifestError, match=r"dt=3/dangling\.csv: symbolic link"):
        scan_declared(fresh(context), {"dt=1/real.csv": "dt=1/a.csv", "dt=3/dangling.csv": "dt=3/c.csv"})


def test_an_attempt_directory_holding_temporary_fails_at_task_commit(destination: str) -> None:
    """A top-level ``_temporary`` would be committed into the job's own state: refused here, not at job commit."""
    context = prepare(destination, {"_temporary/x.csv": b"1", "ok.csv": b"2"})
    with pytest.raises(ManifestError, match="lies inside the destination's _temporary directory") as raised:
        scan(context)
    assert ATTEMPT_ID in str(raised.value)
