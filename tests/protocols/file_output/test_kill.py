"""Kill tests of the v1 and v2 protocols: SIGKILL a job commit (or an abort) at chosen steps, then rerun or abort
with a fresh committer, and compare the destination byte for byte.

The harness is ``tests/fixtures/killing.py`` (as ``tests/protocols/manifest/test_kill.py`` uses it for the manifest
protocol): the kill points come from a reference run of the same child, each test id names the protocol and the step the
child was stopped before (``~`` is ``_temporary/0``). The earlier job that commits while the job runs is a manifest job,
so the job commit replaces a ``_SUCCESS`` that an abort must put back.

v1 keeps every promise of docs/safety.md: a rerun finishes the job, an abort before the commit point leaves the
destination as it was before the job. v2 keeps it too, except for its documented flaw: its committed tasks' files were
published by the task commits, so they are in "before" already and an abort leaves them; nothing else of the job stays.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.killing import (
    NEXT_JOB,
    Event,
    KilledStates,
    KillPoint,
    Report,
    Scenario,
    check_success,
    job_files,
    job_success,
    killed_listing,
    listing,
    reference_events,
    select_kill_points,
    with_committer,
)

PROTOCOLS = ("v1", "v2")


@functools.cache
def commit_reference(protocol: str) -> list[Event]:
    """The steps of an uninterrupted job commit of the scenario under ``protocol``."""
    return reference_events("commit", protocol=protocol)


def interrupting_point(protocol: str) -> KillPoint:
    """Where a commit is killed before the abort of ``abort_reference``: v1 halfway through the merge's renames,
    v2 between moving the earlier ``_SUCCESS`` aside and putting its own in place."""
    events = commit_reference(protocol)
    if protocol == "v1":
        candidates = [
            index
            for index, event in enumerate(events)
            if event.kind == "rename_file" and event.label.startswith("rename_file ~/task_")
        ]
        index = candidates[len(candidates) // 2]
    else:
        index = next(
            index for index, event in enumerate(events) if event.label == "rename_file ~/_SUCCESS.tmp -> _SUCCESS"
        )
    return KillPoint(events[index].label, events[index].occurrence, index)


@functools.cache
def abort_reference(protocol: str) -> list[Event]:
    """The steps of an abort after a job commit killed at ``interrupting_point``."""
    return reference_events("abort", kills=(("commit", interrupting_point(protocol)),), protocol=protocol)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, reference in (("commit_kill", commit_reference), ("abort_kill", abort_reference)):
        if name in metafunc.fixturenames:
            cases = [(protocol, point) for protocol in PROTOCOLS for point in select_kill_points(reference(protocol))]
            metafunc.parametrize(("protocol", name), cases, ids=[f"{protocol} {point.id}" for protocol, point in cases])


@pytest.fixture
def scenario(killed_states: KilledStates, protocol: str, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    """The scenario under ``protocol`` at the states' root (a test puts its state there); this process's temp
    directory is its spill directory, as the killed child's is."""
    scenario = Scenario(killed_states.root, protocol)
    monkeypatch.setattr(tempfile, "tempdir", str(scenario.spill))
    return scenario


def finish(report: Report, scenario: Scenario) -> None:
    """Nothing of the job left (state, spill files), a new job can start, and every problem said."""
    report.no_job_state()
    report.no_spill_files()
    report.attempt(
        f"setup_job of a new job {NEXT_JOB}", lambda: with_committer(scenario, lambda job: job.setup_job(), NEXT_JOB)
    )
    report.check()


def test_reference_commits_cover_the_protocols() -> None:
    """v1's job commit renames every file out of the committed task directories; v2's renames none; both replace
    the earlier ``_SUCCESS`` by moving it aside first, after recording what they publish."""
    for protocol in PROTOCOLS:
        labels = [event.label for event in commit_reference(protocol)]
        merged = [label for label in labels if label.startswith("rename_file ~/task_")]
        assert len(merged) == (len(job_files()) if protocol == "v1" else 0), protocol
        assert "rename_file _SUCCESS -> ~/_PREVIOUS_SUCCESS" in labels, protocol
        started = labels.index("write_bytes ~/_COMMIT_STARTED.json")
        assert all(labels.index(label) > started for label in merged), protocol


