"""``mc.rollback`` against what breaks it: a job whose state cannot be read among dead jobs, a crafted marker, a
driver paused by SIGSTOP (a real child process), and the lease that tells a paused driver from a dead one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import transaction_id
from tests.fixtures.committing import run_task


def config(**overrides: Any) -> mc.CommitterConfig:
    return mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, **overrides)


@pytest.fixture
def dest(tmp_path: Path) -> str:
    out = tmp_path / "out"
    out.mkdir()
    return str(out)


def dead_job(dest: str, committers: list[TransactionalCommitter], job_id: str, markers: str = "batched") -> str:
    """A job whose driver died after one task wrote ``<job_id>.csv``; returns the file's name."""
    committer = mc.create_committer(
        dest, job_id, "transactional", config=config(markers_type=markers, heartbeat_expiry_seconds=0.2)
    )
    assert isinstance(committer, TransactionalCommitter)
    committers.append(committer)
    committer.setup_job()
    run_task(committer, "task_0", "attempt_0", {f"{job_id}.csv": job_id.encode()})
    if committer.marker_server is not None:
        committer.marker_server.stop(flush=False)
    committer.close()
    (name,) = [p.name for p in Path(dest).iterdir() if p.name.startswith(f"{job_id}-tid-")]
    return name


def test_rollback_treats_each_dead_job_on_its_own(dest: str, committers: list[TransactionalCommitter]) -> None:
    """Found: ``rollback(url)`` stopped at the first job whose markers held one crafted entry."""
    crafted = dead_job(dest, committers, "a-crafted")
    broken = dead_job(dest, committers, "b-broken", markers="direct")
    plain = dead_job(dest, committers, "c-plain")
    crafted_markers = Path(dest, "_temporary", "a-crafted", "00", "markers")
    with open(crafted_markers / "MARKERS19", "ab") as handle:
        handle.write(b"../../etc/passwd.marker.CREATE\n")
    broken_markers = Path(dest, "_temporary", "b-broken", "00", "markers")
    for child in broken_markers.iterdir():
        child.unlink()
    broken_markers.rmdir()
    broken_markers.write_bytes(b"not a directory")  # its state cannot be read at all
    time.sleep(0.3)

    rolled = {job.job_id: job for job in mc.rollback(dest)}

    assert set(rolled) == {"a-crafted", "b-broken", "c-plain"}
    assert rolled["a-crafted"].error is None and len(rolled["a-crafted"].skipped) == 1
    assert rolled["b-broken"].error is not None and "b-broken" in rolled["b-broken"].error
    assert rolled["c-plain"].error is None and len(rolled["c-plain"].deleted) == 1
    assert not Path(dest, crafted).exists() and not Path(dest, plain).exists()
    assert Path(dest, broken).exists(), "the job that could not be rolled back keeps its file, and says so"


def test_the_command_line_reports_what_it_rolled_back_and_fails_for_the_job_it_could_not(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest, committers, "a-broken")
    plain = dead_job(dest, committers, "b-plain")
    broken_markers = Path(dest, "_temporary", "a-broken", "00", "markers")
    with open(broken_markers / "MARKERS19", "ab") as handle:
        handle.write(b"/etc/passwd.marker.CREATE\n")
    (broken_markers / "heartbeat").write_bytes(b"not a lease")
    time.sleep(0.3)

    status = main(["rollback", dest])

    out, err = capsys.readouterr()
    assert status == 1
    assert out.startswith(f"Rolled back 1 job attempt(s) of file://{dest}: 1 data files deleted")
    assert f"file://{dest}/{plain}" in out
    assert "Job a-broken (attempt 00): NOT rolled back: job a-broken attempt 00: " in out
    assert err.endswith(
        "error: rollback of file://" + dest + ": 1 job attempt(s) not rolled back: a-broken (attempt 00)\n"
    )


DRIVER = """
import sys, manifest_committer as mc
destination, expiry = sys.argv[1], float(sys.argv[2])
config = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, heartbeat_expiry_seconds=expiry)
committer = mc.create_committer(destination, "paused", "transactional", config=config)
committer.setup_job()
task = committer.setup_task("task_0", "attempt_0")
with task.fs.open(task.work_path + "/a.csv", "wb") as handle:
    handle.write(b"written before the pause")
committer.commit_task(task)
print("ready", flush=True)
sys.stdin.readline()
committer.commit_job()
committer.close()
print("committed", flush=True)
"""


@pytest.fixture
def driver(dest: str) -> Iterator[Any]:
    """Starts a driver process (``DRIVER``) with a lease of the given seconds; kills what is left at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(expiry: float) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, dest, str(expiry)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        process.wait(10)


def test_a_paused_driver_is_not_rolled_back_while_its_lease_is_fresh(dest: str, driver: Any) -> None:
    """Suspected: a driver paused longer than the 2 s ping was declared dead by ``rollback(url)``."""
    process = driver(30.0)
    os.kill(process.pid, signal.SIGSTOP)
    try:
        rolled = mc.rollback(dest)
    finally:
        os.kill(process.pid, signal.SIGCONT)

    assert rolled == []
    process.stdin.write("commit\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "committed"
    assert process.wait(30) == 0
    (committed,) = mc.committed_files(dest)
    assert Path(committed.removeprefix("file://")).read_bytes() == b"written before the pause"


def test_a_driver_paused_past_its_lease_is_rolled_back(dest: str, driver: Any) -> None:
    process = driver(0.5)
    os.kill(process.pid, signal.SIGSTOP)
    time.sleep(0.7)

    (rolled,) = mc.rollback(dest)

    assert rolled.job_id == "paused" and len(rolled.deleted) == 1
    assert not any(p.name.startswith("a-tid-") for p in Path(dest).iterdir())
    assert not Path(dest, f"_committed_{transaction_id('paused')}").exists()
