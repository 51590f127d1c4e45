"""Kill tests of the v1 and v2 protocols: SIGKILL a job commit (or an abort) at chosen steps, then rerun or abort
with a fresh committer, and compare the destination byte for byte.

The harness is ``tests/fixtures/killing/`` (as ``tests/protocols/manifest/test_kill.py`` uses it for the manifest
protocol): the kill points come from a reference run of the same child, each test id names the protocol and the step the
child was stopped before (``~`` is ``_temporary/0``). The earlier job that commits while the job runs is a manifest job,
so the job commit replaces a ``_SUCCESS`` that an abort must put back.

v1 keeps every promise of docs/safety.md: a rerun finishes the job, an abort before the commit point leaves the
destination as it was before the job. v2 keeps it too, except for its documented flaw: its committed tasks' files were
published by the task commits, so they are in "before" already and an abort leaves them; nothing else of the job stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.killing.cases import commit_reference, interrupted_commit, parametrize_kills
from tests.fixtures.killing.events import KillPoint
from tests.fixtures.killing.follow_ups import abort_after_kill, abort_again_after_killed_abort, rerun_after_kill
from tests.fixtures.killing.listing import listing
from tests.fixtures.killing.rename_protocols import RenameScenario, job_files
from tests.fixtures.killing.states import KilledStates

PROTOCOLS = [RenameScenario(Path("."), "v1"), RenameScenario(Path("."), "v2")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_kills(metafunc, PROTOCOLS, lambda scenario, point: f"{scenario.key} {point.id}")


def test_reference_commits_cover_the_protocols() -> None:
    """v1's job commit renames every file out of the committed task directories; v2's renames none; both replace
    the earlier ``_SUCCESS`` by moving it aside first, after recording what they publish."""
    for scenario in PROTOCOLS:
        labels = [event.label for event in commit_reference(scenario)]
        merged = [label for label in labels if label.startswith("rename_file ~/task_")]
        assert len(merged) == (len(job_files()) if scenario.protocol == "v1" else 0), scenario.protocol
        assert "rename_file _SUCCESS -> ~/_PREVIOUS_SUCCESS" in labels, scenario.protocol
        started = labels.index("write_bytes ~/_COMMIT_STARTED.json")
        assert all(labels.index(label) > started for label in merged), scenario.protocol


def test_rerun_after_kill(commit_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the job's files, totals right, no state left."""
    rerun_after_kill(scenario, killed_states, ("commit", commit_kill))


def test_abort_after_kill(commit_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination as before the job commit
    (the earlier job's ``_SUCCESS`` put back; for v2, its committed tasks' files stay, as they were before); after
    it, the job's output stays. A second abort changes nothing."""
    abort_after_kill(scenario, killed_states, ("commit", commit_kill))  # the rerun's test's child, put back


def test_abort_again_after_killed_abort(
    abort_kill: KillPoint, scenario: RenameScenario, killed_states: KilledStates
) -> None:
    """A commit killed part-way (v1 halfway through its merge, v2 before its ``_SUCCESS``), then an abort killed
    too: a fresh abort still puts the destination back as it was before the job commit."""
    abort_again_after_killed_abort(scenario, killed_states, interrupted_commit(scenario), ("abort", abort_kill))


def test_v2_abort_before_job_commit_leaves_only_committed_tasks_files(tmp_path: Path) -> None:
    """v2's documented flaw, from a fresh committer: committed tasks' files stay, an uncommitted attempt's
    work and every other trace of the job go."""
    scenario = RenameScenario(tmp_path, "v2")
    before = scenario.prepare()
    committer = scenario.committer()
    attempt = committer.setup_task("task_00099", "attempt_00099_0")
    with attempt.fs.open(attempt.work_path + "/uncommitted.csv", "wb") as handle:
        handle.write(b"never visible")

    scenario.committer().abort_job()

    assert listing(scenario.dest) == before
    assert all(path in before for path in job_files()), "the committed tasks' files were there before the abort"
    assert not (scenario.dest / "_temporary" / "0").exists()
