"""The v1 and v2 protocols (Hadoop FileOutputCommitter's algorithms): layout, visibility, abort, reruns, and what
this project keeps or changes of Hadoop's behaviour. The shared protocol tests run them too
(protocols/test_end_to_end.py)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.protocols.base import CommitterBase
from manifest_committer.protocols.file_output.committer import FileOutputCommitter
from manifest_committer.stages.file_output.abort_job import FileOutputAbortJobResult
from manifest_committer.statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_RENAME_FILES,
    OP_RENAME,
    TASK_STAGE_MERGE_FILES,
)
from manifest_committer.store import Fault
from tests.fixtures.committing import FAST, FaultCapture, output, run_task, success_file, tree, write
from tests.fixtures.hadoop import Hadoop

BOTH = pytest.mark.parametrize("protocol", ["v1", "v2"])


def new_job(destination: str, protocol: str, job_id: str = "job-1") -> FileOutputCommitter:
    committer = mc.create_committer(destination, job_id, protocol, config=FAST)
    assert isinstance(committer, FileOutputCommitter)
    committer.setup_job()
    return committer


def outside_temporary(committer: CommitterBase) -> dict[str, bytes | None]:
    return {path: data for path, data in tree(committer).items() if not path.startswith("_temporary")}


def test_v1_layout_is_hadoops(destination: str) -> None:
    """Work in ``_temporary/<appAttempt>/_temporary/<taskAttempt>``; v1 task commit makes it
    ``_temporary/<appAttempt>/<taskId>``; nothing reaches the destination before job commit."""
    committer = new_job(destination, "v1")
    task = committer.setup_task("task_00000", "attempt_00000_0")
    assert task.work_path == committer.paths.dest + "/_temporary/0/_temporary/attempt_00000_0"
    write(task, "dt=1/a.csv", b"a")

    committer.commit_task(task)

    files = {path for path, data in tree(committer).items() if data is not None}
    assert "_temporary/0/task_00000/dt=1/a.csv" in files
    assert not any(path.startswith("_temporary/0/_temporary/attempt_00000_0/") for path in files)
    assert outside_temporary(committer) == {}, "nothing visible before job commit"

    success = committer.commit_job()

    assert output(committer) == {"dt=1/a.csv": b"a"}
    assert success.committer == "v1"
    assert success_file(committer).committer == "v1"
    assert "_temporary" not in tree(committer)


def test_the_app_attempt_is_the_job_attempt(destination: str) -> None:
    committer = mc.create_committer(destination, "job-1", "v1", job_attempt=3, config=FAST)
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    assert task.work_path == committer.paths.dest + "/_temporary/3/_temporary/attempt_00000_0"


def test_v2_files_are_visible_at_task_commit_and_abort_keeps_them(destination: str) -> None:
    """v2's known flaw, kept as the baseline: a committed task's files are in the destination before job
    commit, and abort_job cannot take them back."""
    committer = new_job(destination, "v2")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"a"})
    run_task(committer, "task_00001", "attempt_00001_0", {"dt=1/b.csv": b"b"}, commit=False)

    assert output(committer) == {"dt=1/a.csv": b"a"}, "visible before job commit"

    committer.abort_job()

    assert output(committer) == {"dt=1/a.csv": b"a"}, "abort does not undo a v2 task commit"
    assert "_SUCCESS" not in tree(committer)
    assert "_temporary" not in tree(committer)


def test_v1_abort_before_job_commit_leaves_the_destination_as_it_was(destination: str) -> None:
    committer = new_job(destination, "v1")
    committer.store.write_bytes(committer.paths.dest + "/old.csv", b"old")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"a"})

    committer.abort_job()
    committer.abort_job()

    assert tree(committer) == {"old.csv": b"old"}


def test_v2_second_attempt_of_a_task_conflicts_or_mixes(destination: str) -> None:
    """Hadoop's v2 overwrites a file of the same name and mixes differently named files of two attempts. Here a
    same-named file is a conflict (never overwritten); differently named files of both attempts stay: v2's flaw."""
    committer = new_job(destination, "v2")
    run_task(committer, "task_00000", "attempt_00000_0", {"part-a.csv": b"a", "same.csv": b"first"})
    second = run_task(committer, "task_00000", "attempt_00000_1", {"part-b.csv": b"b", "same.csv": b"2"}, commit=False)

    with pytest.raises(mc.OutputConflictError, match=r"same\.csv"):
        committer.commit_task(second)

    assert output(committer)["same.csv"] == b"first"
    assert output(committer)["part-a.csv"] == b"a"


