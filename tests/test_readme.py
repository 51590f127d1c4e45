"""The README works as pasted: its Python blocks run, its install commands install from a clone, its set-up
commands are the two the scripts provide."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)


def test_the_readme_has_python_to_run() -> None:
    assert PYTHON_BLOCKS, "no ```python block found in README.md"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"block-{i}" for i in range(len(PYTHON_BLOCKS))])
def test_each_python_block_runs_as_pasted(block: str, tmp_path: Path) -> None:
    """In a fresh interpreter, in an empty directory, with nothing defined beforehand."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def test_the_use_example_commits_its_file(tmp_path: Path) -> None:
    (block,) = [b for b in PYTHON_BLOCKS if "commit_job()" in b]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    success, filenames = result.stdout.strip().split(" ", 1)
    assert success == "True"
    assert filenames.endswith("/events/dt=2026-11-22/part-0.csv']")
    (written,) = tmp_path.rglob("part-0.csv")
    assert written.read_bytes() == b"id,amount\n1,9.50\n"


def test_every_pip_install_installs_from_a_clone() -> None:
    """The package is not on PyPI: ``pip install 'manifest-committer[spark]'`` would fail."""
    commands = re.findall(r"pip install [^`\n]*", README)
    assert commands
    for command in commands:
        assert re.fullmatch(r"pip install (-e )?'\.\[[a-z,]+\]'", command), command


def test_the_two_set_up_commands_are_unchanged() -> None:
    for line in (
        "bash scripts/run-example.sh   # a PySpark job: 3M rows into ./example-output/spark-events, read back, "
        "_SUCCESS summary",
        "bash scripts/run-tests.sh     # installs the dev tools, then: ruff format --check, ruff check, mypy "
        "--strict, pytest",
    ):
        assert line in README.splitlines()


def test_java_is_named_for_the_main_command_too() -> None:
    setup = " ".join(README[README.index("## Two commands") : README.index("## Use")].split())
    assert "Java 17 (for both: the example is a Spark job;" in setup
