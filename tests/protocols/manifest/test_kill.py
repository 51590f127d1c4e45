"""Kill tests: SIGKILL a job commit (or an abort) at chosen steps, then rerun or abort with a fresh committer.

The promises of docs/safety.md: ``commit_job`` is repeatable after a crash at any point, without losing or duplicating a
file; ``abort_job`` after an interrupted commit puts the destination back as it was before the job (an earlier job's
``_SUCCESS`` included) unless the commit point had passed, and a second abort does nothing. A job commit leaves nothing
behind in the local temp directory either.

The harness is ``tests/fixtures/killing/`` (its follow-ups say what is checked); the kill points come from a
reference run of the same child, so they follow the protocol as it changes; each test id names the step the child
was stopped before, as the operation and the path relative to the destination (``~`` is ``_temporary/job-2/00``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.killing.cases import commit_reference, interrupted_commit, parametrize_kills
from tests.fixtures.killing.events import KillPoint, first_change, select_kill_points, trash_entry
from tests.fixtures.killing.follow_ups import abort_after_kill, abort_again_after_killed_abort, rerun_after_kill
from tests.fixtures.killing.jobs import FILES_PER_TASK, JOB, TASKS
from tests.fixtures.killing.listing import Listing, diff, listing
from tests.fixtures.killing.rename_protocols import RenameScenario, first_rename
from tests.fixtures.killing.states import KilledStates

MANIFEST = RenameScenario(Path("."), "manifest")
TRASH_ENTRY = trash_entry(JOB)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_kills(metafunc, [MANIFEST], lambda _, point: point.id)


@pytest.fixture
def scenario_template() -> RenameScenario:
    """The scenario of the tests that kill at points of their own."""
    return MANIFEST


# --- the harness itself ------------------------------------------------------------------------------------------


def test_reference_commit_moves_every_file_and_replaces_success() -> None:
    """The kill points cover the renames of all the job's files and the replacement of ``_SUCCESS``."""
    events = commit_reference(MANIFEST)
    renames = [event for event in events if event.kind == "rename_file" and "~/tasks/" in event.label]
    assert len(renames) == TASKS * FILES_PER_TASK
    assert any(event.label.endswith("-> _SUCCESS") or event.label.endswith(" _SUCCESS") for event in events)


def test_a_kill_lands_before_its_step(scenario: RenameScenario, killed_states: KilledStates) -> None:
    """Killed before the first rename: the commit had started (directories made), no file of the job is in place."""
    before = killed_states.restore(scenario, ("commit", first_rename(commit_reference(MANIFEST))))

    def files(state: Listing) -> Listing:
        return {path: entry for path, entry in state.items() if entry != "dir"}

    assert files(listing(scenario.dest)) == files(before), diff(files(before), files(listing(scenario.dest)))
    assert (scenario.dest / "_temporary" / JOB / "00" / "commit-started").is_file()


def test_reference_commit_deletes_its_state_in_the_background() -> None:
    """The job directory leaves the way in one rename; the steps of deleting it afterwards are kill points."""
    events = commit_reference(MANIFEST)
    moves = [index for index, event in enumerate(events) if event.kind == "rename_dir"]
    assert len(moves) == 1 and events[moves[0]].label == f"rename_dir _temporary/{JOB} -> {TRASH_ENTRY}"
    after = [event for event in events[moves[0] + 1 :] if event.label.startswith("delete_dir")]
    assert after and all(TRASH_ENTRY in event.label for event in after)
    assert any(
        point.label.startswith("delete_dir") and TRASH_ENTRY in point.label for point in select_kill_points(events)
    )


def test_a_kill_before_a_read_leaves_what_a_kill_before_the_next_change_leaves(
    scenario: RenameScenario, killed_states: KilledStates
) -> None:
    """Why the kill points are changes only (``select_kill_points``): killed before a manifest load, or before
    the first change after it, the destination (``_temporary`` included) is the same byte for byte, and the temp
    directory holds the same spill file (by another name, its content the child's scratch: the follow-up only
    removes it)."""
    events = commit_reference(MANIFEST)
    read = next(index for index, event in enumerate(events) if event.label.startswith("read_bytes ~/manifests/"))
    change = first_change(events, read)
    assert change > read and events[change].kind not in ("read_bytes", "info", "list_dir")
    states = []
    for index in (read, change):
        killed_states.restore(scenario, ("commit", KillPoint.at(events, index)))
        states.append((listing(scenario.dest, temporary=True), len(scenario.spill_files())))
    assert states[0] == states[1], diff(states[0][0], states[1][0])


# --- the follow-ups ------------------------------------------------------------------------------------------------


def test_rerun_after_kill(commit_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the job's files, totals right, no state left."""
    rerun_after_kill(scenario, killed_states, ("commit", commit_kill))


def test_abort_after_kill(commit_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination as before the job (the earlier
    job's ``_SUCCESS`` included); after it, the job's output stays. A second abort changes nothing."""
    abort_after_kill(scenario, killed_states, ("commit", commit_kill))  # the rerun's test's child, put back


def test_abort_again_after_killed_abort(
    abort_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates
) -> None:
    """A commit killed halfway through its renames, then an abort killed too: a fresh abort still puts the
    destination back as it was before the job."""
    abort_again_after_killed_abort(scenario, killed_states, interrupted_commit(scenario), ("abort", abort_kill))
