"""Kill tests of the transactional protocol: SIGKILL its job commit (or an abort) at every step, then rerun or
abort with a fresh committer.

docs/safety.md and docs/protocols.md: a rerun finishes the job, leaving exactly the accepted attempts' files (the files
of a failed attempt, of a speculative loser and of an aborted copy gone, ``_committed_<tid>`` listing exactly the
accepted ones); an abort before the commit point (``_committed_<tid>`` in place) puts the destination back byte for byte
as before the job, an earlier job's files, records and ``_SUCCESS`` included, and after it keeps the output; a second
abort changes nothing; an abort killed part-way and run again still puts everything back.

The whole job runs in the killed child (``tests/fixtures/killing.py``): with batched markers the marker server
dies with it, so the rerun and the abort read the marker files alone. The kill points come from a reference run
of the same child; each test id names the marker type and the step the child was stopped before (``~`` is
``_temporary/job-2/00``).
"""

from __future__ import annotations

import functools
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.protocols.transactional.records import TransactionRecord, committed_record_name
from manifest_committer.statistic_names import COMMITTER_BYTES_COMMITTED, COMMITTER_FILES_COMMITTED
from tests.fixtures.killing import (
    COMMIT_BEGINS,
    EARLIER_FILES,
    EARLIER_JOB,
    FAILED_ONLY_PARTITION,
    JOB,
    MARKER_TYPES,
    NEXT_JOB,
    RETURNED,
    USER_FILES,
    Event,
    KilledStates,
    KillPoint,
    MarkerType,
    Report,
    TransactionalScenario,
    accepted_attempts,
    diff,
    final_relative,
    first_change,
    killed_listing,
    listing,
    middle_straggler_delete,
    select_kill_points,
    transactional_attempts,
    transactional_job_files,
    transactional_reference_events,
)


@functools.cache
def commit_reference(markers: MarkerType) -> list[Event]:
    """The steps of an uninterrupted job commit of the scenario."""
    return transactional_reference_events(markers, "commit")


@functools.cache
def abort_reference(markers: MarkerType) -> list[Event]:
    """The steps of an abort after a job commit killed halfway through its deletes of other attempts' files."""
    middle = middle_straggler_delete(commit_reference(markers))
    return transactional_reference_events(markers, "abort", kills=(("commit", middle),))


def commit_kill_points(markers: MarkerType) -> list[KillPoint]:
    """The spread of ``select_kill_points``, less the steps inside the cleanup's recursive deletes: they come
    after the commit point, in the cleanup stage every protocol shares, and ``tests/protocols/manifest/test_kill.py``
    kills inside it; a kill before each of its calls stays."""
    events = commit_reference(markers)
    return [
        point
        for point in select_kill_points(events)
        if not (events[point.index].in_call and events[point.index].kind.startswith("delete_dir|"))
    ]


def abort_kill_points(markers: MarkerType) -> list[KillPoint]:
    """Every spread step of the abort, inside its cleanup too: an abort killed there must be repeatable."""
    return select_kill_points(abort_reference(markers))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, points in (("commit_kill", commit_kill_points), ("abort_kill", abort_kill_points)):
        if name in metafunc.fixturenames:
            cases = [(markers, point) for markers in MARKER_TYPES for point in points(markers)]
            metafunc.parametrize(("markers", name), cases, ids=[f"{markers}-{point.id}" for markers, point in cases])


@pytest.fixture
def scenario(
    killed_states: KilledStates, monkeypatch: pytest.MonkeyPatch, markers: MarkerType
) -> TransactionalScenario:
    """The scenario at the states' root (a test puts its state there); this process's temp directory is its
    spill directory, as the killed child's is."""
    scenario = TransactionalScenario(killed_states.root, markers)
    monkeypatch.setattr(tempfile, "tempdir", str(scenario.spill))
    return scenario


def _committed_record(scenario: TransactionalScenario) -> Path:
    return scenario.dest / committed_record_name(scenario.tid)


def _relative_urls(scenario: TransactionalScenario, urls: list[str]) -> list[str]:
    with scenario.committer() as committer:
        prefix = committer.destination_url + "/"
    return [urllib.parse.unquote(url.removeprefix(prefix)) for url in urls]


