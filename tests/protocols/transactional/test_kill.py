"""Kill tests of the transactional protocol: SIGKILL its job commit (or an abort) at every step, then rerun or
abort with a fresh committer.

The promises of docs/safety.md: a rerun finishes the job, leaving exactly the accepted attempts' files (the files of
a failed attempt, of a speculative loser and of an aborted copy gone, ``_committed_<tid>`` listing exactly the
accepted ones); an abort before the commit point (``_committed_<tid>`` in place) puts the destination back byte
for byte as before the job, an earlier job's files, records and ``_SUCCESS`` included, and after it keeps the
output; a second abort changes nothing; an abort killed part-way and run again still puts everything back.

The whole job runs in the killed child (``tests/fixtures/killing/transactional.py``): with batched markers the
marker server dies with it, so the rerun and the abort read the marker files alone. The kill points come from a
reference run of the same child; each test id names the marker type and the step the child was stopped before
(``~`` is ``_temporary/job-2/00``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import manifest_committer as mc
from tests.fixtures.killing.cases import commit_reference, interrupted_commit, parametrize_kills
from tests.fixtures.killing.events import RETURNED, KillPoint, first_change, select_kill_points
from tests.fixtures.killing.follow_ups import (
    abort_after_kill,
    abort_again_after_killed_abort,
    rerun_after_kill,
    rollback_and_vacuum_after_kill,
)
from tests.fixtures.killing.jobs import JOB
from tests.fixtures.killing.listing import diff, listing
from tests.fixtures.killing.states import KilledStates
from tests.fixtures.killing.transactional import (
    COMMIT_BEGINS,
    FAILED_ONLY_PARTITION,
    MARKER_TYPES,
    TransactionalScenario,
    job_attempts,
)

MARKERS = [TransactionalScenario(Path("."), markers) for markers in MARKER_TYPES]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_kills(metafunc, MARKERS, lambda scenario, point: f"{scenario.markers}-{point.id}")


each_marker_type = pytest.mark.parametrize("scenario_template", MARKERS, ids=MARKER_TYPES)


# --- the harness itself ------------------------------------------------------------------------------------------


@each_marker_type
def test_kill_points_cover_every_step_of_the_job_commit(scenario_template: TransactionalScenario) -> None:
    """Manifest loads, ``commit-started``, marker reads, deletes of other attempts' files, ``_committed_<tid>``,
    ``_SUCCESS``, ``commit-finished`` and cleanup are all killed before; so are the moments before and after. A
    read is killed before through the first change after it (``first_change``): what a kill there leaves."""
    events = commit_reference(scenario_template)
    points = {point.index for point in select_kill_points(events)}
    labels = [event.label for index, event in enumerate(events) if first_change(events, index) in points]
    marker_read = "read_bytes ~/markers/MARKERS0" if scenario_template.markers == "batched" else "list_dir ~/markers/"
    wanted = {
        "the job commit's start": COMMIT_BEGINS,
        "a manifest load": "read_bytes ~/manifests/attempt_",
        "commit-started": "write_bytes ~/commit-started",
        "a marker read": marker_read,
        "a delete of another attempt's file": "delete_file part-",
        "removing a directory only a failed attempt wrote into": f"remove_empty_dir {FAILED_ONLY_PARTITION}",
        "the commit point": f"write_bytes _committed_{scenario_template.tid}",
        "a directory's record": f"write_bytes year=2024/month=02/_committed_{scenario_template.tid}",
        "_SUCCESS": "write_bytes _SUCCESS",
        "commit-finished": "write_bytes ~/commit-finished",
        "cleanup": "delete_dir ~/manifests",
        "the end": RETURNED,
    }
    missing = [what for what, label in wanted.items() if not any(found.startswith(label) for found in labels)]
    assert not missing, f"no kill point at {', '.join(missing)}; the points are:\n" + "\n".join(labels)
    deletes = [  # of data files, not of the job's own state (``~/``), which cleanup deletes
        event
        for event in events
        if event.kind == "delete_file" and not event.in_call and not event.label.startswith("delete_file ~/")
    ]
    losers = [plan for plan in job_attempts() if plan.outcome != "commit"]
    assert len(deletes) == sum(len(plan.files) for plan in losers), "every file of every other attempt is deleted"


@each_marker_type
def test_a_kill_before_the_commit_leaves_a_dead_job_that_rollback_undoes(
    scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """Killed with the job set up and its tasks done: its driver is gone (the marker server with it, or its
    heartbeat stale), so ``mc.rollback`` finds the job dead and puts the destination back from the files."""
    before = killed_states.restore(scenario, ("commit", KillPoint(COMMIT_BEGINS, 0, 0)))
    assert not scenario.committed()
    time.sleep(0.25)

    rolled = mc.rollback(
        scenario.destination,
        config=mc.CommitterConfig(markers_type=mc.MarkerType(scenario.markers), heartbeat_expiry_seconds=0.2),
    )

    assert [result.job_id for result in rolled] == [JOB]
    assert diff(before, listing(scenario.dest)) == ""


@each_marker_type
def test_a_reader_of_one_partition_never_sees_a_commit_before_the_root_record_and_sees_it_after_the_rerun(
    scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """Killed after the root's ``_committed_<tid>`` (the commit point) and one directory's record, before the next:
    the whole table reads committed, the partition with its record reads the job's files, the one without reads
    as before the job (the commit seen late, never a file of an uncommitted job); killed before the root's, no
    partition reads a file of the job. A fresh committer's rerun writes the missing record."""
    events = commit_reference(scenario)
    root_record = f"write_bytes _committed_{scenario.tid}"
    missing = "year=2024/month=02"
    kill = KillPoint.at(events, next(i for i, e in enumerate(events) if e.label.startswith(f"write_bytes {missing}/")))
    before_root = KillPoint.at(events, next(i for i, e in enumerate(events) if e.label == root_record))

    before = killed_states.restore(scenario, ("commit", before_root))
    assert not scenario.committed()
    for directory in ("year=2024/month=01", missing, "year=2025/month=01"):
        assert partition_names(scenario, directory) == partition_names_in(before, directory)

    killed_states.restore(scenario, ("commit", kill))
    assert scenario.committed()
    files = scenario.job_files()
    job_names = {
        directory: {p.rpartition("/")[2] for p in files if p.rpartition("/")[0] == directory}
        for directory in (
            "year=2024/month=01",
            missing,
        )
    }
    assert job_names["year=2024/month=01"] <= partition_names(scenario, "year=2024/month=01"), "its record is there"
    assert partition_names(scenario, missing) == partition_names_in(before, missing), "read as before the job"
    assert set(files) <= set(scenario_readable(scenario)), "the whole table reads the commit"

    scenario.use(scenario.commit)
    assert job_names[missing] <= partition_names(scenario, missing)


