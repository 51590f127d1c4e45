"""An earlier job's ``_SUCCESS``, set aside at setup, is put back by an abort before the commit point, by the
library and the command line, and never over a newer one (``stages/success_aside.py``).

Black box: committers of every protocol on memory and local disk, the earlier ``_SUCCESS`` compared byte for byte.
The kill tests (``tests/protocols/test_kill_success_aside.py``) stop real processes at each step.
"""

from __future__ import annotations

import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.protocols.base import CommitterBase
from tests.fixtures.committing import FAST, run_task, tree

PROTOCOLS = ["manifest", "v1", "v2", "transactional"]


def committer(destination: str, job_id: str, protocol: str = "manifest", job_attempt: int = 0) -> CommitterBase:
    return mc.create_committer(destination, job_id, protocol, job_attempt=job_attempt, config=FAST)


def run_job(destination: str, job_id: str, protocol: str = "manifest") -> bytes:
    """A whole job of one task; returns its ``_SUCCESS``."""
    with committer(destination, job_id, protocol) as job:
        job.setup_job()
        run_task(job, "task_00000", "attempt_00000_0", {f"{job_id}.csv": job_id.encode()})
        job.commit_job()
        data = tree(job).get("_SUCCESS")
    assert isinstance(data, bytes)
    return data


def success(destination: str) -> bytes | None:
    with committer(destination, "probe") as probe:
        data = tree(probe).get("_SUCCESS")
    return data if isinstance(data, bytes) else None


def started(destination: str, job_id: str, protocol: str = "manifest", job_attempt: int = 0) -> CommitterBase:
    """A job set up, its task committed, not yet committed."""
    job = committer(destination, job_id, protocol, job_attempt)
    job.setup_job()
    run_task(job, "task_00000", f"attempt_00000_{job_attempt}", {f"{job_id}.csv": b"never committed"})
    return job


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_abort_after_setup_puts_the_earlier_success_back(destination: str, protocol: str) -> None:
    """Setup takes the earlier ``_SUCCESS`` out of the destination; the abort puts it back, byte for byte."""
    earlier = run_job(destination, "job-1")
    job = started(destination, "job-2", protocol)
    if protocol != "transactional":  # the transactional protocol leaves it in place until its commit point
        assert success(destination) is None, "setup takes the earlier _SUCCESS out of the destination"
    job.abort_job()
    job.close()
    assert success(destination) == earlier
    with committer(destination, "job-2", protocol) as again:
        again.abort_job()  # a second abort does nothing
    assert success(destination) == earlier


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_fresh_committers_abort_puts_it_back(destination: str, protocol: str) -> None:
    """The driver gone: a fresh committer of the job finds the copy in the job's state."""
    earlier = run_job(destination, "job-1")
    started(destination, "job-2", protocol).close()
    with committer(destination, "job-2", protocol) as fresh:
        fresh.abort_job()
    assert success(destination) == earlier


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_after_the_commit_point_the_new_success_stays(destination: str, protocol: str) -> None:
    run_job(destination, "job-1")
    job = started(destination, "job-2", protocol)
    job.commit_job()
    ours = success(destination)
    job.abort_job()
    job.close()
    assert ours is not None and success(destination) == ours
    assert mc.SuccessData.from_json(ours, "_SUCCESS").job_id == "job-2"


def test_a_newer_success_is_never_replaced(destination: str) -> None:
    """Job 3 commits while job 2 runs: job 2's abort keeps job 3's ``_SUCCESS``, not the one it set aside."""
    run_job(destination, "job-1")
    job = started(destination, "job-2")
    newer = run_job(destination, "job-3")
    job.abort_job()
    job.close()
    assert success(destination) == newer


def test_only_the_newest_copy_set_aside_is_put_back(destination: str) -> None:
    """Job 2 set job 1's aside; job 3 committed; job 4 set job 3's aside. Job 2's abort puts nothing back (job 1's
    ``_SUCCESS`` is older than job 3's), job 4's abort puts job 3's back."""
    run_job(destination, "job-1")
    second = started(destination, "job-2")
    third = run_job(destination, "job-3")
    fourth = started(destination, "job-4")
    second.abort_job()
    second.close()
    assert success(destination) is None, "an older _SUCCESS was put back while a newer one is set aside"
    fourth.abort_job()
    fourth.close()
    assert success(destination) == third


def test_a_commit_keeps_the_newer_success_it_replaces(destination: str) -> None:
    """Job 3 commits after job 2's setup; job 2's commit replaces job 3's ``_SUCCESS``: then job 2 is committed,
    and an abort keeps its own."""
    run_job(destination, "job-1")
    job = started(destination, "job-2")
    run_job(destination, "job-3")
    summary = job.commit_job()
    job.close()
    assert summary.job_id == "job-2"
    data = success(destination)
    assert data is not None and mc.SuccessData.from_json(data, "_SUCCESS").job_id == "job-2"


def test_an_earlier_attempts_copy_is_put_back(destination: str) -> None:
    """Attempt 0 set the earlier ``_SUCCESS`` aside and died; attempt 1 is aborted: the copy comes back."""
    earlier = run_job(destination, "job-1")
    started(destination, "job-2").close()
    with started(destination, "job-2", job_attempt=1) as retry:
        retry.abort_job()
    assert success(destination) == earlier


@pytest.mark.parametrize("protocol", ["manifest", "v1"])
def test_status_dry_run_and_abort_on_the_command_line(
    destination: str, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status`` and ``abort --dry-run`` say the earlier ``_SUCCESS`` would be put back; ``abort`` does it."""
    earlier = run_job(destination, "job-1")
    started(destination, "job-2", protocol).close()
    capsys.readouterr()
    assert main(["status", destination]) == 0
    status = capsys.readouterr().out
    assert "put back the earlier _SUCCESS that the job set aside" in status, status
    if protocol == "manifest":
        assert main(["abort", destination, "--job", "job-2", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert "put back the earlier _SUCCESS that the job set aside" in plan, plan
        assert "change nothing in the destination" not in plan, plan
    assert main(["abort", destination, "--job", "job-2"]) == 0
    assert success(destination) == earlier
