"""``status``, ``commit`` and ``abort`` on a destination: jobs in every state, resume, revert, dry run, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.markers import DirectMarkers, Marker, MarkerPaths, MarkerServer
from manifest_committer.paths import JobPaths
from manifest_committer.retry import RetryPolicy
from manifest_committer.store import Fault, open_store
from tests.fixtures.committing import FAST, FaultCapture, run_task
from tests.fixtures.emulators import Emulator, azurite_connection_string
from tests.fixtures.stage_context import load_schema

SERIAL = replace(FAST, io_threads=1, rename_batch_size=1)
FILES = {
    ("task_00000", "attempt_00000_0"): {"p=0/f0.csv": b"a0", "p=0/f1.csv": b"a1,x"},
    ("task_00001", "attempt_00001_0"): {"p=1/f2.csv": b"b2", "p=1/f3.csv": b"b3,yy"},
}
EXPECTED = {path: data for files in FILES.values() for path, data in files.items()}
USER_FILE = ("before.csv", b"the user's own")


def destination(tmp_path: Path) -> str:
    dest = tmp_path / "out"
    dest.mkdir(exist_ok=True)
    (dest / USER_FILE[0]).write_bytes(USER_FILE[1])
    return str(dest)


def files_of(dest: str) -> dict[str, bytes]:
    """The data files of the destination (outside ``_temporary``, without ``_SUCCESS``), with contents."""
    found = {}
    for root, _, names in os.walk(dest):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, dest)
            if not relative.startswith("_temporary") and relative != "_SUCCESS":
                found[relative] = Path(path).read_bytes()
    return found


def everything(dest: str) -> dict[str, bytes | None]:
    """Every path below the destination, with file contents: what a read-only command must leave as it was."""
    found: dict[str, bytes | None] = {}
    for root, directories, names in os.walk(dest):
        for name in directories:
            found[os.path.relpath(os.path.join(root, name), dest)] = None
        for name in names:
            found[os.path.relpath(os.path.join(root, name), dest)] = Path(root, name).read_bytes()
    return found


def tasks_committed(
    dest: str, job_id: str = "job-t", config: mc.CommitterConfig = SERIAL, under: str = ""
) -> mc.ManifestCommitter:
    """A job whose two tasks committed (their files ``under`` a directory of the destination, if given)."""
    committer = mc.ManifestCommitter(dest, job_id, config=config)
    committer.setup_job()
    for (task_id, attempt_id), files in FILES.items():
        run_task(committer, task_id, attempt_id, {under + name: data for name, data in files.items()})
    return committer


def half_committed(dest: str, job_id: str = "job-h") -> None:
    """A job commit that failed on its fourth rename, after moving three files."""
    tasks_committed(dest, job_id)
    capture = FaultCapture([Fault("rename_file", "f3.csv", error=lambda: PermissionError("injected"))])
    with (
        mc.ManifestCommitter(dest, job_id, config=SERIAL, store_wrapper=capture) as committer,
        pytest.raises(PermissionError),
    ):
        committer.commit_job()
    assert set(files_of(dest)) == {USER_FILE[0], "p=0/f0.csv", "p=0/f1.csv", "p=1/f2.csv"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def status_json(capsys: pytest.CaptureFixture[str], dest: str) -> dict[str, object]:
    code, out, err = run(capsys, "status", dest, "--json")
    assert (code, err) == (0, "")
    document: dict[str, object] = orjson.loads(out)
    validator = jsonschema.Draft202012Validator(load_schema("status.schema.json"))
    assert [error.message for error in validator.iter_errors(document)] == [], "schemas/status.schema.json"
    return document


def attempt_of(document: dict[str, object], job_id: str) -> dict[str, object]:
    jobs = document["jobs"]
    assert isinstance(jobs, list)
    job = next(job for job in jobs if job["job_id"] == job_id)
    attempt: dict[str, object] = job["attempts"][0]
    return attempt


# --- status ---------------------------------------------------------------------------------------------------


def test_status_shows_jobs_in_every_state_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = destination(tmp_path)
    mc.ManifestCommitter(dest, "job-s", config=SERIAL).setup_job()  # set up, nothing else
    tasks_committed(dest, "job-t")
    half_committed(dest, "job-h")
    kept = replace(SERIAL, cleanup_skipped=True)  # committed, its state left behind
    tasks_committed(dest, "job-c", kept, under="c/").commit_job()
    before = everything(dest)

    code, out, err = run(capsys, "status", dest)
    assert (code, err) == (0, "")
    assert everything(dest) == before, "status is read only"
    blocks = {block.split("\n", 1)[0]: block for block in out.split("\nJob ")}
    assert {"job-s (manifest)", "job-t (manifest)", "job-h (manifest)", "job-c (manifest)"} <= blocks.keys()
    blocks = {key.split(" ")[0]: block for key, block in blocks.items()}
    assert "commit would:    commit 0 task manifests" in blocks["job-s"]
    assert "Task manifests:  2 committed: 4 files, 13 bytes" in blocks["job-t"]
    assert "Job commit:      not started" in blocks["job-t"]
    assert "the destination is untouched" in blocks["job-t"]
    assert "3 of 4 files renamed (journal)" in blocks["job-h"]
    assert "resume the interrupted job commit of 2 task attempts" in blocks["job-h"]
    assert "revert the 3 files this commit renamed" in blocks["job-h"]
    assert "finished (commit point passed" in blocks["job-c"]
    assert "keep the output" in blocks["job-c"]
    assert "Last _SUCCESS: job job-c, SUCCESS" in out
    assert "4 files, 13 bytes" in out.rsplit("Last _SUCCESS", 1)[1]


def test_status_json_has_a_stable_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = destination(tmp_path)
    half_committed(dest)
    document = status_json(capsys, dest)
    assert set(document) == {
        "schema",
        "destination",
        "jobs",
        "last_success",
        "dead_spill_files",
        "state_being_deleted",
        "data_files",
    }
    assert document["schema"] == "manifest-committer/status/1"
    assert document["data_files"] is None, "counted only where the transactional protocol has been"
    attempt = attempt_of(document, "job-h")
    assert set(attempt) == {
        "attempt",
        "url",
        "protocol",
        "transaction",
        "task_attempts",
        "manifests",
        "manifest_files",
        "manifest_bytes",
        "markers",
        "commit",
        "uploads",
        "would_commit",
        "would_abort",
    }
    assert attempt["uploads"] is None, "upload jobs only"
    assert attempt["task_attempts"] == ["attempt_00000_0", "attempt_00001_0"]
    assert (attempt["manifest_files"], attempt["manifest_bytes"], attempt["markers"]) == (4, 13, None)
    assert (attempt["protocol"], attempt["transaction"]) == ("manifest", None)
    manifests = attempt["manifests"]
    assert isinstance(manifests, list)
    assert set(manifests[0]) == {"url", "task_id", "task_attempt_id", "files", "bytes", "error"}
    commit = attempt["commit"]
    assert isinstance(commit, dict)
    assert commit == {
        "accepted": {"task_00000": "attempt_00000_0", "task_00001": "attempt_00001_0"},
        "files": 4,
        "files_renamed": 3,
        "units": 2,
        "units_in_doubt": 0,
        "runs": 1,
        "finished": False,
    }


def test_status_reports_a_corrupt_manifest_and_dead_spill_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = destination(tmp_path)
    committer = tasks_committed(dest)
    Path(committer.paths.manifest_path("task_00001")).write_bytes(b"{ torn")
    spill = Path(tempfile.gettempdir()) / "manifest-committer-job-t-999999999-dead.entries"
    spill.write_bytes(b"12345")
    try:
        document = status_json(capsys, dest)
        code, out, _ = run(capsys, "status", dest)
    finally:
        spill.unlink()
    attempt = attempt_of(document, "job-t")
    manifests = attempt["manifests"]
    assert isinstance(manifests, list)
    assert "task_00001-manifest.json" in manifests[1]["error"]
    assert str(attempt["would_commit"]).startswith("refuse, changing nothing in the destination")
    assert {"path": str(spill), "job_id": "job-t", "pid": 999999999, "size": 5} in document["dead_spill_files"]  # type: ignore[operator]
    assert code == 0
    assert "unusable: " in out
    assert str(spill) in out


# --- commit -------------------------------------------------------------------------------------------------------


def test_commit_resumes_a_half_done_job_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = destination(tmp_path)
    half_committed(dest)
    code, out, err = run(capsys, "commit", dest, "--job", "job-h")
    assert (code, err) == (0, "")
    assert "Resumed and finished the interrupted commit of job job-h (attempt 00)" in out
    assert "Files:      4 committed (3 already in place from an earlier run)" in out
    assert "Job state:  deleted" in out
    assert files_of(dest) == {**EXPECTED, USER_FILE[0]: USER_FILE[1]}, "every file, byte for byte"
    assert mc.SuccessData.load(dest + "/_SUCCESS").job_id == "job-h"
    code, out, _ = run(capsys, "commit", dest, "--job", "job-h")
    assert code == 0
    assert "was already committed" in out


def test_commit_takes_hadoop_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = destination(tmp_path)
    tasks_committed(dest)
    conf = ["--conf", "mapreduce.fileoutputcommitter.marksuccessfuljobs=false"]
    conf += ["--conf", "mapreduce.fileoutputcommitter.cleanup.skipped=true"]
    code, out, _ = run(capsys, "commit", dest, "--job", "job-t", *conf)
    assert code == 0
    assert "_SUCCESS:   not written" in out
    assert "left under _temporary" in out
    assert not Path(dest, "_SUCCESS").exists()
    assert files_of(dest) == {**EXPECTED, USER_FILE[0]: USER_FILE[1]}


# --- abort ----------------------------------------------------------------------------------------------------------


def test_abort_dry_run_lists_and_changes_nothing_then_abort_reverts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = destination(tmp_path)
    half_committed(dest)
    before = everything(dest)
    code, out, err = run(capsys, "abort", dest, "--job", "job-h", "--dry-run")
    assert (code, err) == (0, "")
    assert everything(dest) == before, "a dry run changes nothing"
    assert "delete 3 files this job's commit moved into the destination" in out
    for name in ("p=0/f0.csv", "p=0/f1.csv", "p=1/f2.csv"):
        assert f"file://{dest}/{name}" in out
    assert "before.csv" not in out
    assert f"delete the job's state file://{dest}/_temporary/job-h" in out

    code, out, err = run(capsys, "abort", dest, "--job", "job-h")
    assert (code, err) == (0, "")
    assert "Files reverted:       3" in out
    assert "Directories removed:  2" in out
    assert everything(dest) == {USER_FILE[0]: USER_FILE[1]}, "the destination is as it was before the job"


def test_abort_of_a_job_before_its_commit_only_deletes_its_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = destination(tmp_path)
    tasks_committed(dest)
    code, out, _ = run(capsys, "abort", dest, "--job", "job-t", "--dry-run")
    assert code == 0
    assert "change nothing in the destination: no job commit had started" in out
    code, out, _ = run(capsys, "abort", dest, "--job", "job-t")
    assert code == 0
    assert "Files reverted:       0" in out
    assert everything(dest) == {USER_FILE[0]: USER_FILE[1]}


# --- errors ---------------------------------------------------------------------------------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code != 0
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("manifest-committer: error: ")
    assert "Traceback" not in err
    return err


def test_errors_are_one_line_naming_what_and_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = destination(tmp_path)
    committer = tasks_committed(dest)
    missing = str(tmp_path / "nowhere")
    assert f"file://{missing}: no such destination" in one_line_error(capsys, "status", missing)
    err = one_line_error(capsys, "commit", dest, "--job", "job-x")
    assert "no job 'job-x' in flight there (jobs there: job-t)" in err
    assert "no attempt 03" in one_line_error(capsys, "abort", dest, "--job", "job-t", "--attempt", "3")
    assert "not a valid id" in one_line_error(capsys, "commit", dest, "--job", "../x")
    err = one_line_error(capsys, "commit", dest, "--job", "job-t", "--conf", "mapreduce.manifest.committer.typo=1")
    assert "mapreduce.manifest.committer.typo" in err
    assert "--conf 'x'" in one_line_error(capsys, "abort", dest, "--job", "job-t", "--conf", "x")
    Path(committer.paths.manifest_path("task_00001")).write_bytes(b"{ torn")
    before = everything(dest)
    assert "task_00001-manifest.json" in one_line_error(capsys, "commit", dest, "--job", "job-t")
    assert files_of(dest) == {USER_FILE[0]: USER_FILE[1]}, "nothing in the destination changed"
    assert everything(dest).keys() - before.keys() <= {"_temporary/job-t/00/journal"}


def test_a_store_that_cannot_be_served_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "nosuchscheme" in one_line_error(capsys, "status", "nosuchscheme://bucket/out")
    assert "--storage-option 'novalue'" in one_line_error(
        capsys, "status", str(tmp_path), "--storage-option", "novalue"
    )


@pytest.mark.azure
def test_a_store_refusing_the_credentials_is_one_line(
    azurite: Emulator, azure_container: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = azurite_connection_string(azurite.port, account_key="d3Jvbmcga2V5IGZvciB0ZXN0cw==")
    err = one_line_error(
        capsys, "status", f"abfs://{azure_container}/out", "--storage-option", f"connection_string={wrong}"
    )
    assert azure_container in err
    assert "/out: the store refused the request (credentials from " in err


def test_no_traceback_from_the_installed_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", "abort", str(tmp_path), "--job", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "no job 'nope' in flight" in done.stderr


# --- progress bar -----------------------------------------------------------------------------------------------


def many_files(dest: str, count: int) -> None:
    committer = mc.ManifestCommitter(dest, "job-p", config=SERIAL)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {f"f{n:04d}.csv": b"x" for n in range(count)})


def test_no_progress_bar_into_a_pipe(tmp_path: Path) -> None:
    dest = destination(tmp_path)
    many_files(dest, 50)
    done = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", "commit", dest, "--job", "job-p"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\r" not in done.stdout
    assert "Committed job job-p (attempt 00) into" in done.stdout
    assert "Files:      50 committed" in done.stdout


def test_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """Under tmux (a real pseudo-terminal): the bar reaches all files, and the summary follows it."""
    dest = destination(tmp_path)
    many_files(dest, 300)
    session = f"mc-progress-{os.getpid()}"
    done_marker = tmp_path / "done"
    environment = f"PYTHONPATH={Path(__file__).resolve().parents[1]}"
    command = (
        f"{environment} {sys.executable} -m manifest_committer.cli commit {dest} --job job-p; "
        f"echo exit=$? > {done_marker}; sleep 30"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30", command], check=True, timeout=30
    )
    try:
        deadline = time.monotonic() + 30
        while not done_marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True, timeout=30
        ).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
    assert done_marker.read_text().strip() == "exit=0"
    assert "job job-p: renaming" in screen, screen
    assert "300/300" in screen, screen
    assert "100%" in screen, screen
    assert "Files:      300 committed" in screen, screen


def test_status_shows_markers_and_whether_their_server_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = destination(tmp_path)
    opened = open_store(dest)
    store, dest_path = opened.store, opened.path
    paths = MarkerPaths(JobPaths(dest_path, "job-m"))
    retry = RetryPolicy(attempts=1, initial_wait=0.0, is_retryable=store.is_transient)
    DirectMarkers(store, paths, retry).create("d/direct.csv")
    with MarkerServer(store, paths, retry, batch_interval_ms=5) as server:
        assert server.create(Marker("d/batched.csv")).result(timeout=10)
        state = server.state
        assert state is not None
        live = status_json(capsys, dest)
        code, out, _ = run(capsys, "status", dest)
    assert code == 0
    assert attempt_of(live, "job-m")["markers"] == {
        "markers": 2,
        "batched": True,
        "direct": 1,
        "driver_alive": True,
        "liveness": f"marker server {state.host}:{state.port} answers",
        "error": None,
    }
    assert "Markers:         2 (batched, 1 direct)" in out
    assert "Driver:          alive" in out
    assert "Job job-m (transactional)" in out, "a job with markers is committed and aborted as transactional"
    assert "its driver looks alive" in out
    markers = attempt_of(status_json(capsys, dest), "job-m")["markers"]
    assert isinstance(markers, dict)
    assert (markers["markers"], markers["driver_alive"]) == (2, False), "the server is gone"
    assert "does not answer" in markers["liveness"]


def test_status_shows_trash_entries_apart_from_jobs_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed job's state moved to _temporary/.trash (deleted after its commit returned) is no job."""
    dest = tmp_path / "out"
    entry = dest / "_temporary" / ".trash" / "job-old=20261122T200000Z-k2x"
    (entry / "00").mkdir(parents=True)
    (entry / "00" / "commit-finished").write_bytes(b"{}")

    document = status_json(capsys, str(dest))

    assert document["jobs"] == []
    assert document["state_being_deleted"] == ["job-old=20261122T200000Z-k2x"]
    code, out, _ = run(capsys, "status", str(dest))
    assert code == 0
    assert "job-old=20261122T200000Z-k2x" in out
    assert "not jobs in flight" in out
