"""SIGKILL a job commit between moves of task directories into the destination, then rerun or abort it fresh.

On local disk a job commit moves a task's directory of one file into the destination whole
(``stages/manifest/directory_moves.py``): the job here has twelve such directories and six files in a partition
that every task shares (``one_file_a_partition_attempts``). The child dies before the n-th move; a fresh committer
then reruns the commit (the destination byte for byte: the job's files and the user's, nothing else, no job state),
or aborts it (the destination as before the job: the moved files deleted, the directories the job made removed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.killing.cases import commit_reference
from tests.fixtures.killing.events import NthCall
from tests.fixtures.killing.follow_ups import abort_after_kill, rerun_after_kill
from tests.fixtures.killing.rename_protocols import RenameScenario, files_in_place
from tests.fixtures.killing.states import KilledStates

MOVES = RenameScenario(Path("."), "manifest", one_file_a_partition=True)
KILLS = [NthCall("rename_dir", nth, "~/tasks/") for nth in (1, 6, 12)]


@pytest.fixture
def scenario_template() -> RenameScenario:
    return MOVES


def test_the_reference_commit_moves_each_directory_of_one_file_and_renames_the_shared_ones() -> None:
    events = commit_reference(MOVES)
    moves = [event for event in events if event.kind == "rename_dir" and "~/tasks/" in event.label]
    renames = [event for event in events if event.kind == "rename_file" and "~/tasks/" in event.label]
    assert len(moves) == 12
    assert len(renames) == 6


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
@pytest.mark.parametrize("commit_kill", KILLS, ids=[kill.id for kill in KILLS])
def test_a_commit_killed_between_moves_is_finished_by_a_rerun_or_undone_by_an_abort(
    commit_kill: NthCall, follow_up: str, scenario: RenameScenario, killed_states: KilledStates
) -> None:
    killed_states.restore(scenario, ("commit", commit_kill))
    moved = files_in_place(scenario, "day=")
    assert moved == commit_kill.nth - 1, "the moves before the kill had taken effect, each with its file"
    if follow_up == "abort":
        abort_after_kill(scenario, killed_states, ("commit", commit_kill))
    else:
        rerun_after_kill(scenario, killed_states, ("commit", commit_kill))
