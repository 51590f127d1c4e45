"""Kill tests of the v1 and v2 protocols: SIGKILL a job commit (or an abort) at chosen steps, then rerun or abort
with a fresh committer, and compare the destination byte for byte.

The harness is ``tests/fixtures/killing.py`` (as ``tests/test_kill.py`` uses it for the manifest protocol): the
kill points come from a reference run of the same child, each test id names the protocol and the step the child
was stopped before (``~`` is ``_temporary/0``). The earlier job that commits while the job runs is a manifest
job, so the job commit replaces a ``_SUCCESS`` that an abort must put back.

v1 keeps contract §4: a rerun finishes the job, an abort before the commit point leaves the destination as it was
before the job. v2 keeps it too, except for its documented flaw: its committed tasks' files were published by
the task commits, so they are in "before" already and an abort leaves them; nothing else of the job stays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.statistic_names import COMMITTER_BYTES_COMMITTED, COMMITTER_FILES_COMMITTED
from tests.fixtures.killing import (
    JOB,
    NEXT_JOB,
    Event,
    KilledStates,
    KillPoint,
    Listing,
    Scenario,
    diff,
    job_files,
    listing,
    reference_events,
    select_kill_points,
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
def scenario(killed_states: KilledStates, protocol: str) -> Scenario:
    """The scenario under ``protocol`` at the states' root: a test puts its state there."""
    return Scenario(killed_states.root, protocol)


def job_success(scenario: Scenario) -> mc.SuccessData | None:
    path = scenario.dest / "_SUCCESS"
    try:
        success = mc.SuccessData.load(str(path))
    except (FileNotFoundError, mc.CommitterError):
        return None
    return success if success.job_id == JOB and success.success else None


class Checks:
    """Every way the outcome differs from the promise, so one failure says all of them."""

    def __init__(self, scenario: Scenario, what: str) -> None:
        self.scenario = scenario
        self.what = what
        self.problems: list[str] = []

    def attempt(self, step: str, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception as error:
            self.problems.append(f"{step} raised {type(error).__name__}: {error}")

    def compare(self, expected: Listing, title: str) -> None:
        difference = diff(expected, listing(self.scenario.dest))
        if difference:
            self.problems.append(f"{title} (- missing, + unexpected, ~ changed):\n{difference}")

    def no_job_state(self) -> None:
        left = sorted(
            path
            for path in listing(self.scenario.dest, temporary=True)
            if path == self.scenario.job_dir or path.startswith(self.scenario.job_dir + "/")
        )
        if left:
            self.problems.append(f"the job's state is left behind: {', '.join(left)}")
        self.attempt(f"setup_job of a new job {NEXT_JOB}", lambda: self.scenario.committer(NEXT_JOB).setup_job())

    def job_success(self) -> None:
        """``_SUCCESS`` is the job's, with every file and byte counted."""
        success = job_success(self.scenario)
        if success is None:
            self.problems.append(f"_SUCCESS is not job {JOB}'s successful summary")
            return
        files = job_files()
        counters = success.iostatistics.counters
        expected = {
            COMMITTER_FILES_COMMITTED: len(files),
            COMMITTER_BYTES_COMMITTED: sum(len(data) for data in files.values()),
        }
        for name, value in expected.items():
            if counters.get(name) != value:
                self.problems.append(f"_SUCCESS counter {name} = {counters.get(name)}, expected {value}")
        if len(success.filenames) != len(files):
            self.problems.append(f"_SUCCESS names {len(success.filenames)} files, expected {len(files)}")

    def check(self) -> None:
        if self.problems:
            raise AssertionError(f"{self.what}:\n" + "\n".join(f"* {problem}" for problem in self.problems))


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
    checks = Checks(scenario, f"{protocol}: rerun after a kill before {commit_kill.id}")

    checks.attempt("the rerun's commit_job", lambda: scenario.committer().commit_job())

    expected = scenario.expected_after_commit(before)
    expected["_SUCCESS"] = listing(scenario.dest).get("_SUCCESS", "missing")
    checks.compare(expected, "destination after the rerun")
    checks.job_success()
    checks.no_job_state()
    checks.check()


def test_abort_after_kill(
    protocol: str, commit_kill: KillPoint, scenario: Scenario, killed_states: KilledStates
) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination as before the job commit
    (the earlier job's ``_SUCCESS`` put back; for v2, its committed tasks' files stay, as they were before); after
    it, the job's output stays. A second abort changes nothing."""
    before = killed_states.restore(scenario, ("commit", commit_kill))  # the rerun's test's child, put back
    committed = job_success(scenario) is not None
    killed = listing(scenario.dest)
    checks = Checks(
        scenario,
        f"{protocol}: abort after a kill before {commit_kill.id} "
        f"({'after' if committed else 'before'} the commit point)",
    )

    checks.attempt("abort_job", lambda: scenario.committer().abort_job())

    if committed:
        expected = scenario.expected_after_commit(before)
        expected["_SUCCESS"] = killed["_SUCCESS"]
        checks.compare(expected, "destination after the abort (the job had committed)")
    else:
        checks.compare(before, "destination after the abort, against before the job commit")
    after_first = listing(scenario.dest, temporary=True)
    checks.attempt("a second abort_job", lambda: scenario.committer().abort_job())
    difference = diff(after_first, listing(scenario.dest, temporary=True))
    if difference:
        checks.problems.append(f"a second abort_job changed the destination:\n{difference}")
    checks.no_job_state()
    checks.check()


def test_abort_again_after_killed_abort(
    protocol: str, abort_kill: KillPoint, scenario: Scenario, killed_states: KilledStates
) -> None:
    """A commit killed part-way (see ``interrupting_point``), then an abort killed too: a fresh abort still puts
    the destination back as it was before the job commit."""
    before = killed_states.restore(scenario, ("commit", interrupting_point(protocol)), ("abort", abort_kill))
    checks = Checks(
        scenario, f"{protocol}: abort after an interrupted commit and an abort killed before {abort_kill.id}"
    )

    checks.attempt("the second abort_job", lambda: scenario.committer().abort_job())

    checks.compare(before, "destination after the abort, against before the job commit")
    checks.no_job_state()
    checks.check()


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
