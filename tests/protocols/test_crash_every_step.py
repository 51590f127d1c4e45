"""A crash at every step of the job commit of the rename protocols (manifest, v1, v2): on memory and local disk
every protocol, rerun and abort; on Azurite and fake-gcs-server v1's abort.

The step is a store call of a reference commit; the crash is an error right after that call took effect (what a
process killed there leaves, on stores the SIGKILL tests of ``test_kill*.py`` cannot reach: memory and the
emulators). Then a fresh committer reruns the commit, or aborts, held to the promises of docs/safety.md by the same
follow-ups as the kill tests (``tests/fixtures/killing/``; the transactional protocol has its own such test in
``protocols/transactional/test_committer.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.killing.child import Kill
from tests.fixtures.killing.crashing import CrashScenario, crash_points
from tests.fixtures.killing.follow_ups import abort_after_kill, rerun_after_kill
from tests.fixtures.killing.states import KilledStates, in_place

PROTOCOLS = ("manifest", "v1", "v2")
ScenarioIn = Callable[[str, str], CrashScenario]
"""The crash scenario of a protocol in a destination."""
CASES = [(protocol, step) for protocol in PROTOCOLS for step in range(len(crash_points(protocol)))]


def _case_id(case: tuple[str, int]) -> str:
    protocol, step = case
    return f"{protocol}-{crash_points(protocol)[step].id}"


@pytest.fixture
def crash_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], CrashScenario]:
    """The scenario of a protocol in a destination, its spill directory this process's temp directory."""
    return lambda protocol, destination: in_place(CrashScenario(tmp_path, protocol, destination), monkeypatch)


@pytest.mark.parametrize("then", ["rerun", "abort"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_crash_at_any_step_of_the_job_commit_then_rerun_or_abort(
    destination: str, case: tuple[str, int], then: str, crash_scenario: ScenarioIn, killed_states: KilledStates
) -> None:
    """Memory and local disk, every protocol, every step."""
    _crash_then(crash_scenario(case[0], destination), case, then, killed_states)


MUTATIONS = ("write_bytes", "delete_file", "delete_dir", "rename_file")
V1_CASES = [case for case in CASES if case[0] == "v1" and crash_points("v1")[case[1]].operation in MUTATIONS]
"""A crash after a read leaves the store as a crash after the change before it: the changing steps give every
state a crash can leave."""


@pytest.mark.parametrize("case", V1_CASES, ids=_case_id)
def test_a_crash_at_any_step_of_a_v1_commit_on_the_emulators_then_abort(
    cloud_destination: str, case: tuple[str, int], crash_scenario: ScenarioIn, killed_states: KilledStates
) -> None:
    """On the object stores, v1 (whose rename is a copy then a delete there) aborted after a crash at every change:
    the store-specific part of the promise. Reruns and the other protocols run on memory and local disk above (the
    emulators cost a second or more per case; the whole matrix would add minutes to the suite)."""
    _crash_then(crash_scenario("v1", cloud_destination), case, "abort", killed_states)


def _crash_then(scenario: CrashScenario, case: tuple[str, int], then: str, states: KilledStates) -> None:
    crash: Kill = ("commit", crash_points(scenario.protocol)[case[1]])
    if then == "rerun":
        rerun_after_kill(scenario, states, crash)
    else:
        abort_after_kill(scenario, states, crash)
