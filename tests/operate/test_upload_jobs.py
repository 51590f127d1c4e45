"""The on-call commands on upload jobs (S3, moto), through ``main``: ``status`` shows the job's records and
incomplete uploads and what commit and abort would do; ``commit``, ``abort [--dry-run]`` and ``rollback
[--dry-run]`` act on an interrupted or dead job. Each test compares the bucket's objects and incomplete uploads
before and after: a dry run or ``status`` changes nothing; the real command leaves no incomplete upload of the job
and nothing of another job."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.store import StoreOperations
from manifest_committer.store.faults import Fault, FaultInjectingStore
from manifest_committer.store.s3 import S3Store
from tests.fixtures.stage_context import load_schema
from tests.protocols.upload.test_committer import BATCHED, Crash, committer, objects, uploads, write

pytestmark = pytest.mark.s3


@pytest.fixture
def dest(s3_bucket: str) -> str:
    return f"s3://{s3_bucket}/table"


@pytest.fixture
def store(s3_store: S3Store) -> Iterator[S3Store]:
    s3_store.fs.invalidate_cache()
    yield s3_store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "error" not in err
    return out


def listed(out: str) -> list[str]:
    """The URLs a command printed, one per indented line."""
    return [line.strip() for line in out.splitlines() if line.strip().startswith("s3://")]


@functools.cache
def status_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema("status.schema.json"))


def bucket_state(store: S3Store, bucket: str) -> tuple[dict[str, bytes], list[tuple[str, str]], list[str]]:
    """Objects outside ``_temporary``, incomplete uploads, and the job state's keys: all a command may change."""
    store.fs.invalidate_cache()
    state = sorted(store.fs.find(f"{bucket}/table/_temporary"))
    return objects(store, bucket), uploads(store, bucket), state


def start_unrecorded(task: mc.TaskAttempt, relative: str) -> None:
    """A task attempt that dies while writing: its marker is durable and its upload started, but no record
    names it (a record is saved only when the file closes)."""
    file = task.fs.open(f"{task.work_path}/{relative}", "wb")
    file.write(b"x" * 10)
    file.flush()
    file._file.flush(force=True)  # the part is sent: the upload exists


def dead_job(dest: str, job_id: str = "job-1") -> None:
    """A job whose driver died: task_0 committed a.csv; task_1's attempt died writing b.csv. Its lease (0.2 s)
    has expired when this returns."""
    driver = committer(dest, job_id, config=dataclasses.replace(BATCHED, heartbeat_expiry_seconds=0.2))
    driver.setup_job()
    task = driver.setup_task("task_0", "attempt_0_0")
    write(task, {"a.csv": b"a"})
    driver.commit_task(task)
    start_unrecorded(driver.setup_task("task_1", "attempt_1_0"), "b.csv")
    driver.close()  # the marker server answers no more, and the lease is renewed no more
    time.sleep(0.3)


def test_status_of_a_dead_upload_job_changes_nothing(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest)
    before = bucket_state(store, s3_bucket)

    document: dict[str, Any] = orjson.loads(ok(capsys, "status", dest, "--json"))
    text = ok(capsys, "status", dest)

    assert [error.message for error in status_validator().iter_errors(document)] == []
    [attempt] = document["jobs"][0]["attempts"]
    assert attempt["protocol"] == "upload"
    assert attempt["uploads"] == {"records": 1, "incomplete": 2, "left": 0, "error": None}
    assert attempt["task_attempts"] == ["attempt_0_0"], "the attempts that recorded a closed file"
    assert attempt["markers"]["markers"] == 2 and attempt["markers"]["driver_alive"] is False
    assert attempt["would_commit"].startswith("complete the uploads of 1 task manifests of 1 tasks")
    assert attempt["would_abort"].startswith("abort the job's 2 incomplete uploads")
    assert "Uploads:         2 incomplete uploads of the job; 1 recorded (closed files)" in text
    assert "Driver:          gone" in text
    assert bucket_state(store, s3_bucket) == before, "status only reads"


def test_abort_dry_run_lists_what_abort_does_and_changes_nothing(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest)
    before = bucket_state(store, s3_bucket)
    assert len(before[1]) == 2

    planned = ok(capsys, "abort", dest, "--job", "job-1", "--dry-run")

    assert planned.startswith("Dry run: abort of job job-1 (attempt 00, upload) would (nothing was changed):")
    assert "abort 2 incomplete uploads of the job" in planned
    assert bucket_state(store, s3_bucket) == before, "a dry run changes nothing"

    out = ok(capsys, "abort", dest, "--job", "job-1")

    assert out.startswith(f"Aborted job job-1 (attempt 00, upload) of s3://{s3_bucket}/table")
    assert listed(out) == listed(planned) == [f"s3://{s3_bucket}/table/a.csv", f"s3://{s3_bucket}/table/b.csv"]
    assert bucket_state(store, s3_bucket) == ({}, [], []), "no object, no upload, no state left"


def test_commit_of_a_dead_upload_job_completes_the_committed_task_and_aborts_the_rest(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest)

    out = ok(capsys, "commit", dest, "--job", "job-1")

    assert out.startswith(f"Committed job job-1 (attempt 00) into s3://{s3_bucket}/table (upload)")
    assert "1 completed with If-None-Match: *" in out
    assert "Incomplete: 2 uploads of the job before, 0 after" in out
    found, pending, state = bucket_state(store, s3_bucket)
    assert set(found) == {"table/a.csv", "table/_SUCCESS"} and found["table/a.csv"] == b"a"
    assert (pending, state) == ([], [])

    again = ok(capsys, "commit", dest, "--job", "job-1")
    assert again.startswith("Job job-1 (attempt 00) was already committed; finished its cleanup (upload)")
    assert bucket_state(store, s3_bucket) == (found, [], [])