def test_second_job_into_one_destination_is_refused_until_the_first_ends(destination: str) -> None:
    """Hadoop's v1/v2 share ``_temporary/<appAttempt>`` between jobs; here the second job is refused instead."""
    first = new_job(destination, "v1", job_id="job-a")
    run_task(first, "task_00000", "attempt_a_0", {"a.csv": b"a"})

    with pytest.raises(mc.JobStateError, match="held by job job-a"):
        new_job(destination, "v1", job_id="job-b")
    intruder = mc.create_committer(destination, "job-b", "v1", config=FAST)
    with pytest.raises(mc.JobStateError, match="held by job job-a"):
        intruder.commit_job()
    intruder.abort_job()  # nothing of job-b's to abort; job-a's state stays
    assert tree(first)["_temporary/0/task_00000/a.csv"] == b"a"

    first.commit_job()
    second = new_job(destination, "v1", job_id="job-b")
    run_task(second, "task_00000", "attempt_b_0", {"b.csv": b"b"})
    second.commit_job()

    assert output(second) == {"a.csv": b"a", "b.csv": b"b"}
    assert success_file(second).job_id == "job-b"


def test_a_hadoop_jobs_state_is_not_taken_over(destination: str) -> None:
    """A ``_temporary/0`` with content and no ``_JOB`` is another writer's (Hadoop's own committer, say)."""
    committer = mc.create_committer(destination, "job-1", "v1", config=FAST)
    committer.store.write_bytes(committer.paths.dest + "/_temporary/0/task_x/part.csv", b"hadoop's")

    with pytest.raises(mc.JobStateError, match="another writer"):
        committer.setup_job()


def test_v1_job_commit_rerun_after_a_crash_in_the_merge_finishes_it(destination: str) -> None:
    """Hadoop's v1 job commit is not repeatable (directory renames, overwrites). Here every move is a no-overwrite
    file rename, so a rerun moves what the crashed run left; totals come from the task reports."""
    config = mc.CommitterConfig(io_threads=1, save_retry_interval=0, store_retry_interval=0)
    capture = FaultCapture()
    committer = mc.create_committer(destination, "job-crash", "v1", config=config, store_wrapper=capture)
    committer.setup_job()
    expected = {f"dt={index % 2}/part-{index}.csv": b"x" * index for index in range(4)}
    for index, (name, data) in enumerate(expected.items()):
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", {name: data})
    capture.injecting.add_fault(Fault("rename_file", path_contains="part-2", error=lambda: PermissionError("injected")))

    with pytest.raises(PermissionError):
        committer.commit_job()
    assert 0 < len(output(committer)) < len(expected), "the crash came part-way through the merge"
    assert "_SUCCESS" not in tree(committer)

    success = mc.create_committer(destination, "job-crash", "v1", config=FAST).commit_job()

    assert output(committer) == expected
    assert success.iostatistics.counters[COMMITTER_FILES_COMMITTED] == 4
    assert success.iostatistics.counters[COMMITTER_BYTES_COMMITTED] == 6
    assert "_temporary" not in tree(committer)
    again = mc.create_committer(destination, "job-crash", "v1", config=FAST).commit_job()
    assert again.to_json() == success.to_json(), "a finished job's rerun returns its summary"


def interrupted_v1_commit(destination: str, job_id: str = "job-x") -> FileOutputCommitter:
    """A v1 job of two tasks whose job commit failed after moving ``part-0.csv`` and before ``part-1.csv``."""
    config = mc.CommitterConfig(io_threads=1, save_retry_interval=0, store_retry_interval=0)
    capture = FaultCapture()
    committer = mc.create_committer(destination, job_id, "v1", config=config, store_wrapper=capture)
    assert isinstance(committer, FileOutputCommitter)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"0"})
    run_task(committer, "task_00001", "attempt_00001_0", {"dt=2/part-1.csv": b"1"})
    capture.injecting.add_fault(Fault("rename_file", path_contains="part-1", error=lambda: PermissionError("injected")))
    with pytest.raises(PermissionError):
        committer.commit_job()
    assert output(committer) == {"dt=1/part-0.csv": b"0"}, "the crash came part-way through the merge"
    return committer


