"""EntryFile: the local spill file of files to commit, appended once and read back any number of times."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from manifest_committer.entry_file import (
    EntryFile,
    FilesToCommit,
    FileToCommit,
    find_spill_files,
    remove_dead_spill_files,
)


def rows(prefix: str, count: int, etag: str | None = None) -> list[FileToCommit]:
    return [
        FileToCommit(f"/src/{prefix}{n}", f"/dest/{prefix}{n}", n, etag, f"file:///dest/{prefix}{n}")
        for n in range(count)
    ]


def test_chunks_round_trip(tmp_path: Path) -> None:
    first = rows("a", 3, etag="0x8DD")
    second = [FileToCommit("/src/ü d", "/dest/ü d", 7, None, "file:///dest/ü%20d")]
    with EntryFile(str(tmp_path)) as entry_file:
        assert Path(entry_file.path).parent == tmp_path
        entry_file.append("attempt_0", FilesToCommit.of_rows(first))
        entry_file.append("attempt_1", FilesToCommit.of_rows(second))
        entry_file.append("attempt_2", FilesToCommit.of_rows([]))
        chunks = list(entry_file.chunks())
        assert [c.task_attempt_id for c in chunks] == ["attempt_0", "attempt_1", "attempt_2"]
        assert chunks[0].rows == first
        assert chunks[1].rows == second
        assert chunks[2].rows == []
        assert all(isinstance(row, tuple) for chunk in chunks for row in chunk.rows)
        assert list(entry_file.chunks()) == chunks, "readable again"
        assert entry_file.file_count == 4
        assert entry_file.total_size == 0 + 1 + 2 + 7


def test_batches_regroup_rows_in_order() -> None:
    with EntryFile() as entry_file:
        entry_file.append("a", FilesToCommit.of_rows(rows("a", 4)))
        entry_file.append("b", FilesToCommit.of_rows(rows("b", 2)))
        entry_file.append("c", FilesToCommit.of_rows(rows("c", 1)))
        batches = list(entry_file.batches(3))
        assert [len(batch) for batch in batches] == [3, 3, 1]
        flat = [row for batch in batches for row in batch]
        assert flat == rows("a", 4) + rows("b", 2) + rows("c", 1)
        assert [len(b) for b in entry_file.batches(100)] == [7]
        assert [len(b) for b in entry_file.batches(1)] == [1] * 7


def test_an_empty_file_has_no_batches() -> None:
    with EntryFile() as entry_file:
        assert list(entry_file.chunks()) == []
        assert list(entry_file.batches(5)) == []
        assert (entry_file.file_count, entry_file.total_size) == (0, 0)


def test_close_removes_the_file_and_is_idempotent() -> None:
    entry_file = EntryFile()
    entry_file.append("a", FilesToCommit.of_rows(rows("a", 2)))
    path = entry_file.path
    assert os.path.isfile(path)
    entry_file.close()
    assert not os.path.exists(path)
    entry_file.close()


def test_appending_after_reading_continues_the_file() -> None:
    with EntryFile() as entry_file:
        entry_file.append("a", FilesToCommit.of_rows(rows("a", 1)))
        assert len(list(entry_file.chunks())) == 1
        entry_file.append("b", FilesToCommit.of_rows(rows("b", 1)))
        assert [c.task_attempt_id for c in entry_file.chunks()] == ["a", "b"]


def test_units_follow_task_attempt_order_whatever_the_load_order() -> None:
    """Unit keys must not depend on the order manifests were loaded in (parallel loads finish in any order)."""
    keys = []
    for order in (["attempt_b", "attempt_a", "attempt_c"], ["attempt_c", "attempt_a", "attempt_b"]):
        with EntryFile() as entry_file:
            for attempt in order:
                entry_file.append(
                    attempt,
                    FilesToCommit.of_rows(rows(attempt, {"attempt_a": 5, "attempt_b": 2, "attempt_c": 1}[attempt])),
                )
            units = list(entry_file.units(3))
        keys.append([(unit.key, [row.dest for row in unit.rows]) for unit in units])
    assert keys[0] == keys[1]
    assert [(key, len(dests)) for key, dests in keys[0]] == [("attempt_a-0", 3), ("attempt_a-3", 3), ("attempt_b-1", 2)]
    assert keys[0][1][1] == ["/dest/attempt_a3", "/dest/attempt_a4", "/dest/attempt_b0"], "small tasks share units"


def test_a_spill_file_is_named_after_its_job_and_process(tmp_path: Path) -> None:
    with EntryFile(str(tmp_path), "job-7") as entry_file:
        name = os.path.basename(entry_file.path)
    assert name.startswith(f"manifest-committer-job-7-{os.getpid()}-") and name.endswith(".entries")


def dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_spill_files_of_dead_processes_are_removed_and_no_others(tmp_path: Path) -> None:
    """Issue 8: a killed job commit left its spill file in the temp directory for ever."""
    dead = dead_pid()
    names = {
        "dead": f"manifest-committer-job-7-{dead}-abc_123.entries",
        "dead hashes": f"manifest-committer-job-7-{dead}-k1_x.hashes",  # the duplicate check's spill
        "live": f"manifest-committer-job-7-{os.getpid()}-abc_123.entries",
        "other job": f"manifest-committer-job-7-1-{dead}-abc_123.entries",  # job "job-7-1", not "job-7"
        "not ours": f"other-job-7-{dead}-abc.entries",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    removed = remove_dead_spill_files(str(tmp_path), "job-7")
    assert sorted(removed) == sorted(str(tmp_path / names[key]) for key in ("dead", "dead hashes"))
    assert sorted(os.listdir(tmp_path)) == sorted(name for key, name in names.items() if not key.startswith("dead"))


def test_find_spill_files_tells_dead_processes_from_live_ones(tmp_path: Path) -> None:
    with EntryFile(str(tmp_path), "job-a-1") as live:
        live.append("attempt_1", FilesToCommit.of_rows([]))
        dead = tmp_path / "manifest-committer-job-a-1-999999999-abc.entries"
        dead.write_bytes(b"12345")
        (tmp_path / "unrelated.entries").write_bytes(b"")
        found = find_spill_files(str(tmp_path))
        assert sorted((f.job_id, f.alive) for f in found) == [("job-a-1", False), ("job-a-1", True)]
        by_path = {f.path: f for f in found}
        assert by_path[str(dead)].pid == 999999999
        assert by_path[str(dead)].size == 5
        assert by_path[live.path].alive
        assert dead.exists(), "read only"