def test_commit_of_a_later_job_attempt_aborts_the_earlier_attempts_uploads(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cleanup deletes the whole job directory: an earlier job attempt's uploads must go first, or nothing
    would find them again (before the fix they were left, incomplete, forever)."""
    first = committer(dest, config=BATCHED)
    first.setup_job()
    write(first.setup_task("task_0", "attempt_0_0"), {"old.csv": b"first"})  # a key attempt 01 never marks
    first.close()  # the first application attempt died before committing its task
    with committer(dest, config=BATCHED, job_attempt=1) as second:
        second.setup_job()
        task = second.setup_task("task_0", "attempt_0_0")
        write(task, {"a.csv": b"second"})
        second.commit_task(task)
    assert len(uploads(store, s3_bucket)) == 2

    out = ok(capsys, "commit", dest, "--job", "job-1")

    assert "(attempt 01)" in out and "Incomplete: 2 uploads of the job before, 0 after" in out
    found, pending, state = bucket_state(store, s3_bucket)
    assert set(found) == {"table/a.csv", "table/_SUCCESS"} and found["table/a.csv"] == b"second"
    assert (pending, state) == ([], [])


def test_abort_leaves_another_jobs_upload_at_the_same_key(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Job A's and job B's markers both name same.csv: A's abort takes only the upload A's record names."""
    job_a = committer(dest, "job-a", config=BATCHED)
    job_a.setup_job()
    write(job_a.setup_task("task_0", "attempt_0_0"), {"same.csv": b"a"})
    job_a.close()
    with committer(dest, "job-b", config=BATCHED) as job_b:
        job_b.setup_job()
        start_unrecorded(job_b.setup_task("task_0", "attempt_0_0"), "same.csv")
        ids_before = {upload_id for _, upload_id in uploads(store, s3_bucket)}
        [recorded] = store.fs.find(job_a.layout.attempt_pending_dir("attempt_0_0"))
        a_upload = orjson.loads(store.fs.cat_file(recorded))["upload"]["uploadId"]
        before = bucket_state(store, s3_bucket)

        planned = ok(capsys, "abort", dest, "--job", "job-a", "--dry-run")
        assert bucket_state(store, s3_bucket) == before
        out = ok(capsys, "abort", dest, "--job", "job-a")

        for text in (planned, out):
            assert "1 incomplete uploads of the job" in text
            assert "left 1 incomplete uploads at keys another job in flight marks too" in text
        assert {upload_id for _, upload_id in uploads(store, s3_bucket)} == ids_before - {a_upload}
        job_b.abort_job()
    assert uploads(store, s3_bucket) == []


def test_abort_dry_run_of_an_interrupted_commit_lists_the_completed_objects(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest)
    fault = Fault("complete_upload", "table/a.csv", "after", Crash)

    def wrap(inner: StoreOperations) -> StoreOperations:
        return FaultInjectingStore(inner, [fault])

    with committer(dest, config=BATCHED, store_wrapper=wrap) as dying, pytest.raises(Crash):
        dying.commit_job()
    before = bucket_state(store, s3_bucket)
    assert set(before[0]) == {"table/a.csv"} and len(before[1]) == 1

    document: dict[str, Any] = orjson.loads(ok(capsys, "status", dest, "--json"))
    planned = ok(capsys, "abort", dest, "--job", "job-1", "--dry-run")

    [attempt] = document["jobs"][0]["attempts"]
    assert attempt["would_commit"].startswith("resume the interrupted job commit of 1 task attempts (1 files)")
    assert f"delete 1 objects its interrupted commit had completed:\n    s3://{s3_bucket}/table/a.csv" in planned
    assert f"abort 1 incomplete uploads of the job, at:\n    s3://{s3_bucket}/table/b.csv" in planned
    assert bucket_state(store, s3_bucket) == before

    out = ok(capsys, "abort", dest, "--job", "job-1")

    assert listed(out) == listed(planned)
    assert bucket_state(store, s3_bucket) == ({}, [], [])


def test_rollback_dry_run_then_rollback_of_a_dead_upload_job(
    dest: str, s3_bucket: str, store: S3Store, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_job(dest)
    with committer(dest, "alive", config=BATCHED) as alive:  # its marker server answers: left alone
        alive.setup_job()
        write(alive.setup_task("task_0", "attempt_0_0"), {"alive.csv": b"z"})
        before = bucket_state(store, s3_bucket)

        planned = ok(capsys, "rollback", dest, "--dry-run")

        assert planned.startswith(f"Dry run: rollback of s3://{s3_bucket}/table would undo 1 job attempt(s)")
        assert "Job job-1 (attempt 00, upload): marker server" in planned
        assert "would abort 2 incomplete uploads" in planned
        assert bucket_state(store, s3_bucket) == before

        out = ok(capsys, "rollback", dest)

        assert out.startswith(f"Rolled back 1 job attempt(s) of s3://{s3_bucket}/table: 0 data files deleted, 2 inc")
        assert listed(out) == listed(planned)
        found, pending, _ = bucket_state(store, s3_bucket)
        assert found == {} and [key for key, _ in pending] == ["table/alive.csv"], "the live job's upload stays"
        assert ok(capsys, "rollback", dest).startswith("Nothing rolled back")
        alive.abort_job()
    assert bucket_state(store, s3_bucket) == ({}, [], [])


def test_a_job_that_is_not_there_is_one_line_error(
    dest: str, s3_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with committer(dest) as job:
        job.setup_job()
        code, out, err = run(capsys, "abort", dest, "--job", "job-2", "--dry-run")
        job.abort_job()
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "no job 'job-2' in flight there (jobs there: job-1)" in err
