"""SIGKILL a job commit in the middle of a batch of renames in flight together, then rerun or abort it fresh.

On a store with ``concurrent_calls`` (Azure, GCS) a unit's renames go to the store as one batch, so a crash can
leave any subset of a unit moved, not a prefix. Here local disk plays such a store (``InFlightTogether``): the
child commits the manifest scenario's job (``tests/fixtures/killing/rename_protocols.py``) with four threads, in
batches of up to four renames, one store call at a time, and dies before the n-th rename of all, between two renames
of a batch. A fresh committer then reruns the commit, one rename at a time or in batches (the destination byte for
byte: the job's files and the user's, nothing else, no job state), or aborts it twice (the destination as before the
job).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.killing.events import NthCall
from tests.fixtures.killing.follow_ups import abort_after_kill, rerun_after_kill
from tests.fixtures.killing.rename_protocols import RenameScenario, batched, files_in_place
from tests.fixtures.killing.states import KilledStates

BATCHED = RenameScenario(Path("."), "manifest", batched=True)
KILLS = [NthCall("rename_file", nth, "~/tasks/") for nth in (2, 7, 14)]


@pytest.fixture
def scenario_template() -> RenameScenario:
    return BATCHED


@pytest.mark.parametrize("follow_up", ["rerun", "rerun batched", "abort"])
@pytest.mark.parametrize("commit_kill", KILLS, ids=[kill.id for kill in KILLS])
def test_a_commit_killed_inside_a_batch_is_finished_by_a_rerun_or_undone_by_an_abort(
    commit_kill: NthCall, follow_up: str, scenario: RenameScenario, killed_states: KilledStates
) -> None:
    killed_states.restore(scenario, ("commit", commit_kill))
    moved = files_in_place(scenario)
    assert moved == commit_kill.nth - 1, "the batch had moved the renames before the kill"

    if follow_up == "abort":
        abort_after_kill(scenario, killed_states, ("commit", commit_kill))
    else:
        wrapper = batched if follow_up == "rerun batched" else None
        rerun_after_kill(scenario, killed_states, ("commit", commit_kill), store_wrapper=wrapper)
