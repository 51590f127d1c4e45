"""Ctrl-C during ``manifest-committer commit``: one line saying what moved and what settles the job, status 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import manifest_committer as mc
from tests.fixtures.committing import FAST, run_task

FILES = 40
SLOW_COMMIT = """
import sys, time
from manifest_committer.store.local import LocalStore
rename = LocalStore.rename_file
def slow_rename(self, source, dest):
    time.sleep(0.1)
    rename(self, source, dest)
LocalStore.rename_file = slow_rename
from manifest_committer.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""The command line, its renames slowed so that a signal arrives while it moves files."""


def test_ctrl_c_says_what_moved_and_how_to_settle_the_job(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    committer = mc.ManifestCommitter(str(dest), "job-int", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {f"f{n:03d}.csv": b"x" for n in range(FILES)})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = ["commit", str(dest), "--job", "job-int", "--conf", "io.threads=1"]
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_COMMIT, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 60
    while not list(dest.glob("f*.csv")) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)

    assert process.returncode == 130, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    moved = len(list(dest.glob("f*.csv")))
    assert 0 < moved < FILES
    assert lines[0].startswith("manifest-committer: interrupted: the commit of job job-int stopped after moving ")
    assert f"of {FILES} files into the destination" in lines[0]
    assert f"`manifest-committer commit {dest} --job job-int` finishes it" in lines[0]
    assert f"`manifest-committer abort {dest} --job job-int` undoes it" in lines[0]

    finished = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", *argv], capture_output=True, text=True, env=env, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert len(list(dest.glob("f*.csv"))) == FILES
