"""Kill tests of a job commit whose renames worker processes make (``io.processes``): a worker SIGKILLed in the
middle of a batch, and the committer's own process SIGKILLed while its workers hold batches. The job commit
fails cleanly (a ``WorkerProcessError`` naming the worker and its signal), no worker goes on renaming after its
committer died, and a fresh committer's rerun finishes the job exactly, or its abort (twice) undoes it exactly.

The scenario is the kill harness's rename scenario (``tests/fixtures/killing/rename_protocols.py``): user files, an
earlier job's ``_SUCCESS``, six committed tasks; a picklable store wrapper (``tests/fixtures/worker_stores.py``)
acts in the workers only.
"""

from __future__ import annotations

import functools
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Literal

import pytest

import manifest_committer as mc
from manifest_committer.errors import WorkerProcessError
from manifest_committer.protocols.base import CommitterBase
from tests.fixtures.killing.child import forkserver
from tests.fixtures.killing.jobs import JOB
from tests.fixtures.killing.listing import Listing, outside_temporary
from tests.fixtures.killing.rename_protocols import RenameScenario
from tests.fixtures.killing.report import Report, killed_state
from tests.fixtures.killing.scenario import StoreWrapper
from tests.fixtures.worker_stores import HoldingStore, KillingStore, process_gone

WORKERS = mc.CommitterConfig(io_threads=4, io_processes=2, save_retry_interval=0, store_retry_interval=0)
WAIT = 60.0


def _moved(scenario: RenameScenario) -> int:
    return sum(1 for path in scenario.job_files() if (scenario.dest / path).exists())


def _follow_up(scenario: RenameScenario, before: Listing, follow_up: Literal["rerun", "abort"]) -> None:
    """As the harness's follow-ups after a kill, from the state the killed commit left in place."""
    killed = scenario.listing(temporary=True)
    report = Report(scenario, f"{follow_up} after the kill", killed_state(scenario, before, killed))
    if follow_up == "rerun":
        report.attempt("the rerun's commit_job", lambda: scenario.use(scenario.commit))
        everything = scenario.listing(temporary=True)
        actual = outside_temporary(everything)
        for record in scenario.records:
            actual.pop(record, None)  # the job's, checked on its own
        report.compare(scenario.expected_after_commit(before), actual, "the rerun's destination")
        scenario.check_committed(report)
    else:
        everything = report.abort_twice(before, "the abort's destination, against before the job")
    report.finish(everything, follow_up)


def _committer(scenario: RenameScenario, store_wrapper: StoreWrapper) -> CommitterBase:
    return mc.create_committer(scenario.destination, JOB, "manifest", config=WORKERS, store_wrapper=store_wrapper)


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
@pytest.mark.parametrize("nth", [1, 3])
def test_a_worker_killed_in_a_batch_fails_the_commit_and_a_fresh_committer_finishes_or_undoes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int, follow_up: Literal["rerun", "abort"]
) -> None:
    scenario = RenameScenario(tmp_path)
    before = scenario.prepare()
    monkeypatch.setattr(tempfile, "tempdir", str(scenario.spill))
    dying = functools.partial(KillingStore, nth=nth, committer_pid=os.getpid())
    with (
        _committer(scenario, dying) as committer,
        pytest.raises(
            WorkerProcessError, match=rf"worker process \d+ of the job commit of job {JOB} was killed by SIGKILL"
        ),
    ):
        committer.commit_job()
    moved = _moved(scenario)
    assert moved < len(scenario.job_files()), "the commit stopped before every file moved"
    if nth > 1:
        assert moved >= nth - 1, "the dead worker had moved the renames before its kill"
    _follow_up(scenario, before, follow_up)


def _commit_in_child(dest: str, spill: str, signals: str) -> None:
    tempfile.tempdir = spill
    holding = functools.partial(HoldingStore, signals=signals, committer_pid=os.getpid())
    committer = mc.create_committer(dest, JOB, "manifest", config=WORKERS, store_wrapper=holding)
    committer.commit_job()


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
def test_workers_of_a_killed_committer_stop_and_a_fresh_committer_finishes_or_undoes_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, follow_up: Literal["rerun", "abort"]
) -> None:
    scenario = RenameScenario(tmp_path)
    before = scenario.prepare()
    signals = tmp_path / "signals"
    signals.mkdir()
    child = forkserver().Process(
        target=_commit_in_child, args=(str(scenario.dest), str(scenario.spill), str(signals)), daemon=True
    )
    child.start()  # before the temp directory changes: the forkserver's socket lives there
    monkeypatch.setattr(tempfile, "tempdir", str(scenario.spill))
    deadline = time.monotonic() + WAIT
    while not list(signals.glob("held-*")):
        assert time.monotonic() < deadline and child.exitcode is None, "no worker took a batch"
        time.sleep(0.01)
    workers = [int(path.name.removeprefix("held-")) for path in signals.glob("held-*")]
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(WAIT)
    while not all(process_gone(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived its committer"
        time.sleep(0.01)
    (signals / "release").write_text("")  # a worker still alive would now make its batch
    assert _moved(scenario) == 0, "the held batches were never made"
    _follow_up(scenario, before, follow_up)
