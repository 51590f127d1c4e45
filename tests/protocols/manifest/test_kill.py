"""Kill tests: SIGKILL a job commit (or an abort) at chosen steps, then rerun or abort with a fresh committer.

Contract §4: ``commit_job`` is repeatable after a crash at any point, without losing or duplicating a file;
``abort_job`` after an interrupted commit puts the destination back as it was before the job (an earlier
job's ``_SUCCESS`` included) unless the commit point had passed, and a second abort does nothing. A job
commit leaves nothing behind in the local temp directory either.

The kill points come from a reference run of the same child (``tests/fixtures/killing.py``), so they follow
the protocol as it changes; each test id names the step the child was stopped before, as the operation and
the path relative to the destination (``~`` is ``_temporary/job-2/00``).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from typing import TypeVar

import pytest

import manifest_committer as mc
from tests.fixtures.killing import (
    FILES_PER_TASK,
    JOB,
    NEXT_JOB,
    TASKS,
    TRASH_ENTRY,
    Event,
    KilledStates,
    KillPoint,
    Listing,
    Report,
    Scenario,
    check_success,
    diff,
    first_change,
    job_files,
    job_success,
    listing,
    middle_rename,
    reference_events,
    select_kill_points,
    with_committer,
)

T = TypeVar("T")


@functools.cache
def commit_reference() -> list[Event]:
    """The steps of an uninterrupted job commit of the scenario."""
    return reference_events("commit")


@functools.cache
def abort_reference() -> list[Event]:
    """The steps of an abort after a job commit killed halfway through its renames."""
    return reference_events("abort", kills=(("commit", middle_rename(commit_reference())),))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, reference in (("commit_kill", commit_reference), ("abort_kill", abort_reference)):
        if name in metafunc.fixturenames:
            points = select_kill_points(reference())
            metafunc.parametrize(name, points, ids=[point.id for point in points])


@pytest.fixture
def scenario(killed_states: KilledStates, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    """The scenario at the states' root (a test puts its state there); this process's temp directory is its
    spill directory, as the killed child's is."""
    scenario = Scenario(killed_states.root)
    monkeypatch.setattr(tempfile, "tempdir", str(scenario.spill))
    return scenario


def _success_owner(scenario: Scenario) -> str:
    path = scenario.dest / "_SUCCESS"
    if not path.exists():
        return "none"
    try:
        return f"job {mc.SuccessData.load(str(path)).job_id}'s"
    except mc.CommitterError as error:
        return f"unreadable ({error})"


def killed_state(scenario: Scenario, before: Listing, killed: Listing) -> Callable[[], str]:
    """A ``Report`` context: what the killed child had changed outside ``_temporary``, and what was left of the
    job's state."""
    success_at_kill = _success_owner(scenario)

    def describe() -> str:
        outside = {path: entry for path, entry in killed.items() if not path.startswith("_temporary")}
        job = scenario.expected_after_commit({})
        in_place = sum(1 for path, data in job_files().items() if outside.get(path) == job[path])
        others = {
            path: entry
            for path, entry in outside.items()
            if path != "_SUCCESS" and (path not in job or entry != job[path])
        }
        earlier = {path: entry for path, entry in before.items() if path not in job and path != "_SUCCESS"}
        changes = diff(earlier, others)
        job_dir = f"_temporary/{JOB}/00/"
        attempts = job_dir + "tasks/"
        state = sorted(
            path[len(job_dir) :] for path in killed if path.startswith(job_dir) and not path.startswith(attempts)
        )
        waiting = sum(1 for path, entry in killed.items() if path.startswith(attempts) and entry != "dir")
        present = [path for path in ("_temporary", f"_temporary/{JOB}", job_dir.rstrip("/")) if path in killed]
        return (
            f"when the child was killed, {in_place} of the job's {len(job_files())} files were in place, and "
            f"otherwise the destination outside _temporary differed from before the job by:\n"
            f"{changes or '  (nothing)'}\n  _SUCCESS: {success_at_kill}; "
            f"present: {', '.join(present) or 'no _temporary'}; in {job_dir}: {', '.join(state) or '-'}; "
            f"{waiting} files still in task attempt directories"
        )

    return describe


# --- the harness itself ------------------------------------------------------------------------------------------


def test_reference_commit_moves_every_file_and_replaces_success() -> None:
    """The kill points cover the renames of all the job's files and the replacement of ``_SUCCESS``."""
    events = commit_reference()
    renames = [event for event in events if event.kind == "rename_file" and "~/tasks/" in event.label]
    assert len(renames) == TASKS * FILES_PER_TASK
    assert any(event.label.endswith("-> _SUCCESS") or event.label.endswith(" _SUCCESS") for event in events)