def _earlier_job_files() -> list[str]:
    return [final_relative(path, "attempt_00000_0", EARLIER_JOB) for path in EARLIER_FILES]


def _check_committed(report: Report, scenario: TransactionalScenario) -> None:
    """The job is committed: ``_committed_<tid>`` lists exactly the accepted attempts' files, readers see exactly
    them beside the earlier job's and the users' files, and ``_SUCCESS`` is the job's, every file counted."""
    files = transactional_job_files()
    record_path = _committed_record(scenario)
    if not record_path.is_file():
        report.problems.append(f"{record_path.name} is missing: the job is not committed")
    else:
        record = report.attempt(
            f"reading {record_path.name}",
            lambda: TransactionRecord.from_json(record_path.read_bytes(), record_path.name),
        )
        if record is not None and (sorted(record.added), record.removed, record.job_id) != (sorted(files), (), JOB):
            report.problems.append(
                f"{record_path.name}: added {diff(dict.fromkeys(files, 'added'), dict.fromkeys(record.added, 'added'))}"
                f" removed {record.removed} jobId {record.job_id}"
            )
    urls = report.attempt("committed_files", lambda: mc.committed_files(str(scenario.dest)))
    if urls is not None:
        expected = sorted([*files, *_earlier_job_files(), *USER_FILES])
        readable = sorted(_relative_urls(scenario, urls))
        if readable != expected:
            report.problems.append(
                "committed_files (- missing, + unexpected):\n"
                + diff(dict.fromkeys(expected, "file"), dict.fromkeys(readable, "file"))
            )
    success_path = scenario.dest / "_SUCCESS"
    success = report.attempt("reading _SUCCESS", lambda: mc.SuccessData.load(str(success_path)))
    if success is None:
        return
    if success.job_id != JOB or not success.success or success.committer != "transactional":
        report.problems.append(f"_SUCCESS is job {success.job_id}'s ({success.committer}, success={success.success})")
        return
    counters = success.iostatistics.counters
    for name, value in (
        (COMMITTER_FILES_COMMITTED, len(files)),
        (COMMITTER_BYTES_COMMITTED, sum(map(len, files.values()))),
    ):
        if counters.get(name) != value:
            report.problems.append(f"_SUCCESS counter {name} = {counters.get(name)}, expected {value}")
    if _relative_urls(scenario, success.filenames) != sorted(files):
        report.problems.append(f"_SUCCESS filenames: {success.filenames[:3]} ... ({len(success.filenames)} names)")


# --- the harness itself ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("markers", MARKER_TYPES)
def test_kill_points_cover_every_step_of_the_job_commit(markers: MarkerType) -> None:
    """Manifest loads, ``commit-started``, marker reads, deletes of other attempts' files, ``_committed_<tid>``,
    ``_SUCCESS``, ``commit-finished`` and cleanup are all killed before; so are the moments before and after. A
    read is killed before through the first change after it (``first_change``): what a kill there leaves."""
    events = commit_reference(markers)
    points = {point.index for point in select_kill_points(events)}
    labels = [event.label for index, event in enumerate(events) if first_change(events, index) in points]
    tid = transaction_id_of_job()
    marker_read = "read_bytes ~/markers/MARKERS0" if markers == "batched" else "list_dir ~/markers/"
    wanted = {
        "the job commit's start": COMMIT_BEGINS,
        "a manifest load": "read_bytes ~/manifests/attempt_",
        "commit-started": "write_bytes ~/commit-started",
        "a marker read": marker_read,
        "a delete of another attempt's file": "delete_file part-",
        "removing a directory only a failed attempt wrote into": f"remove_empty_dir {FAILED_ONLY_PARTITION}",
        "the commit point": f"write_bytes _committed_{tid}",
        "_SUCCESS": "write_bytes _SUCCESS",
        "commit-finished": "write_bytes ~/commit-finished",
        "cleanup": "delete_dir ~/manifests",
        "the end": RETURNED,
    }
    missing = [what for what, label in wanted.items() if not any(found.startswith(label) for found in labels)]
    assert not missing, f"no kill point at {', '.join(missing)}; the points are:\n" + "\n".join(labels)
    deletes = [event for event in events if event.kind == "delete_file" and not event.in_call]
    losers = [plan for plan in transactional_attempts() if plan.outcome != "commit"]
    assert len(deletes) == sum(len(plan.files) for plan in losers), "every file of every other attempt is deleted"