def test_v1_abort_after_an_interrupted_job_commit_removes_what_moved(destination: str) -> None:
    """Contract §4 for v1 (Hadoop's abort leaves what its merge moved): a fresh committer's abort removes the
    files the interrupted merge had moved and the directories it made, and a second abort does nothing."""
    committer = interrupted_v1_commit(destination)

    result = mc.create_committer(destination, "job-x", "v1", config=FAST).abort_job()

    assert tree(committer) == {}
    assert isinstance(result, FileOutputAbortJobResult) and result.files_reverted == 1
    mc.create_committer(destination, "job-x", "v1", config=FAST).abort_job()
    assert tree(committer) == {}


def test_v1_abort_never_takes_a_same_size_file_for_the_jobs(destination: str) -> None:
    """A user's file of the same size at the destination of a file the merge had not moved yet stays; only the
    job's record and the store's evidence (source gone, destination there) make a file the job's."""
    committer = interrupted_v1_commit(destination)
    committer.store.write_bytes(committer.paths.dest + "/dt=2/part-1.csv", b"U")  # same size, not the job's
    committer.store.write_bytes(committer.paths.dest + "/dt=1/user.csv", b"u")

    mc.create_committer(destination, "job-x", "v1", config=FAST).abort_job()

    assert output(committer) == {"dt=2/part-1.csv": b"U", "dt=1/user.csv": b"u"}


def test_v1_abort_puts_back_the_success_file_the_commit_replaced(destination: str) -> None:
    """An interrupted commit that had moved the earlier ``_SUCCESS`` aside: abort puts it back."""
    config = mc.CommitterConfig(io_threads=1, save_retry_interval=0, store_retry_interval=0)
    capture = FaultCapture()
    committer = mc.create_committer(destination, "job-x", "v1", config=config, store_wrapper=capture)
    committer.setup_job()
    committer.store.write_bytes(committer.paths.dest + "/_SUCCESS", b"earlier")
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    capture.injecting.add_fault(
        Fault("rename_file", path_contains="_SUCCESS.tmp", error=lambda: PermissionError("injected"))
    )
    with pytest.raises(PermissionError):
        committer.commit_job()
    assert "_SUCCESS" not in tree(committer)

    mc.create_committer(destination, "job-x", "v1", config=FAST).abort_job()

    assert tree(committer) == {"_SUCCESS": b"earlier"}


@pytest.mark.parametrize("mark_success", [True, False])
def test_v1_abort_after_the_commit_point_keeps_the_output(destination: str, mark_success: bool) -> None:
    """The commit point is ``_SUCCESS``, or the job's finished record without it: after it, abort keeps the
    output, and a rerun of the commit returns the summary."""
    config = mc.CommitterConfig(
        io_threads=1, save_retry_interval=0, store_retry_interval=0, mark_successful_jobs=mark_success
    )
    capture = FaultCapture()
    committer = mc.create_committer(destination, "job-x", "v1", config=config, store_wrapper=capture)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    capture.injecting.add_fault(Fault("delete_dir", path_contains="task_00000", error=lambda: OSError("injected")))
    with pytest.raises(OSError, match="injected"):
        committer.commit_job()  # the cleanup failed, after the commit point

    again = mc.create_committer(destination, "job-x", "v1", config=config).commit_job()
    assert again.job_id == "job-x" and again.success
    mc.create_committer(destination, "job-x", "v1", config=config).abort_job()

    assert output(committer) == {"a.csv": b"a"}
    assert "_temporary" not in tree(committer)


def test_v1_rerun_commits_what_the_first_run_accepted(destination: str) -> None:
    committer = interrupted_v1_commit(destination)
    rerun = mc.create_committer(destination, "job-x", "v1", config=FAST)

    with pytest.raises(mc.JobStateError, match="already began committing"):
        rerun.commit_job({"task_00000": "attempt_00000_0"})
    success = rerun.commit_job()

    assert output(committer) == {"dt=1/part-0.csv": b"0", "dt=2/part-1.csv": b"1"}
    assert success.iostatistics.counters[COMMITTER_FILES_COMMITTED] == 2


