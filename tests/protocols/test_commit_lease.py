"""A job is never judged dead while it commits (contract section 4): real driver processes whose job commit is
held up past the lease's expiry by a slow store, and a ``manifest-committer rollback`` and ``vacuum`` run from
other processes meanwhile, under ``transactional`` (direct and batched markers) and ``upload`` (S3 on moto).

Found: the commit stopped the lease (and the marker server) before it began, so once the expiry had passed the
job looked dead: a rollback during the commit deleted every committed file after ``commit_job`` returned
success (direct markers), or made the commit fail with a bare ``FileNotFoundError`` (batched), or undid the
upload job's commit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

import manifest_committer as mc
from manifest_committer.protocols.transactional.records import transaction_id
from tests.fixtures.emulators import Emulator

JOB = "slow-job"
EXPIRY = 1.0
"""The lease's expiry, seconds: the commit is held up longer than it."""
FILES = {f"task_{task}": {f"dt={task}/part-{n}.csv": f"task {task} file {n}\n" for n in range(4)} for task in (0, 1)}
USERS = b"a file of the user's\n"

DRIVER = """
import json, sys
import manifest_committer as mc
from manifest_committer.store.wrapping import WrappingStore

spec = json.loads(sys.argv[1])


class SlowStore(WrappingStore):
    '''Once armed, the write of the commit point takes until the test says go on (a line on stdin).'''

    armed = False

    def around(self, operation, path, call):
        if self.armed and operation == "write_bytes" and path.endswith("/" + spec["slow"]):
            SlowStore.armed = False
            print("slow", flush=True)
            sys.stdin.readline()
        return call()


conf = {
    "mapreduce.manifest.committer.markers.type": spec["markers"],
    "mapreduce.manifest.committer.heartbeat.expiry.seconds": str(spec["expiry"]),
}
committer = mc.create_committer(
    spec["destination"],
    spec["job"],
    spec["protocol"],
    config=mc.CommitterConfig.from_hadoop_conf(conf),
    storage_options=spec["options"],
    store_wrapper=SlowStore,
)
committer.setup_job()
for task_id, files in spec["files"].items():
    task = committer.setup_task(task_id, "attempt_" + task_id[-1] + "_0")
    for relative, text in files.items():
        with task.fs.open(task.work_path + "/" + relative, "wb") as handle:
            handle.write(text.encode())
    committer.commit_task(task)
SlowStore.armed = True
success = committer.commit_job()
print(json.dumps(success.filenames), flush=True)
committer.close()
"""
"""The job's driver: sets the job up and runs its tasks, then commits on a store whose write of the commit point
(``slow``) is held up until the test lets it go on."""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def start_driver(
    processes: list[subprocess.Popen[str]],
    destination: str,
    *,
    protocol: str,
    markers: str,
    slow: str,
    options: dict[str, Any],
    stderr: int | None = None,
) -> subprocess.Popen[str]:
    """A driver (``DRIVER``) whose job commit has reached ``slow``, the write of its commit point."""
    spec = {
        "destination": destination,
        "job": JOB,
        "protocol": protocol,
        "markers": markers,
        "expiry": EXPIRY,
        "slow": slow,
        "options": options,
        "files": FILES,
    }
    process = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=environment(),
    )
    processes.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "slow"
    return process