def transaction_id_of_job() -> str:
    return TransactionalScenario(Path("."), "direct").tid


@pytest.mark.parametrize("markers", MARKER_TYPES)
def test_a_kill_before_the_commit_leaves_a_dead_job_that_rollback_undoes(
    scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """Killed with the job set up and its tasks done: its driver is gone (the marker server with it, or its
    heartbeat stale), so ``mc.rollback`` finds the job dead and puts the destination back from the files."""
    before = killed_states.restore(scenario, ("commit", KillPoint(COMMIT_BEGINS, 0, 0)))
    assert not _committed_record(scenario).exists()
    time.sleep(0.25)

    rolled = mc.rollback(
        str(scenario.dest),
        config=mc.CommitterConfig(markers_type=mc.MarkerType(scenario.markers), heartbeat_expiry_seconds=0.2),
    )

    assert [result.job_id for result in rolled] == [JOB]
    assert diff(before, listing(scenario.dest)) == ""


# --- kill the job commit, then rerun it ----------------------------------------------------------------------------


def test_rerun_after_kill(commit_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the accepted attempts' files, every other
    attempt's file gone, the job's records and ``_SUCCESS`` right, no state left."""
    before = killed_states.restore(scenario, ("commit", commit_kill))
    killed = listing(scenario.dest, temporary=True)
    report = Report(scenario, f"rerun after a kill before {commit_kill.id}", killed_listing(killed))

    def rerun() -> mc.SuccessData:
        with scenario.committer() as committer:
            return committer.commit_job(accepted_attempts())

    report.attempt("the rerun's commit_job", rerun)

    actual = listing(scenario.dest)
    for record in ("_SUCCESS", committed_record_name(scenario.tid)):
        actual.pop(record, None)
    report.compare(scenario.expected_after_commit(before), actual, "destination after the rerun")
    _check_committed(report, scenario)
    report.no_job_state()
    report.no_spill_files()

    def next_job() -> None:
        with scenario.committer(NEXT_JOB) as committer:
            committer.setup_job()

    report.attempt(f"setup_job of a new job {NEXT_JOB}", next_job)
    report.check()


# --- kill the job commit, then abort -------------------------------------------------------------------------------


def test_abort_after_kill(commit_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``: before the commit point, the destination byte for byte as before the
    job; after it, the job's output stays. A second abort changes nothing."""
    before = killed_states.restore(scenario, ("commit", commit_kill))  # the rerun's test's child, put back
    killed = listing(scenario.dest, temporary=True)
    record = committed_record_name(scenario.tid)
    committed = record in killed
    report = Report(
        scenario,
        f"abort after a kill before {commit_kill.id} ({'after' if committed else 'before'} the commit point)",
        killed_listing(killed),
    )

    if committed:
        expected = scenario.expected_after_commit(before)
        expected[record] = killed[record]
        expected["_SUCCESS"] = killed["_SUCCESS"]
        report.abort_twice(lambda: _abort(scenario), expected, "destination after the abort (the job had committed)")
    else:
        report.abort_twice(lambda: _abort(scenario), before, "destination after the abort, against before the job")
    report.check()


def _abort(scenario: TransactionalScenario) -> None:
    with scenario.committer() as committer:
        committer.abort_job()


# --- kill an abort part-way, then abort again ------------------------------------------------------------------


def test_abort_again_after_killed_abort(
    abort_kill: KillPoint, scenario: TransactionalScenario, killed_states: KilledStates
) -> None:
    """A commit killed halfway through its deletes of other attempts' files, then an abort killed too: a fresh
    abort still puts the destination back as it was before the job."""
    middle = middle_straggler_delete(commit_reference(scenario.markers))
    before = killed_states.restore(scenario, ("commit", middle), ("abort", abort_kill))
    report = Report(
        scenario,
        f"abort after a commit killed mid-deletes and an abort killed before {abort_kill.id}",
        killed_listing(listing(scenario.dest, temporary=True)),
    )

    report.attempt("the second abort_job", lambda: _abort(scenario))

    report.compare(before, listing(scenario.dest), "destination after the abort, against before the job")
    report.no_job_state()
    report.no_spill_files()
    report.check()