@BOTH
def test_no_task_commits_once_the_job_commit_began(destination: str, protocol: str) -> None:
    """The job commit's record fixes what it publishes: a late task attempt's commit is refused."""
    committer = new_job(destination, protocol)
    late = run_task(committer, "task_00001", "attempt_00001_0", {"late.csv": b"late"}, commit=False)
    committer.store.write_bytes(committer.layout.commit_started_path, b"{}")

    with pytest.raises(mc.JobStateError, match="has begun; task attempt attempt_00001_0 can no longer commit"):
        committer.commit_task(late)


def test_a_damaged_commit_record_stops_abort_before_it_touches_the_destination(destination: str) -> None:
    committer = interrupted_v1_commit(destination)
    committer.store.write_bytes(committer.layout.commit_started_path, b'{"type": "something else"}')

    with pytest.raises(mc.ManifestError, match=r"_COMMIT_STARTED\.json"):
        mc.create_committer(destination, "job-x", "v1", config=FAST).abort_job()

    assert output(committer) == {"dt=1/part-0.csv": b"0"}


@BOTH
def test_accepted_attempts_name_the_attempt_that_committed(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    run_task(committer, "task_00001", "attempt_00001_0", {"b.csv": b"b"})

    with pytest.raises(mc.ManifestError, match="attempt_00000_0, not by the accepted attempt attempt_00000_9"):
        committer.commit_job({"task_00000": "attempt_00000_9"})
    with pytest.raises(mc.ManifestError, match="task_00007 was accepted"):
        committer.commit_job({"task_00007": "attempt_00007_0"})


def test_v1_commits_only_accepted_tasks(destination: str) -> None:
    committer = new_job(destination, "v1")
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    run_task(committer, "task_00001", "attempt_00001_0", {"b.csv": b"b"})

    success = committer.commit_job({"task_00001": "attempt_00001_0"})

    assert output(committer) == {"b.csv": b"b"}
    assert success.iostatistics.counters[COMMITTER_TASKS_COMPLETED] == 1


@BOTH
def test_statistics_under_hadoops_names(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a/1.csv": b"1", "a/2.csv": b"22"})

    counters = committer.commit_job().iostatistics.counters

    assert counters[COMMITTER_FILES_COMMITTED] == 2
    assert counters[TASK_STAGE_MERGE_FILES] == 1
    expected_renames = 4 if protocol == "v1" else 2  # each file once (v1: twice); snapshots precede the saves
    assert counters[OP_RENAME] == expected_renames
    assert (JOB_STAGE_RENAME_FILES in counters) == (protocol == "v1")


def commit_one_task_in_a_child(destination: str, protocol: str, index: int) -> str:
    """Run in a spawned process: a fresh committer sets up, writes and commits one task."""
    committer = mc.create_committer(destination, "job-spawned", protocol, config=FAST)
    task = run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", {f"dt={index}/part.csv": b"%d" % index})
    committer.close()
    return task.attempt_id


@BOTH
def test_tasks_in_separate_processes(tmp_path: Path, protocol: str) -> None:
    destination = str(tmp_path / "out")
    driver = new_job(destination, protocol, job_id="job-spawned")
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        attempts = list(pool.map(commit_one_task_in_a_child, [destination] * 3, [protocol] * 3, range(3)))
    assert attempts == ["attempt_00000_0", "attempt_00001_0", "attempt_00002_0"]

    success = mc.create_committer(destination, "job-spawned", protocol, config=FAST).commit_job()

    assert output(driver) == {f"dt={index}/part.csv": b"%d" % index for index in range(3)}
    assert success.iostatistics.counters[COMMITTER_TASKS_COMPLETED] == 3


@pytest.mark.interop
@BOTH
def test_hadoop_reads_the_success_file(hadoop: Hadoop, tmp_path: Path, protocol: str) -> None:
    """Hadoop's own SuccessData reader takes the ``_SUCCESS`` of v1/v2, whose ``committer`` names the protocol."""
    committer = new_job(str(tmp_path / "out"), protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"abc"})
    committer.commit_job()

    fs = hadoop.filesystem(hadoop.configuration())
    loaded: Any = hadoop.manifest.files.ManifestSuccessData.load(fs, hadoop.local_path(str(tmp_path / "out/_SUCCESS")))
    loaded.validate()
    assert loaded.getCommitter() == protocol
    assert loaded.getSuccess() is True
    assert Hadoop.counters(loaded.getIOStatistics())["committer_files_committed"] == 1
