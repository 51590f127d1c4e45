"""What a person meets first on the command line: ``--version``, and ``status`` of a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.cli import main


def test_version_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"manifest-committer {mc.__version__}\n", "")


@pytest.mark.parametrize("command", [["status"], ["commit", "--job", "j1"], ["abort", "--job", "j1"]])
def test_a_file_is_not_a_destination(tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "part-00000.parquet"
    path.write_bytes(b"PAR1")
    assert main([command[0], str(path), *command[1:]]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err
        == f"manifest-committer: error: file://{path}: a file, not a destination (a directory that jobs write into)\n"
    )
    assert path.read_bytes() == b"PAR1"