def test_rerun_after_kill(
    protocol: str, commit_kill: KillPoint, scenario: Scenario, killed_states: KilledStates
) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the job's files, totals right, no state left."""
    before = killed_states.restore(scenario, ("commit", commit_kill))
    killed = listing(scenario.dest, temporary=True)
    report = Report(scenario, f"{protocol}: rerun after a kill before {commit_kill.id}", killed_listing(killed))

    report.attempt("the rerun's commit_job", lambda: with_committer(scenario, lambda committer: committer.commit_job()))

    expected = scenario.expected_after_commit(before)
    expected["_SUCCESS"] = listing(scenario.dest).get("_SUCCESS", "missing")
    report.compare(expected, listing(scenario.dest), "destination after the rerun")
    check_success(report, scenario)
    finish(report, scenario)


def test_abort_after_kill(
    protocol: str, commit_kill: KillPoint, scenario: Scenario, killed_states: KilledStates
) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination as before the job commit
    (the earlier job's ``_SUCCESS`` put back; for v2, its committed tasks' files stay, as they were before); after
    it, the job's output stays. A second abort changes nothing."""
    before = killed_states.restore(scenario, ("commit", commit_kill))  # the rerun's test's child, put back
    committed = job_success(scenario) is not None
    killed = listing(scenario.dest, temporary=True)
    report = Report(
        scenario,
        f"{protocol}: abort after a kill before {commit_kill.id} "
        f"({'after' if committed else 'before'} the commit point)",
        killed_listing(killed),
    )

    def abort() -> None:
        with_committer(scenario, lambda committer: committer.abort_job())

    if committed:
        expected = scenario.expected_after_commit(before)
        expected["_SUCCESS"] = killed["_SUCCESS"]
        report.abort_twice(abort, expected, "destination after the abort (the job had committed)")
    else:
        report.abort_twice(abort, before, "destination after the abort, against before the job commit")
    finish(report, scenario)


def test_abort_again_after_killed_abort(
    protocol: str, abort_kill: KillPoint, scenario: Scenario, killed_states: KilledStates
) -> None:
    """A commit killed part-way (see ``interrupting_point``), then an abort killed too: a fresh abort still puts
    the destination back as it was before the job commit."""
    before = killed_states.restore(scenario, ("commit", interrupting_point(protocol)), ("abort", abort_kill))
    report = Report(
        scenario,
        f"{protocol}: abort after an interrupted commit and an abort killed before {abort_kill.id}",
        killed_listing(listing(scenario.dest, temporary=True)),
    )

    report.attempt("the second abort_job", lambda: with_committer(scenario, lambda committer: committer.abort_job()))

    report.compare(before, listing(scenario.dest), "destination after the abort, against before the job commit")
    finish(report, scenario)


def test_v2_abort_before_job_commit_leaves_only_committed_tasks_files(tmp_path: Path) -> None:
    """v2's documented flaw, from a fresh committer: committed tasks' files stay, an uncommitted attempt's
    work and every other trace of the job go."""
    scenario = Scenario(tmp_path, "v2")
    scenario.spill.mkdir()
    before = scenario.prepare()
    committer = scenario.committer()
    attempt = committer.setup_task("task_00099", "attempt_00099_0")
    with attempt.fs.open(attempt.work_path + "/uncommitted.csv", "wb") as handle:
        handle.write(b"never visible")

    scenario.committer().abort_job()

    assert listing(scenario.dest) == before
    assert all(path in before for path in job_files()), "the committed tasks' files were there before the abort"
    assert not (scenario.dest / "_temporary" / "0").exists()
