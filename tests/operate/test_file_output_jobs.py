"""The on-call commands on v1 and v2 jobs (Hadoop FileOutputCommitter's layout, ``_temporary/<appAttempt>``):
``status`` lists them with their protocol, and ``commit`` and ``abort`` use their committer."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

import manifest_committer as mc
from tests.fixtures.committing import FAST, run_task
from tests.fixtures.stage_context import load_schema
from tests.operate.test_cli import USER_FILE, destination, everything, files_of, run, status_json

FILES = {
    ("task_00000", "attempt_00000_0"): {"p=0/f0.csv": b"a0"},
    ("task_00001", "attempt_00001_0"): {"p=1/f1.csv": b"b1,x"},
}


def tasks_committed(dest: str, protocol: str, job_id: str = "job-fo") -> mc.Committer:
    committer = mc.create_committer(dest, job_id, protocol=protocol, config=FAST)
    committer.setup_job()
    for (task_id, attempt_id), files in FILES.items():
        run_task(committer, task_id, attempt_id, files)
    return committer


@pytest.mark.parametrize("protocol", ["v1", "v2"])
def test_status_shows_a_file_output_job_with_its_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    dest = destination(tmp_path)
    tasks_committed(dest, protocol).close()
    before = everything(dest)
    document = status_json(capsys, dest)
    jsonschema.validate(document, load_schema("status.schema.json"))
    jobs = document["jobs"]
    assert isinstance(jobs, list) and len(jobs) == 1
    job = jobs[0]
    assert job["job_id"] == "job-fo"
    (attempt,) = job["attempts"]
    assert attempt["protocol"] == protocol
    assert attempt["attempt"] == 0
    assert len(attempt["manifests"]) == 2 and attempt["manifest_files"] == 2
    code, out, _ = run(capsys, "status", dest)
    assert code == 0
    assert f"Job job-fo ({protocol})" in out
    expected = "merge 2 committed tasks" if protocol == "v1" else "nothing to move"
    assert expected in out
    assert everything(dest) == before, "status changed the destination"


@pytest.mark.parametrize("protocol", ["v1", "v2"])
def test_commit_finishes_a_file_output_job(tmp_path: Path, capsys: pytest.CaptureFixture[str], protocol: str) -> None:
    dest = destination(tmp_path)
    tasks_committed(dest, protocol).close()
    code, out, err = run(capsys, "commit", dest, "--job", "job-fo")
    assert code == 0, err
    assert "Committed job job-fo (attempt 00) into" in out and f"({protocol})" in out
    expected = {path: data for files in FILES.values() for path, data in files.items()}
    assert files_of(dest) == {USER_FILE[0]: USER_FILE[1], **expected}
    assert mc.SuccessData.load(dest + "/_SUCCESS").committer == protocol
    assert not (Path(dest) / "_temporary").exists()


def test_abort_of_a_v1_job_leaves_the_destination_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = destination(tmp_path)
    tasks_committed(dest, "v1").close()
    code, out, _ = run(capsys, "abort", dest, "--job", "job-fo", "--dry-run")
    assert code == 0
    assert "Dry run: abort of job job-fo (attempt 00, v1) would (nothing was changed)" in out
    assert "the destination is untouched" in out
    code, out, err = run(capsys, "abort", dest, "--job", "job-fo")
    assert code == 0, err
    assert "Aborted job job-fo" in out
    assert files_of(dest) == {USER_FILE[0]: USER_FILE[1]}
    assert not (Path(dest) / "_temporary").exists()
