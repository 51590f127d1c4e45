"""DuplicateHashes: hashes seen more than once, found in bounded memory through sorted spilled runs."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from manifest_committer.duplicates import DuplicateHashes
from manifest_committer.entry_file import find_spill_files, spill_prefix


def spill_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".hashes"))


@pytest.mark.parametrize(("run_size", "fan_in"), [(1 << 17, 64), (7, 64), (7, 3), (1, 2)])
def test_finds_exactly_the_repeated_hashes(tmp_path: Path, run_size: int, fan_in: int) -> None:
    """In memory, spilled in runs, and merged in several passes: the same answer."""
    chooser = random.Random(run_size * 100 + fan_in)
    values = [chooser.randrange(-(1 << 63), 1 << 63) for _ in range(500)]
    repeated = sorted({values[3], values[100], values[499], -(1 << 63), (1 << 63) - 1})
    stream = values + [values[3], values[100], values[100], values[499], -(1 << 63), -(1 << 63), (1 << 63) - 1] * 2
    chooser.shuffle(stream)
    with DuplicateHashes(str(tmp_path), run_size=run_size, fan_in=fan_in) as hashes:
        hashes.add_all(stream)
        assert list(hashes.candidates()) == repeated
        assert list(hashes.candidates()) == repeated, "asking twice gives the same answer"
        assert len(spill_files(tmp_path)) == (0 if run_size > len(stream) else 1), "one spill file for all runs"
    assert spill_files(tmp_path) == [], "closing removes the spill file"


def test_no_repeats_no_candidates(tmp_path: Path) -> None:
    with DuplicateHashes(str(tmp_path), run_size=10) as hashes:
        hashes.add_all(hash(f"dest/{n}") for n in range(1000))
        assert list(hashes.candidates()) == []


def test_memory_is_one_run_not_one_entry_per_hash(tmp_path: Path) -> None:
    """The in-memory run never exceeds ``run_size``; everything else is on disk."""
    hashes = DuplicateHashes(str(tmp_path), run_size=1000)
    try:
        for n in range(10_500):
            hashes.add(n)
            assert len(hashes._current) < 1000
        (spilled,) = spill_files(tmp_path)
        assert os.path.getsize(tmp_path / spilled) == 10_000 * 8
    finally:
        hashes.close()
        hashes.close()


def test_adding_many_at_once_spills_the_same_runs(tmp_path: Path) -> None:
    """``add_all`` (one manifest's hashes at once) keeps the run bounded and spills what ``add`` would."""
    one, many = tmp_path / "one", tmp_path / "many"
    one.mkdir()
    many.mkdir()
    with DuplicateHashes(str(one), run_size=1000) as singly, DuplicateHashes(str(many), run_size=1000) as at_once:
        for n in range(10_500):
            singly.add(n % 7_000)
        values = [n % 7_000 for n in range(10_500)]
        for start, end in [(0, 10), (10, 2_500), (2_500, 2_501), (2_501, 9_000), (9_000, 10_500)]:
            at_once.add_all(values[start:end])
            assert len(at_once._current) < 1000
        assert at_once._runs == singly._runs
        assert list(at_once.candidates()) == list(singly.candidates()) == list(range(3_500))


def test_the_hash_spill_is_named_for_its_job_and_process(tmp_path: Path) -> None:
    """A killed job commit's hash runs must be found by the next run's sweep, like its entry file."""
    with DuplicateHashes(str(tmp_path), run_size=2, prefix=spill_prefix("job-9")) as hashes:
        for value in range(5):
            hashes.add(value)
        (name,) = os.listdir(tmp_path)
        assert name.startswith(f"manifest-committer-job-9-{os.getpid()}-")
        assert [found.job_id for found in find_spill_files(str(tmp_path))] == ["job-9"]
    assert os.listdir(tmp_path) == []