def test_a_kill_lands_before_its_step(scenario: Scenario, killed_states: KilledStates) -> None:
    """Killed before the first rename: the commit had started (directories made), no file of the job is in place."""
    first = next(
        KillPoint(event.label, event.occurrence, index)
        for index, event in enumerate(commit_reference())
        if event.kind == "rename_file"
    )
    before = killed_states.restore(scenario, ("commit", first))

    def files(state: Listing) -> Listing:
        return {path: entry for path, entry in state.items() if entry != "dir"}

    assert files(listing(scenario.dest)) == files(before), diff(files(before), files(listing(scenario.dest)))
    assert (scenario.dest / "_temporary" / JOB / "00" / "commit-started").is_file()


def test_reference_commit_deletes_its_state_in_the_background() -> None:
    """The job directory leaves the way in one rename; the steps of deleting it afterwards are kill points."""
    events = commit_reference()
    moves = [index for index, event in enumerate(events) if event.kind == "rename_dir"]
    assert len(moves) == 1 and events[moves[0]].label == f"rename_dir _temporary/{JOB} -> {TRASH_ENTRY}"
    after = [event for event in events[moves[0] + 1 :] if event.label.startswith("delete_dir")]
    assert after and all(TRASH_ENTRY in event.label for event in after)
    assert any(
        point.label.startswith("delete_dir") and TRASH_ENTRY in point.label for point in select_kill_points(events)
    )


def test_a_kill_before_a_read_leaves_what_a_kill_before_the_next_change_leaves(
    scenario: Scenario, killed_states: KilledStates
) -> None:
    """Why the kill points are changes only (``select_kill_points``): killed before a manifest load, or before
    the first change after it, the destination (``_temporary`` included) is the same byte for byte, and the temp
    directory holds the same spill file (by another name, its content the child's scratch: the follow-up only
    removes it)."""
    events = commit_reference()
    read = next(index for index, event in enumerate(events) if event.label.startswith("read_bytes ~/manifests/"))
    change = first_change(events, read)
    assert change > read and events[change].kind not in ("read_bytes", "info", "list_dir")
    states = []
    for index in (read, change):
        killed_states.restore(scenario, ("commit", KillPoint(events[index].label, events[index].occurrence, index)))
        states.append((listing(scenario.dest, temporary=True), len(scenario.spill_files())))
    assert states[0] == states[1], diff(states[0][0], states[1][0])


# --- kill the job commit, then rerun it ----------------------------------------------------------------------------


def test_rerun_after_kill(commit_kill: KillPoint, scenario: Scenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the job's files, totals right, no state left."""
    before = killed_states.restore(scenario, ("commit", commit_kill))
    killed = listing(scenario.dest, temporary=True)
    report = Report(scenario, f"rerun after a kill before {commit_kill.id}", killed_state(scenario, before, killed))

    def rerun() -> mc.SuccessData:
        with scenario.committer() as committer:  # close() waits for the background delete
            return committer.commit_job()

    report.attempt("the rerun's commit_job", rerun)

    actual = listing(scenario.dest)
    actual.pop("_SUCCESS", None)
    report.compare(scenario.expected_after_commit(before), actual, "destination after the rerun")
    check_success(report, scenario)
    report.no_job_state()
    report.no_spill_files()
    report.attempt(
        f"setup_job of a new job {NEXT_JOB}", lambda: with_committer(scenario, lambda job: job.setup_job(), NEXT_JOB)
    )
    report.check()


# --- kill the job commit, then abort -------------------------------------------------------------------------------


def test_abort_after_kill(commit_kill: KillPoint, scenario: Scenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination as before the job (the earlier
    job's ``_SUCCESS`` included); after it, the job's output stays. A second abort changes nothing."""
    before = killed_states.restore(scenario, ("commit", commit_kill))  # the rerun's test's child, put back
    killed = listing(scenario.dest, temporary=True)
    committed = job_success(scenario) is not None
    report = Report(
        scenario,
        f"abort after a kill before {commit_kill.id} ({'after' if committed else 'before'} the commit point)",
        killed_state(scenario, before, killed),
    )

    def abort() -> None:
        with_committer(scenario, lambda committer: committer.abort_job())

    if committed:
        expected = scenario.expected_after_commit(before)
        expected["_SUCCESS"] = killed["_SUCCESS"]
        report.abort_twice(abort, expected, "destination after the abort (the job had committed)")
    else:
        report.abort_twice(abort, before, "destination after the abort, against before the job")
    report.check()


# --- kill an abort part-way, then abort again ------------------------------------------------------------------


def test_abort_again_after_killed_abort(abort_kill: KillPoint, scenario: Scenario, killed_states: KilledStates) -> None:
    """A commit killed halfway through its renames, then an abort killed too: a fresh abort still puts the
    destination back as it was before the job."""
    before = killed_states.restore(scenario, ("commit", middle_rename(commit_reference())), ("abort", abort_kill))
    report = Report(
        scenario,
        f"abort after a commit killed mid-renames and an abort killed before {abort_kill.id}",
        killed_state(scenario, before, listing(scenario.dest, temporary=True)),
    )

    report.attempt("the second abort_job", lambda: with_committer(scenario, lambda committer: committer.abort_job()))

    report.compare(before, listing(scenario.dest), "destination after the abort, against before the job")
    report.no_job_state()
    report.no_spill_files()
    report.check()