def partition_names(scenario: TransactionalScenario, directory: str) -> set[str]:
    """The names ``committed_files`` of one partition lists."""
    return {url.rsplit("/", 1)[1] for url in mc.committed_files(f"{scenario.destination}/{directory}")}


def partition_names_in(before: dict[str, str], directory: str) -> set[str]:
    """The readable names of a partition before the job: its files that are not records, ``_`` or ``.`` names."""
    prefix = directory + "/"
    names = {path.removeprefix(prefix) for path in before if path.startswith(prefix)}
    return {name for name in names if "/" not in name and not name.startswith(("_", "."))}


def scenario_readable(scenario: TransactionalScenario) -> list[str]:
    prefix = Path(scenario.destination).as_uri() + "/"
    return [url.removeprefix(prefix) for url in mc.committed_files(scenario.destination)]


# --- the follow-ups ------------------------------------------------------------------------------------------------


def test_rerun_after_kill(commit_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the accepted attempts' files, every other
    attempt's file gone, the job's records and ``_SUCCESS`` right, no state left."""
    rerun_after_kill(scenario, killed_states, ("commit", commit_kill))


def test_rollback_and_vacuum_after_kill(
    commit_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """The driver killed in its job commit, its lease expired: ``rollback`` and ``vacuum`` from a fresh committer
    leave a job that began its commit exactly as the kill left it (a driver paused there looks the same), and a
    rerun finishes it; a job killed before its commit began is dead and rolled back."""
    rollback_and_vacuum_after_kill(scenario, killed_states, ("commit", commit_kill))


def test_abort_after_kill(commit_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination byte for byte as before the
    job; after it, the job's output stays. A second abort changes nothing."""
    abort_after_kill(scenario, killed_states, ("commit", commit_kill))  # the rerun's test's child, put back


def test_abort_again_after_killed_abort(
    abort_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """A commit killed halfway through its deletes of other attempts' files, then an abort killed too: a fresh
    abort still puts the destination back as it was before the job."""
    abort_again_after_killed_abort(scenario, killed_states, interrupted_commit(scenario), ("abort", abort_kill))