def cli(processes: list[subprocess.Popen[str]], *arguments: str) -> subprocess.Popen[str]:
    """``manifest-committer`` started in a process of its own."""
    process = subprocess.Popen(
        [sys.executable, "-m", "manifest_committer.cli", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    processes.append(process)
    return process


def rollback_and_vacuum_during_commit(
    processes: list[subprocess.Popen[str]], driver: subprocess.Popen[str], destination: str, options: dict[str, Any]
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Once the lease would have expired had it stopped, roll back and vacuum the destination from two other
    processes while the commit is held up, then let it go on; returns the filenames of its ``_SUCCESS`` and what
    the vacuum did."""
    time.sleep(EXPIRY * 1.3)
    common = [f"--conf=mapreduce.manifest.committer.heartbeat.expiry.seconds={EXPIRY}"]
    common += [argument for key, value in options.items() for argument in ("--storage-option", f"{key}={value}")]
    rollback = cli(processes, "rollback", destination, *common)
    vacuum = cli(processes, "vacuum", destination, "--retention-hours", "0", *common)
    rolled_out, rolled_err = rollback.communicate(timeout=60)
    vacuum_out, vacuum_err = vacuum.communicate(timeout=60)
    assert driver.stdin is not None and driver.stdout is not None
    driver.stdin.write("go on\n")
    driver.stdin.flush()
    out = driver.stdout.read()
    assert driver.wait(60) == 0, out
    assert rollback.returncode == 0, rolled_err
    assert rolled_out.startswith("Nothing rolled back"), rolled_out
    filenames: list[str] = json.loads(out.splitlines()[-1])
    return filenames, subprocess.CompletedProcess(vacuum.args, vacuum.returncode, vacuum_out, vacuum_err)


def job_files(prefix: str) -> dict[str, bytes]:
    return {f"{prefix}{path}": data.encode() for files in FILES.values() for path, data in files.items()}


@pytest.mark.parametrize("markers", ["direct", "batched"])
def test_a_rollback_and_vacuum_during_a_slow_transactional_commit_change_nothing(
    tmp_path: Path, processes: list[subprocess.Popen[str]], markers: str
) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "users.csv").write_bytes(USERS)
    driver = start_driver(
        processes,
        str(dest),
        protocol="transactional",
        markers=markers,
        slow=f"_committed_{transaction_id(JOB)}",
        options={},
    )

    filenames, vacuum = rollback_and_vacuum_during_commit(processes, driver, str(dest), {})

    assert vacuum.returncode == 0 and "deleted 0 data files" in vacuum.stdout, vacuum.stdout + vacuum.stderr
    committed = mc.committed_files(str(dest))
    assert sorted(filenames) == sorted(set(committed) - {f"file://{dest}/users.csv"}) and len(filenames) == 8
    contents = sorted(Path(url.removeprefix("file://")).read_bytes() for url in committed)
    assert contents == sorted([USERS, *job_files("").values()])
    assert not (dest / "_temporary").exists()


def s3_destination_with_users(moto_s3: Emulator, s3_bucket: str) -> tuple[str, str, dict[str, Any], Any]:
    """An upload destination on moto holding a user's ``users.csv``: its URL, its key prefix, the storage options
    and an uncached filesystem to read it back with."""
    url, root = f"s3://{s3_bucket}/out", f"{s3_bucket}/out/"
    options = dict(moto_s3.storage_options)
    fs = fsspec.filesystem("s3", use_listings_cache=False, skip_instance_cache=True, **options)
    fs.pipe(root + "users.csv", USERS)
    return url, root, options, fs


@pytest.mark.s3
def test_a_rollback_during_a_slow_upload_commit_changes_nothing(
    moto_s3: Emulator, s3_bucket: str, processes: list[subprocess.Popen[str]]
) -> None:
    """Held up at ``_SUCCESS`` (the commit point), every upload completed: the objects are visible."""
    url, root, options, fs = s3_destination_with_users(moto_s3, s3_bucket)
    driver = start_driver(processes, url, protocol="upload", markers="direct", slow="_SUCCESS", options=options)

    filenames, vacuum = rollback_and_vacuum_during_commit(processes, driver, url, options)

    assert vacuum.returncode == 1 and "S3 has no rename" in vacuum.stderr  # vacuum reads transactional tables only
    found = {path: fs.cat(path) for path in fs.find(root)}
    success = found.pop(root + "_SUCCESS")
    assert found == job_files(root) | {root + "users.csv": USERS}
    assert mc.SuccessData.from_json(success, "_SUCCESS").success and len(filenames) == 8
    assert not fs.call_s3("list_multipart_uploads", Bucket=s3_bucket).get("Uploads")


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (``None``) below ``root``, ``_temporary`` included."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None for path in sorted(root.rglob("*"))
    }


def test_a_driver_killed_in_its_commit_is_held_by_rollback_and_vacuum_and_finished_by_commit(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """SIGKILL at the write of ``_committed_<tid>`` (batched markers: the marker server dies too): once the lease
    expired, a rollback reports the job in its commit and changes nothing, nor does a vacuum; ``commit`` then
    finishes it. (Every kill point of the commit, for both marker types: the kill tests.)"""
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "users.csv").write_bytes(USERS)
    slow = f"_committed_{transaction_id(JOB)}"
    driver = start_driver(processes, str(dest), protocol="transactional", markers="batched", slow=slow, options={})
    driver.kill()
    driver.wait(10)
    killed = tree(dest)
    time.sleep(EXPIRY * 1.2)
    common = [f"--conf=mapreduce.manifest.committer.heartbeat.expiry.seconds={EXPIRY}"]

    rollback = cli(processes, "rollback", str(dest), *common)
    vacuum = cli(processes, "vacuum", str(dest), "--retention-hours", "0", *common)
    rolled_out, rolled_err = rollback.communicate(timeout=60)
    vacuum_out, vacuum_err = vacuum.communicate(timeout=60)

    assert rollback.returncode == 0, rolled_err
    assert f"Job {JOB} (attempt 00): NOT rolled back: in its commit" in rolled_out, rolled_out
    assert f"manifest-committer commit file://{dest} --job {JOB}" in rolled_out
    assert vacuum.returncode == 0 and "deleted 0 data files" in vacuum_out, vacuum_out + vacuum_err
    assert tree(dest) == killed
    commit = cli(processes, "commit", str(dest), "--job", JOB, "--no-progress", *common)
    commit_out, commit_err = commit.communicate(timeout=60)
    assert commit.returncode == 0, commit_out + commit_err
    committed = mc.committed_files(str(dest))
    contents = sorted(Path(url.removeprefix("file://")).read_bytes() for url in committed)
    assert contents == sorted([USERS, *job_files("").values()])
    assert not (dest / "_temporary").exists()


def paused_past_its_lease_and_rolled_back(
    processes: list[subprocess.Popen[str]], driver: subprocess.Popen[str], destination: str, options: dict[str, Any]
) -> tuple[int, str, str]:
    """The driver, held just before it writes ``commit-started``, is stopped (SIGSTOP: its heartbeat and marker
    server stop too) past its lease; a rollback from another process undoes the job, then the driver goes on.
    Returns the driver's exit code and stderr, and the rollback's output."""
    driver.send_signal(signal.SIGSTOP)
    try:
        time.sleep(EXPIRY * 1.5)
        common = [f"--conf=mapreduce.manifest.committer.heartbeat.expiry.seconds={EXPIRY}"]
        common += [argument for key, value in options.items() for argument in ("--storage-option", f"{key}={value}")]
        rollback = cli(processes, "rollback", destination, *common)
        rolled_out, rolled_err = rollback.communicate(timeout=60)
        assert rollback.returncode == 0, rolled_err
    finally:
        driver.send_signal(signal.SIGCONT)
    assert driver.stdin is not None
    driver.stdin.write("go on\n")
    driver.stdin.flush()
    _, err = driver.communicate(timeout=60)
    return driver.wait(60), err, rolled_out


def assert_refused(code: int, err: str, rolled_out: str) -> None:
    assert f"Job {JOB} (attempt 00" in rolled_out and "NOT rolled back" not in rolled_out, rolled_out
    assert code != 0, err
    assert "JobStateError" in err and "was rolled back by another process while this driver was paused" in err, err
    assert "manifest-committer abort" in err and f"--job {JOB}" in err, err


@pytest.mark.parametrize("markers", ["direct", "batched"])
def test_a_driver_paused_before_commit_started_and_rolled_back_publishes_nothing(
    tmp_path: Path, processes: list[subprocess.Popen[str]], markers: str
) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "users.csv").write_bytes(USERS)
    before = tree(dest)
    driver = start_driver(
        processes,
        str(dest),
        protocol="transactional",
        markers=markers,
        slow="commit-started",
        options={},
        stderr=subprocess.PIPE,
    )

    assert_refused(*paused_past_its_lease_and_rolled_back(processes, driver, str(dest), {}))

    outside = {path: data for path, data in tree(dest).items() if not path.startswith("_temporary")}
    assert outside == before
    assert mc.committed_files(str(dest)) == [f"file://{dest}/users.csv"]
    abort = cli(processes, "abort", str(dest), "--job", JOB)
    abort_out, abort_err = abort.communicate(timeout=60)
    assert abort.returncode == 0, abort_out + abort_err
    assert tree(dest) == before


@pytest.mark.s3
def test_an_upload_driver_paused_before_commit_started_and_rolled_back_publishes_nothing(
    moto_s3: Emulator, s3_bucket: str, processes: list[subprocess.Popen[str]]
) -> None:
    url, root, options, fs = s3_destination_with_users(moto_s3, s3_bucket)
    driver = start_driver(
        processes,
        url,
        protocol="upload",
        markers="direct",
        slow="commit-started",
        options=options,
        stderr=subprocess.PIPE,
    )

    assert_refused(*paused_past_its_lease_and_rolled_back(processes, driver, url, options))

    found = {path: fs.cat(path) for path in fs.find(root) if "/_temporary/" not in path}
    assert found == {root + "users.csv": USERS}
    assert not fs.call_s3("list_multipart_uploads", Bucket=s3_bucket).get("Uploads")
