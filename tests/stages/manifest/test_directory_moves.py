"""A job commit on local disk moves a task's directory of one file into the destination whole, instead of making
the directory and renaming the file into it; whatever does not qualify is renamed file by file, with the same
result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import pytest

import manifest_committer as mc
from manifest_committer.entry_file import EntryChunk, FileToCommit
from manifest_committer.manifest import EntryStatus
from manifest_committer.paths import JobPaths
from manifest_committer.stages.manifest.directory_moves import movable_directories
from manifest_committer.stages.manifest.job_types import TargetDirectory
from manifest_committer.statistic_names import COMMIT_FILE_RENAME_RECOVERED, COMMITTER_DIRECTORIES_MOVED, STORE_IO_RETRY
from manifest_committer.store.faults import Fault
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.committing import FAST, FaultCapture, output, run_task, success_file

MOVED = COMMITTER_DIRECTORIES_MOVED


def _moved(committer: mc.ManifestCommitter) -> int:
    return success_file(committer).iostatistics.counters.get(MOVED, 0)


def test_each_directory_of_one_file_arrives_whole_and_the_output_is_byte_for_byte(tmp_path: Path) -> None:
    files = {
        f"day={day}/hour={hour}/part-{day}-{hour}.csv": f"{day}:{hour}\n".encode() * 7
        for day in range(3)
        for hour in range(4)
    }
    with mc.ManifestCommitter(str(tmp_path / "out"), "job-moves", config=FAST) as committer:
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", dict(list(files.items())[:6]))
        run_task(committer, "task_00001", "attempt_00001_0", dict(list(files.items())[6:]))
        committer.commit_job()
        assert output(committer) == files
        assert _moved(committer) == len(files)
        assert success_file(committer).iostatistics.counters["committer_files_committed"] == len(files)
    assert not (tmp_path / "out" / "_temporary").exists()


def test_what_does_not_qualify_is_renamed_file_by_file(tmp_path: Path) -> None:
    """Two tasks' files in one directory, a directory already at the destination, a source directory holding a
    file the task did not commit (a hidden checksum file): renamed one by one; the rest still moved whole."""
    destination = tmp_path / "out"
    (destination / "existing").mkdir(parents=True)
    (destination / "existing" / "theirs.csv").write_bytes(b"a user's file\n")
    with mc.ManifestCommitter(str(destination), "job-mixed", config=FAST) as committer:
        committer.setup_job()
        first = {"shared/a.csv": b"a", "existing/b.csv": b"b", "alone/c.csv": b"c", "crc/d.csv": b"d"}
        task = run_task(committer, "task_00000", "attempt_00000_0", first, commit=False)
        Path(task.work_path, "crc", ".d.csv.crc").write_bytes(b"checksum")  # skipped by the task's scan
        committer.commit_task(task)
        run_task(committer, "task_00001", "attempt_00001_0", {"shared/e.csv": b"e"})
        committer.commit_job()
        assert output(committer) == {**first, "shared/e.csv": b"e", "existing/theirs.csv": b"a user's file\n"}
        assert _moved(committer) == 1, "only alone/ qualifies"
    assert not (destination / "crc" / ".d.csv.crc").exists(), "the checksum file stayed behind, and was cleaned up"


class _TakenFirst(WrappingStore):
    """Makes the destination's ``p=1`` (empty, as another writer's) just before the job moves a directory there."""

    def rename_dir(self, source: str, dest: str) -> None:
        if dest.endswith("/p=1"):
            os.mkdir(dest)
        super().rename_dir(source, dest)


def test_a_directory_taken_after_the_probe_gets_the_file_renamed_into_it(tmp_path: Path) -> None:
    """The move is refused (never onto anything, an empty directory included) and the file is renamed into the
    directory found there."""
    destination = tmp_path / "out"
    with mc.ManifestCommitter(str(destination), "job-race", config=FAST, store_wrapper=_TakenFirst) as committer:
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", {"p=1/a.csv": b"a", "p=2/b.csv": b"b"})
        committer.commit_job()
        assert output(committer) == {"p=1/a.csv": b"a", "p=2/b.csv": b"b"}
        assert _moved(committer) == 1


def test_a_source_directory_replaced_by_a_link_is_never_moved_in(tmp_path: Path) -> None:
    """After task commit someone puts a link where the task's directory was: the job commit does not move the
    link into the destination (a directory there pointing anywhere); it renames the file as any other."""
    destination, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.csv").write_bytes(b"a")
    with mc.ManifestCommitter(str(destination), "job-link", config=FAST) as committer:
        committer.setup_job()
        task = run_task(committer, "task_00000", "attempt_00000_0", {"p=1/a.csv": b"a", "p=2/b.csv": b"b"})
        source = Path(task.work_path, "p=1")
        (source / "a.csv").unlink()
        source.rmdir()
        source.symlink_to(elsewhere, target_is_directory=True)
        committer.commit_job()
        assert (destination / "p=1").is_dir() and not (destination / "p=1").is_symlink()
        assert _moved(committer) == 1, "p=2 only"


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_move_that_fails_transiently_is_settled_as_a_rename_of_its_file(
    tmp_path: Path, when: Literal["before", "after"]
) -> None:
    """A timeout of the move, before it took effect or after: retried by the committer's policy, or recognised
    as done from the evidence (the file at its destination, the source gone)."""
    fault = Fault("rename_dir", "p=1", error=TimeoutError, times=1, when=when)
    capture = FaultCapture([fault])
    with mc.ManifestCommitter(str(tmp_path / "out"), "job-retry", config=FAST, store_wrapper=capture) as committer:
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", {"p=1/a.csv": b"a", "p=2/b.csv": b"b"})
        committer.commit_job()
        assert capture.injecting.injected["rename_dir"] == 1
        assert output(committer) == {"p=1/a.csv": b"a", "p=2/b.csv": b"b"}
        counters = success_file(committer).iostatistics.counters
        assert counters[STORE_IO_RETRY] >= 1
        assert counters.get(COMMIT_FILE_RENAME_RECOVERED, 0) == (1 if when == "after" else 0)


def _row(source: str, dest: str) -> FileToCommit:
    return FileToCommit(source, dest, 1, None, "file://" + dest)


def test_the_plan_takes_only_leaves_of_one_file_from_a_directory_of_their_own() -> None:
    paths = JobPaths("/d/out", "job-plan", 0)
    attempt = paths.task_attempt_dir("attempt_00000_0")
    other = paths.task_attempt_dir("attempt_00001_0")
    rows = [
        _row(f"{attempt}/a/x.csv", "/d/out/a/x.csv"),  # qualifies
        _row(f"{attempt}/b/x.csv", "/d/out/b/y.csv"),  # renamed on the way: no
        _row(f"{attempt}/c/x.csv", "/d/out/c/x.csv"),  # two files into c/: no
        _row(f"{other}/c/z.csv", "/d/out/c/z.csv"),
        _row(f"{attempt}/e/1.csv", "/d/out/e/1.csv"),  # e/ holds two files going to different places: no
        _row(f"{attempt}/e/2.csv", "/d/out/f/2.csv"),
        _row(f"{attempt}/top.csv", "/d/out/g/top.csv"),  # the attempt's directory itself: no
        _row(f"{attempt}/h/i/x.csv", "/d/out/h/x.csv"),  # h/ has the job's directory h/j below it: no
        _row(f"{attempt}/h/j/x.csv", "/d/out/h/j/x.csv"),  # qualifies (a leaf)
        _row(f"{attempt}/k.csv", "/d/out/k.csv"),  # at the destination's top: no
    ]
    chunks = [EntryChunk("attempt_00000_0", [row for row in rows if row.source.startswith(attempt)])]
    chunks.append(EntryChunk("attempt_00001_0", [row for row in rows if row.source.startswith(other)]))
    directories = [
        TargetDirectory(path, path.count("/") - 2, EntryStatus.NOT_FOUND)
        for path in ("/d/out/a", "/d/out/b", "/d/out/c", "/d/out/e", "/d/out/f", "/d/out/g", "/d/out/h", "/d/out/h/j")
    ]
    assert movable_directories(chunks, len(rows), directories, paths) == {"/d/out/a", "/d/out/h/j"}
