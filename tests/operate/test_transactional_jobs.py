"""The on-call commands on transactional jobs (real jobs on local disk, through ``main``): ``status`` shows the
protocol, markers, driver and commit record; ``commit`` and ``abort`` use the transactional committer; ``rollback``
and ``vacuum`` (with ``--dry-run``) say what they deleted."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.operate.status import STATUS_SCHEMA
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import transaction_id
from tests.fixtures.committing import run_task
from tests.fixtures.stage_context import load_schema

USER_FILE = ("other-tool.csv", b"not ours")
EXPIRY = "mapreduce.manifest.committer.heartbeat.expiry.seconds"


def config(markers: str = "batched", **overrides: Any) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.markers.type": markers},
        save_retry_interval=0,
        store_retry_interval=0,
        **overrides,
    )


@pytest.fixture
def dest(tmp_path: Path) -> str:
    out = tmp_path / "out"
    out.mkdir()
    (out / USER_FILE[0]).write_bytes(USER_FILE[1])
    return str(out)


def new_job(
    dest: str, committers: list[TransactionalCommitter], job_id: str, markers: str = "batched", **overrides: Any
) -> TransactionalCommitter:
    committer = mc.create_committer(dest, job_id, "transactional", config=config(markers, **overrides))
    assert isinstance(committer, TransactionalCommitter)
    committers.append(committer)
    committer.setup_job()
    return committer


def killed(committer: TransactionalCommitter) -> None:
    """The driver dies: its marker server stops answering (nothing more flushed), its heartbeat stops."""
    if committer.marker_server is not None:
        committer.marker_server.stop(flush=False)
    committer.close()


def data_names(dest: str) -> set[str]:
    """Names of the data files of the destination (outside ``_temporary``, no records), tids and all."""
    return {
        str(path.relative_to(dest))
        for path in Path(dest).rglob("*")
        if path.is_file()
        and not str(path.relative_to(dest)).startswith("_")
        and "/_" not in str(path.relative_to(dest))
    }


def everything(dest: str) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for root, directories, names in os.walk(dest):
        for name in directories:
            found[os.path.relpath(os.path.join(root, name), dest)] = None
        for name in names:
            found[os.path.relpath(os.path.join(root, name), dest)] = Path(root, name).read_bytes()
    return found


def urls(dest: str, names: set[str]) -> set[str]:
    return {f"file://{dest}/{name}" for name in names}


def listed(out: str) -> set[str]:
    """The file URLs a command printed, one per indented line."""
    return {line.strip() for line in out.splitlines() if line.strip().startswith("file://")}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "error" not in err
    return out


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1, err
    assert err.startswith("manifest-committer: error: ")
    return err


@functools.cache
def status_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema("status.schema.json"))


def status_json(capsys: pytest.CaptureFixture[str], dest: str, *extra: str) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(ok(capsys, "status", dest, "--json", *extra))
    errors = [error.message for error in status_validator().iter_errors(document)]
    assert errors == [], errors
    return document


def attempt_of(document: dict[str, Any], job_id: str) -> dict[str, Any]:
    (job,) = [job for job in document["jobs"] if job["job_id"] == job_id]
    attempt: dict[str, Any] = job["attempts"][0]
    return attempt


# --- status -------------------------------------------------------------------------------------------------------


def test_status_shows_protocol_markers_driver_and_record_and_counts_the_files(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    alive = new_job(dest, committers, "alive")
    run_task(alive, "task_0", "attempt_0", {"a.csv": b"a"})
    dead = new_job(dest, committers, "dead", markers="direct")
    run_task(dead, "task_0", "attempt_0", {"d=1/d.csv": b"d"})
    killed(dead)
    kept = new_job(dest, committers, "kept", cleanup_skipped=True)  # committed, its state left behind
    run_task(kept, "task_0", "attempt_0", {"k.csv": b"k"})
    kept.commit_job()
    with mc.ManifestCommitter(dest, "manifest-job") as manifest_job:
        manifest_job.setup_job()
    time.sleep(0.3)
    before = everything(dest)

    document = status_json(capsys, dest, "--conf", f"{EXPIRY}=0.2")
    out = ok(capsys, "status", dest, "--conf", f"{EXPIRY}=0.2")

    assert everything(dest) == before, "status is read only"
    assert attempt_of(document, "manifest-job")["protocol"] == "manifest"
    assert attempt_of(document, "manifest-job")["transaction"] is None
    live = attempt_of(document, "alive")
    assert live["protocol"] == "transactional"
    assert live["transaction"] == {
        "tid": transaction_id("alive"),
        "started": True,
        "committed": False,
        "record": f"file://{dest}/_committed_{transaction_id('alive')}",
    }
    assert (live["markers"]["markers"], live["markers"]["batched"], live["markers"]["driver_alive"]) == (1, True, True)
    assert "driver looks alive" in live["would_abort"]
    gone = attempt_of(document, "dead")
    assert (gone["markers"]["markers"], gone["markers"]["batched"], gone["markers"]["driver_alive"]) == (
        1,
        False,
        False,
    )
    assert "last beat" in gone["markers"]["liveness"]
    assert gone["would_commit"].startswith(f"write _committed_{transaction_id('dead')} for 1 task manifests")
    assert gone["would_abort"].startswith("delete the data files its 1 write markers name")
    committed = attempt_of(document, "kept")
    assert committed["transaction"]["committed"] is True
    assert committed["would_commit"].startswith("finish the directories' records, _SUCCESS and the cleanup only")
    # a.csv and d.csv belong to jobs not committed; k.csv is committed, other-tool.csv has no tid
    assert document["data_files"] == {
        "committed": 2,
        "without_tid": 1,
        "uncommitted": 2,
        "removed": 0,
        "records": 1,
        "error": None,
    }
    blocks = {block.split("\n", 1)[0]: block for block in out.split("\nJob ")}
    assert "Markers:         1 (direct, 1 direct)" in blocks["dead (transactional)"]
    assert "Driver:          gone" in blocks["dead (transactional)"]
    assert "Driver:          alive" in blocks["alive (transactional)"]
    assert "not committed (no _committed_" in blocks["alive (transactional)"]
    assert f"committed (_committed_{transaction_id('kept')} in place" in blocks["kept (transactional)"]
    assert "Job commit:      not started" in blocks["manifest-job (manifest)"]
    assert "Data files: 2 committed (1 of them without a tid), 2 uncommitted with a tid, 0 removed" in out

    assert status_json(capsys, dest, "--no-file-count")["data_files"] is None


def test_status_of_a_destination_without_transactions_counts_nothing(
    dest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with mc.ManifestCommitter(dest, "job-m") as committer:
        committer.setup_job()
        run_task(committer, "task_0", "attempt_0", {"m.csv": b"m"})
        committer.commit_job()
    document = status_json(capsys, dest)
    assert document["data_files"] is None, "no listing of a table the transactional protocol never touched"
    assert "Data files:" not in ok(capsys, "status", dest)


def test_status_with_an_unreadable_commit_record_reports_it(dest: str, capsys: pytest.CaptureFixture[str]) -> None:
    Path(dest, "_committed_5").write_bytes(b"{ torn")
    document = status_json(capsys, dest)
    assert document["data_files"]["error"] is not None
    assert "_committed_5" in document["data_files"]["error"]
    assert "Data files: not counted: " in ok(capsys, "status", dest)


def test_the_status_schema_ships_and_is_valid() -> None:
    schema = load_schema("status.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == STATUS_SCHEMA


# --- commit and abort ------------------------------------------------------------------------------------------


def two_attempts(dest: str, committers: list[TransactionalCommitter], job_id: str) -> TransactionalCommitter:
    """A job whose driver died: task 0 committed attempt 0; task 1 wrote with two attempts, committed the second."""
    job = new_job(dest, committers, job_id)
    run_task(job, "task_0", "attempt_0", {"p=0/zero.csv": b"0"})
    run_task(job, "task_1", "attempt_1a", {"p=1/one.csv": b"lost"}, commit=False)
    run_task(job, "task_1", "attempt_1b", {"p=1/one.csv": b"1"})
    killed(job)
    return job


def test_abort_of_a_transactional_job_dry_run_then_abort(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    two_attempts(dest, committers, "job-a")
    written = data_names(dest) - {USER_FILE[0]}
    assert len(written) == 3
    before = everything(dest)

    out = ok(capsys, "abort", dest, "--job", "job-a", "--dry-run")

    assert everything(dest) == before, "a dry run changes nothing"
    assert "Dry run: abort of job job-a (attempt 00, transactional)" in out
    assert "delete 3 data files its write markers name" in out
    tid = transaction_id("job-a")
    assert listed(out) == urls(dest, written)
    assert f"  delete file://{dest}/_started_{tid}\n" in out
    assert out.endswith(f"  delete the job's state file://{dest}/_temporary/job-a\n")

    out = ok(capsys, "abort", dest, "--job", "job-a")

    assert "Aborted job job-a (attempt 00, transactional)" in out
    assert "Data files deleted:  3" in out
    assert listed(out) == urls(dest, written)
    assert everything(dest) == {USER_FILE[0]: USER_FILE[1]}, "the destination is as it was before the job"


def test_commit_of_a_transactional_job_writes_its_record_and_deletes_the_loser(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    two_attempts(dest, committers, "job-c")

    out = ok(capsys, "commit", dest, "--job", "job-c")

    tid = transaction_id("job-c")
    assert "Committed job job-c (attempt 00) into" in out
    assert "(transactional)" in out
    assert f"Record:     file://{dest}/_committed_{tid} written" in out
    assert "Files:      2 committed" in out
    assert "Job state:  deleted" in out
    committed = mc.committed_files(dest)
    assert sorted(url.rsplit("/", 1)[1].split("-tid-")[0] for url in committed) == ["one", USER_FILE[0], "zero"]
    assert sorted(Path(url.removeprefix("file://")).read_bytes() for url in committed) == [b"0", b"1", USER_FILE[1]]
    assert len(data_names(dest)) == 3, "the losing attempt's file is gone"
    partition = sorted(path.name for path in Path(dest, "p=1").iterdir())
    assert len(partition) == 2 and partition[0] == f"_committed_{tid}", "the winner's file and its record"
    assert mc.SuccessData.load(dest + "/_SUCCESS").committer == "transactional"

    out = ok(capsys, "commit", dest, "--job", "job-c")
    assert "was already committed; finished its cleanup (transactional)" in out
    assert "Files:      2 committed" in out


def test_commit_of_a_job_committed_before_the_last_one_leaves_the_last_success(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    """Job A committed, then job B: ``commit --job A`` has nothing to do, and B's ``_SUCCESS`` stays B's (a rerun
    of A's commit would write A's over it)."""
    for job_id in ("job-a", "job-b"):
        job = new_job(dest, committers, job_id)
        run_task(job, "task_0", "attempt_0", {f"{job_id}.csv": b"x"})
        job.commit_job()
    before = everything(dest)

    out = ok(capsys, "commit", dest, "--job", "job-a")

    assert out.startswith("Job job-a was already committed (transactional")
    assert "nothing to do" in out
    assert everything(dest) == before
    assert mc.SuccessData.load(dest + "/_SUCCESS").job_id == "job-b"
    out = ok(capsys, "commit", dest, "--job", "job-b")
    assert "Job job-b (attempt 00) was already committed; finished its cleanup (transactional)" in out


def test_abort_of_a_committed_transactional_job_keeps_its_output(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    job = new_job(dest, committers, "job-k", cleanup_skipped=True)
    run_task(job, "task_0", "attempt_0", {"k.csv": b"k"})
    job.commit_job()
    before = data_names(dest)
    assert "keep the output: the job is committed" in ok(capsys, "abort", dest, "--job", "job-k", "--dry-run")
    out = ok(capsys, "abort", dest, "--job", "job-k")
    assert "The job was committed: its output stays" in out
    assert data_names(dest) == before
    assert not Path(dest, "_temporary", "job-k").exists()


# --- rollback ------------------------------------------------------------------------------------------------


def test_rollback_rolls_back_dead_jobs_only_and_says_why(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    alive = new_job(dest, committers, "alive")
    run_task(alive, "task_0", "attempt_0", {"alive.csv": b"a"})
    dead_batched = new_job(dest, committers, "dead-batched")
    run_task(dead_batched, "task_0", "attempt_0", {"b/dead.csv": b"b"})
    killed(dead_batched)
    dead_direct = new_job(dest, committers, "dead-direct", markers="direct")
    run_task(dead_direct, "task_0", "attempt_0", {"dead-d.csv": b"d"})
    killed(dead_direct)
    committed = new_job(dest, committers, "committed")
    run_task(committed, "task_0", "attempt_0", {"committed.csv": b"c"})
    committed.commit_job()
    dead_files = {name for name in data_names(dest) if name.startswith(("b/dead", "dead-d"))}
    assert len(dead_files) == 2
    time.sleep(0.3)
    expiry = ["--conf", f"{EXPIRY}=0.2"]
    before = data_names(dest)

    planned = ok(capsys, "rollback", dest, *expiry, "--dry-run")

    assert planned.startswith(f"Dry run: rollback of file://{dest} would undo 2 job attempt(s), deleting 2 data")
    assert listed(planned) == urls(dest, dead_files)
    assert data_names(dest) == before, "a dry run changes nothing"

    out = ok(capsys, "rollback", dest, *expiry)

    assert out.startswith(f"Rolled back 2 job attempt(s) of file://{dest}: 2 data files deleted")
    blocks = {block.split(" ", 1)[0]: block for block in out.split("\nJob ")[1:]}
    assert set(blocks) == {"dead-batched", "dead-direct"}
    assert "does not answer" in blocks["dead-batched"]
    assert "last beat" in blocks["dead-direct"]
    assert listed(out) == urls(dest, dead_files)
    assert not data_names(dest) & dead_files
    assert {name.split("-tid-")[0] for name in data_names(dest)} == {"alive", "committed", USER_FILE[0]}

    out = ok(capsys, "rollback", dest, *expiry)
    assert out.startswith("Nothing rolled back: no dead transactional job in")

    out = ok(capsys, "rollback", dest, "--job", "committed")
    assert f"job committed of file://{dest} is committed (file://{dest}/_committed_" in out

    out = ok(capsys, "rollback", dest, "--job", "alive")
    assert "Job alive (attempt 00): named by the caller" in out
    assert {name.split("-tid-")[0] for name in data_names(dest)} == {"committed", USER_FILE[0]}


# --- vacuum ------------------------------------------------------------------------------------------------------


def test_vacuum_dry_run_lists_exactly_what_vacuum_then_deletes(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    first = new_job(dest, committers, "job-0")
    run_task(first, "task_0", "attempt_0", {"old.csv": b"old"})
    run_task(first, "task_1", "attempt_1", {"straggler.csv": b"never committed"}, commit=False)
    first.commit_job(accepted_attempts={"task_0": "attempt_0"})
    # a straggler of the committed tid written after the commit (a killed attempt's late write)
    late = TransactionalCommitter(dest, "job-0", config=config("direct"))
    committers.append(late)
    run_task(late, "task_2", "attempt_2", {"late.csv": b"late"}, commit=False)
    second = new_job(dest, committers, "job-1")
    run_task(second, "task_0", "attempt_0", {"new.csv": b"new"})
    old = [name for name in data_names(dest) if name.startswith("old")]
    second.commit_job_replacing([second.store.from_url(url) for url in urls(dest, set(old))])
    time.sleep(0.05)
    before = everything(dest)
    doomed = {name for name in data_names(dest) if name.startswith(("late", "old"))}
    assert len(doomed) == 2

    assert ok(capsys, "vacuum", dest, "--retention-hours", "1") == (
        f"Vacuum of file://{dest} (retention 1 hours): deleted 0 data files\n"
    )
    out = ok(capsys, "vacuum", dest, "--retention-hours", "0", "--dry-run")

    assert everything(dest) == before, "a dry run changes nothing"
    assert out.startswith(f"Dry run: vacuum of file://{dest} (retention 0 hours) would delete 2 data files")
    assert listed(out) == urls(dest, doomed)
    assert mc.vacuum(dest, 0.0, dry_run=True) == sorted(urls(dest, doomed)), "the API's dry run is the same list"

    out = ok(capsys, "vacuum", dest, "--retention-hours", "0")

    assert out.startswith(f"Vacuum of file://{dest} (retention 0 hours): deleted 2 data files:")
    assert listed(out) == urls(dest, doomed)
    assert {name.split("-tid-")[0] for name in data_names(dest)} == {"new", USER_FILE[0]}


def test_a_nan_retention_is_refused_and_deletes_nothing(
    dest: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    """NaN compares false with every time, so it used to pass as "older than the retention": every uncommitted
    file went at once, however young."""
    job = new_job(dest, committers, "job-n")
    run_task(job, "task_0", "attempt_0", {"good.csv": b"good"})
    run_task(job, "task_1", "attempt_1", {"young.csv": b"uncommitted, written a moment ago"}, commit=False)
    job.commit_job(accepted_attempts={"task_0": "attempt_0"})
    late = TransactionalCommitter(dest, "job-n", config=config("direct"))
    committers.append(late)
    run_task(late, "task_2", "attempt_2", {"young.csv": b"a late straggler"}, commit=False)
    before = data_names(dest)

    err = one_line_error(capsys, "vacuum", dest, "--retention-hours", "nan")

    assert "retention_hours must be a number of hours >= 0, got nan" in err
    with pytest.raises(mc.ConfigError, match="retention_hours"):
        mc.vacuum(dest, float("nan"))
    assert data_names(dest) == before


# --- errors ---------------------------------------------------------------------------------------------------


def test_errors_are_one_line_naming_what_and_where(
    dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nowhere")
    assert f"file://{missing}: no such destination" in one_line_error(capsys, "rollback", missing)
    assert f"file://{missing}: no such destination" in one_line_error(
        capsys, "vacuum", missing, "--retention-hours", "1"
    )
    assert "not a valid id" in one_line_error(capsys, "rollback", dest, "--job", "../x")
    with mc.ManifestCommitter(dest, "manifest-job") as committer:
        committer.setup_job()
    err = one_line_error(capsys, "rollback", dest, "--job", "manifest-job")
    assert "job manifest-job has no write markers" in err
    assert "--conf 'x'" in one_line_error(capsys, "rollback", dest, "--conf", "x")
    assert "mapreduce.manifest.committer.typo" in one_line_error(
        capsys, "vacuum", dest, "--retention-hours", "1", "--conf", "mapreduce.manifest.committer.typo=1"
    )
    with pytest.raises(SystemExit) as exited:
        main(["vacuum", dest])
    assert exited.value.code == 2
    assert "required: --retention-hours" in capsys.readouterr().err
