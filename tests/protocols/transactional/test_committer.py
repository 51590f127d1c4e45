"""The transactional protocol end to end, on memory, local disk and both emulators: what readers see, what
job commit, abort, vacuum and rollback leave, with both kinds of markers, and what crafted state cannot do."""

from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.manifest import MANIFEST_SUFFIX
from manifest_committer.parallel import CALLS_A_BATCH
from manifest_committer.paths import TRASH_DIR
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import (
    TransactionPaths,
    attempt_tag,
    committed_record_name,
    parse_data_file_name,
    transaction_id,
)
from manifest_committer.store import StoreOperations
from manifest_committer.store.faults import Fault, FaultInjectingStore
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.committing import FAST, FaultCapture, StepRecorder, run_task, success_file, tree, write
from tests.fixtures.stores import CORE_STORES, store_destination

MARKER_TYPES = pytest.mark.parametrize("markers", ["batched", "direct"])


@pytest.fixture
def destination(protocol_destination: str) -> str:
    """Every store, the emulators included."""
    return protocol_destination


def config(markers: str = "batched", **overrides: object) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.markers.type": markers},
        save_retry_interval=0,
        store_retry_interval=0,
        **overrides,
    )


def new_job(
    destination: str, committers: list[TransactionalCommitter], job_id: str = "job-1", markers: str = "batched"
) -> TransactionalCommitter:
    committer = mc.create_committer(destination, job_id, "transactional", config=config(markers))
    assert isinstance(committer, TransactionalCommitter)
    committers.append(committer)
    committer.setup_job()
    return committer


def task_side_name(relative: str) -> str:
    """A destination file's name with the tid and attempt tag taken out again."""
    directory, name = posixpath.split(relative)
    parsed = parse_data_file_name(name)
    assert parsed is not None, relative
    stem, dot, rest = name.partition(".")
    original = stem.removesuffix(f"-tid-{parsed.tid}-{parsed.tag}") + dot + rest
    return posixpath.join(directory, original) if directory else original


def readable(committer: mc.Committer) -> dict[str, bytes]:
    """What a reader honouring the commit records sees, by task-side name (tids taken out)."""
    store = committer.store  # type: ignore[attr-defined]
    root = committer.destination_url
    result = {}
    for url in mc.committed_files(root, storage_options=committer.storage_options):  # type: ignore[attr-defined]
        relative = url[len(root) + 1 :]
        path = store.from_url(url)
        result[task_side_name(urllib_unquote(relative))] = store.fs.cat_file(path)
    return result


def urllib_unquote(text: str) -> str:
    import urllib.parse

    return urllib.parse.unquote(text)


def data_files(committer: TransactionalCommitter) -> dict[str, bytes]:
    """Every file in the destination outside ``_temporary`` and the records: what a naive reader would see."""
    return {
        path: data
        for path, data in tree(committer).items()
        if data is not None and not path.startswith("_") and "/_" not in path
    }


# --- the happy path -----------------------------------------------------------------------------------------------


@MARKER_TYPES
def test_job_commit_publishes_by_record_without_moving_a_file(
    destination: str, markers: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers, markers=markers)
    files = {"dt=2026-11-22/part-0.parquet": b"zero", "dt=2026-11-23/part-1.csv": b"one", "top level.json": b"2"}
    for index, (name, data) in enumerate(files.items()):
        run_task(committer, f"task_{index}", f"attempt_{index}_0", {name: data})
    before = data_files(committer)
    assert {task_side_name(p) for p in before} == set(files), "tasks write straight into the destination"
    assert readable(committer) == {}, "nothing is committed before job commit"

    success = committer.commit_job()

    assert data_files(committer) == before, "job commit moves no data file"
    assert readable(committer) == files
    tid = transaction_id("job-1")
    record = orjson.loads(tree(committer)[committed_record_name(tid)] or b"")
    assert sorted(record["added"]) == sorted(before) and record["removed"] == []
    assert tree(committer)[f"_started_{tid}"] == b""
    for path in before:
        parsed = parse_data_file_name(posixpath.basename(path))
        assert parsed is not None and parsed.tid == tid
    assert success.committer == "transactional" == success_file(committer).committer
    assert success.iostatistics.counters["committer_files_committed"] == 3
    assert not any(path.startswith("_temporary") for path in tree(committer))


def test_losing_and_failed_attempts_are_deleted_through_their_markers(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    """Speculation and retries: each attempt writes under its own name; only the accepted one stays."""
    committer = new_job(destination, committers)
    run_task(committer, "task_0_a", "attempt_0_a", {"p/part-0.csv": b"winner"})
    run_task(committer, "task_0_b", "attempt_0_b", {"p/part-0.csv": b"speculative loser"})
    failed = run_task(committer, "task_1_a", "attempt_1_a", {"part-1.csv": b"failed"}, commit=False)
    run_task(committer, "task_1_b", "attempt_1_b", {"part-1.csv": b"retry"})
    never_committed = run_task(committer, "task_2_a", "attempt_2_a", {"part-2.csv": b"not accepted"}, commit=False)
    assert len(data_files(committer)) == 5

    committer.commit_job({"task_0_a": "attempt_0_a", "task_1_b": "attempt_1_b"})

    assert readable(committer) == {"p/part-0.csv": b"winner", "part-1.csv": b"retry"}
    assert sorted(data_files(committer).values()) == [b"retry", b"winner"], "losers' files were deleted"
    assert failed.attempt_id != never_committed.attempt_id


def test_task_commit_and_job_commit_in_other_processes(
    tmp_path: Path, committers: list[TransactionalCommitter]
) -> None:
    """Tasks in separate processes send their markers to this process's marker server; one attempt is committed
    by yet another process, which finds its files through the markers."""
    destination = str(tmp_path / "out")
    committer = new_job(destination, committers)
    script = """
import sys, manifest_committer as mc
destination, attempt, commit = sys.argv[1], sys.argv[2], sys.argv[3] == "commit"
conf = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0)
with mc.create_committer(destination, "job-1", "transactional", config=conf) as committer:
    task = committer.setup_task("task_" + attempt, "attempt_" + attempt)
    for n in range(3):
        with task.fs.open(f"{task.work_path}/d={n}/part-{attempt}.csv", "wb") as handle:
            handle.write(attempt.encode())
    if commit:
        committer.commit_task(task)
"""
    for attempt, commit in (("0", "commit"), ("1", "commit"), ("2", "write-only")):
        subprocess.run([sys.executable, "-c", script, destination, attempt, commit], check=True, timeout=120)
    other = mc.create_committer(destination, "job-1", "transactional", config=FAST)
    committers.append(other)  # type: ignore[arg-type]
    other.commit_task(other.task_attempt("task_2", "attempt_2"))  # found through the markers
    server = committer.marker_server
    assert server is not None and len(server.markers()) == 9, "every task's markers reached the server"

    mc.create_committer(destination, "job-1", "transactional", config=FAST).commit_job()

    assert readable(committer) == {f"d={n}/part-{a}.csv": a.encode() for n in range(3) for a in "012"}


def test_rerun_after_the_commit_point_returns_the_summary_and_abort_keeps_the_output(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"a"})
    first = committer.commit_job()

    again = mc.create_committer(destination, "job-1", "transactional", config=FAST).commit_job()
    aborted = TransactionalCommitter(destination, "job-1", config=FAST).abort_job()

    assert again.filenames == first.filenames and again.job_id == "job-1"
    assert aborted.committed and aborted.deleted == ()
    assert readable(committer) == {"a.csv": b"a"}


def test_a_transaction_is_committed_once(destination: str, committers: list[TransactionalCommitter]) -> None:
    committer = new_job(destination, committers)
    committer.commit_job()
    with pytest.raises(mc.JobStateError, match="already committed"):
        mc.create_committer(destination, "job-1", "transactional", job_attempt=1).setup_job()


# --- abort and rollback ----------------------------------------------------------------------------------------------


@MARKER_TYPES
def test_abort_from_a_fresh_committer_deletes_exactly_the_jobs_files(
    destination: str, markers: str, committers: list[TransactionalCommitter]
) -> None:
    earlier = new_job(destination, committers, job_id="job-0", markers=markers)
    run_task(earlier, "task_0", "attempt_0", {"kept.csv": b"earlier job"})
    earlier.commit_job()
    before = tree(earlier)
    committer = new_job(destination, committers, markers=markers)
    for index in range(3):
        run_task(committer, f"task_{index}", f"attempt_{index}", {f"d/part-{index}.csv": b"x"}, commit=index < 2)
    committer.close()  # the driver is gone: its marker server or heartbeat with it

    aborted = TransactionalCommitter(destination, "job-1", config=config(markers)).abort_job()
    second = TransactionalCommitter(destination, "job-1", config=config(markers)).abort_job()

    assert len(aborted.deleted) == 3 and second.deleted == ()
    assert tree(earlier) == before, "the destination is byte for byte as before the job"


def test_a_crafted_marker_cannot_make_an_abort_delete_another_jobs_file(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    earlier = new_job(destination, committers, job_id="job-0", markers="direct")
    run_task(earlier, "task_0", "attempt_0", {"kept.csv": b"committed"})
    earlier.commit_job()
    (victim,) = data_files(earlier)
    before = tree(earlier)
    committer = new_job(destination, committers, markers="direct")
    run_task(committer, "task_0", "attempt_0", {"own.csv": b"the job's own"}, commit=False)
    committer.close()
    marker = TransactionPaths(committer.paths).markers.markers_dir + f"/{victim}.marker.CREATE"
    earlier.store.write_bytes(marker, b"")  # the closed committer's client is gone

    aborted = mc.create_committer(destination, "job-1", "transactional", config=FAST).abort_job()

    assert tree(earlier) == before, "the job's own file and state went; the file the crafted marker names stays"
    (skipped,) = aborted.skipped
    assert f"names {victim!r}, which is not a file of transaction" in skipped


def test_a_crafted_manifest_cannot_claim_another_attempts_file(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"mine"})
    loser = run_task(committer, "task_1", "attempt_1", {"b.csv": b"other attempt"}, commit=False)
    (loser_file,) = [p for p in data_files(committer) if attempt_tag(loser.attempt_id) in p]
    manifest_path = committer.paths.manifest_path("attempt_0")  # one manifest per attempt
    document = orjson.loads(committer.store.read_bytes(manifest_path))
    url = committer.store.to_url(committer.paths.dest + "/" + loser_file)
    document["files"].append({"s": url, "d": url, "z": 13})
    committer.store.write_bytes(manifest_path, orjson.dumps(document))
    before = tree(committer)

    with pytest.raises(mc.ManifestError, match="not a file of this task attempt"):
        committer.commit_job()

    assert tree(committer) == before


def test_rollback_undoes_dead_jobs_only(tmp_path: Path, committers: list[TransactionalCommitter]) -> None:
    destination = str(tmp_path / "out")
    alive = new_job(destination, committers, job_id="alive")
    run_task(alive, "task_0", "attempt_0", {"alive.csv": b"a"})
    dead_batched = new_job(destination, committers, job_id="dead-batched")
    run_task(dead_batched, "task_0", "attempt_0", {"dead-b.csv": b"b"})
    assert dead_batched.marker_server is not None
    dead_batched.marker_server.stop(flush=False)  # a killed driver: no answer, nothing flushed
    dead_direct = new_job(destination, committers, job_id="dead-direct", markers="direct")
    run_task(dead_direct, "task_0", "attempt_0", {"dead-d.csv": b"d"})
    dead_direct.close()
    committed = new_job(destination, committers, job_id="committed")
    run_task(committed, "task_0", "attempt_0", {"committed.csv": b"c"})
    committed.commit_job()
    short_expiry = config(heartbeat_expiry_seconds=0.5)
    time.sleep(0.6)

    rolled = mc.rollback(destination, config=short_expiry)

    assert sorted(r.job_id for r in rolled) == ["dead-batched", "dead-direct"]
    names = {task_side_name(p) for p in data_files(alive)}
    assert names == {"alive.csv", "committed.csv"}
    assert readable(alive) == {"committed.csv": b"c"}


def test_rollback_of_a_named_job_without_markers_is_refused(tmp_path: Path) -> None:
    destination = str(tmp_path / "out")
    with mc.create_committer(destination, "manifest-job", "manifest") as committer:
        committer.setup_job()
        with pytest.raises(mc.CommitterError, match="has no write markers"):
            mc.rollback(destination, "manifest-job")


def test_marker_server_killed_mid_job_rollback_is_exact_from_the_files(tmp_path: Path) -> None:
    """A driver process (with its marker server) is SIGKILLed while tasks write; rollback from the files alone
    deletes exactly the files the tasks created, and a file of another tool stays."""
    destination = tmp_path / "out"
    destination.mkdir()
    (destination / "other-tool.csv").write_bytes(b"not ours")
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(destination)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == "ready"
        for attempt in range(4):
            subprocess.run([sys.executable, "-c", _TASK, str(destination), str(attempt)], check=True, timeout=120)
    finally:
        driver.kill()
        driver.wait()
    written = {p.relative_to(destination) for p in destination.rglob("*.csv")} - {Path("other-tool.csv")}
    assert len(written) == 8
    time.sleep(0.6)  # the driver's lease (renewed until the kill) expires: 0.5 s for this rollback

    (rolled,) = mc.rollback(str(destination), config=config(heartbeat_expiry_seconds=0.5))

    assert rolled.job_id == "job-killed" and len(rolled.deleted) == 8
    assert sorted(p.name for p in destination.rglob("*") if p.is_file()) == ["other-tool.csv"]


_DRIVER = """
import sys, time, manifest_committer as mc
committer = mc.create_committer(sys.argv[1], "job-killed", "transactional")
committer.setup_job()
print("ready", flush=True)
time.sleep(600)
"""
_TASK = """
import sys, manifest_committer as mc
with mc.create_committer(sys.argv[1], "job-killed", "transactional") as committer:
    task = committer.setup_task("task_" + sys.argv[2], "attempt_" + sys.argv[2])
    for n in range(2):
        with task.fs.open(f"{task.work_path}/d={n}/part-{sys.argv[2]}.csv", "wb") as handle:
            handle.write(b"x")
"""


# --- overwrite, readers and vacuum -----------------------------------------------------------------------------------


def test_overwrite_lists_replaced_files_as_removed_and_vacuum_deletes_them_later(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    first = new_job(destination, committers, job_id="job-0")
    run_task(first, "task_0", "attempt_0", {"old.csv": b"old"})
    first.commit_job()
    first.store.write_bytes(first.paths.dest + "/foreign.csv", b"another tool's file")
    assert readable_names(first) == {"old.csv", "foreign.csv"}
    second = new_job(destination, committers, job_id="job-1")
    run_task(second, "task_0", "attempt_0", {"new.csv": b"new"})
    replaced = [
        second.store.from_url(url) for url in mc.committed_files(second.destination_url, second.storage_options)
    ]

    count = second.commit_job_replacing(replaced).replaced

    assert count == 2
    assert readable_names(second) == {"new.csv"}, "readers stop seeing replaced files at the commit point"
    record = orjson.loads(second.store.read_bytes(TransactionPaths(second.paths).committed))
    assert len(record["removed"]) == 2
    assert mc.vacuum(second.destination_url, 1.0, storage_options=second.storage_options) == []
    deleted = mc.vacuum(second.destination_url, 0.0, storage_options=second.storage_options, now=time.time() + 5)
    assert [task_side_name(url.rsplit("/", 1)[1]) for url in deleted] == ["old.csv"], "never a file without a tid"
    assert {task_side_name(p) if parse_data_file_name(posixpath.basename(p)) else p for p in data_files(second)} == {
        "new.csv",
        "foreign.csv",
    }


def test_vacuum_deletes_stragglers_but_not_committed_or_running_jobs_files(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"good.csv": b"good"})
    committer.commit_job()
    # A killed attempt that carries the committed tid but was never committed: a straggler.
    late = TransactionalCommitter(destination, "job-1", config=config("direct"))
    committers.append(late)
    write(late.task_attempt("task_9", "attempt_9"), "late.csv", b"straggler")
    running = new_job(destination, committers, job_id="job-running")
    run_task(running, "task_0", "attempt_0", {"running.csv": b"uncommitted, still running"})
    assert readable(committer) == {"good.csv": b"good"}

    deleted = mc.vacuum(committer.destination_url, 0.0, storage_options=committer.storage_options, now=time.time() + 5)

    assert [task_side_name(url.rsplit("/", 1)[1]) for url in deleted] == ["late.csv"]
    assert sorted(task_side_name(p) for p in data_files(committer)) == ["good.csv", "running.csv"]


def test_readers_of_one_partition_judge_by_its_own_record_and_vacuum_deletes_nothing_committed(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    """Each partition the job wrote into holds its own ``_committed_<tid>``: read alone it shows its committed
    files (the records of other partitions and the root's, above it, are never read), and its vacuum deletes
    none of them."""
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "dt=2/b.csv": b"b"})
    committer.commit_job()
    partition = committer.destination_url + "/dt=1"
    before = data_files(committer)

    found = mc.committed_files(partition, committer.storage_options)
    assert [task_side_name(urllib_unquote(url.removeprefix(partition + "/"))) for url in found] == ["a.csv"]
    assert mc.vacuum(partition, 0.0, storage_options=committer.storage_options, now=time.time() + 5) == []
    assert data_files(committer) == before
    assert readable(committer) == {"dt=1/a.csv": b"a", "dt=2/b.csv": b"b"}


def test_a_crafted_commit_record_is_refused_by_readers(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers)
    committer.store.write_bytes(committer.paths.dest + "/_committed_5", b'{"added": ["../outside.csv"], "removed": []}')
    with pytest.raises(mc.ManifestError, match=r"_committed_5.*added\[0\]"):
        mc.committed_files(committer.destination_url, committer.storage_options)
    with pytest.raises(mc.ConfigError, match="retention_hours"):
        mc.vacuum(committer.destination_url, -1)


def readable_names(committer: TransactionalCommitter) -> set[str]:
    names = set()
    for url in mc.committed_files(committer.destination_url, committer.storage_options):
        name = url.rsplit("/", 1)[1]
        names.add(task_side_name(name) if parse_data_file_name(name) else name)
    return names


# --- what a task may do ---------------------------------------------------------------------------------------------


def test_task_filesystem_refuses_hidden_names_paths_outside_and_renames(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    committer = new_job(destination, committers)
    task = committer.setup_task("task_0", "attempt_0")
    for bad in ("_SUCCESS", ".hidden", "dir/_x.csv", "a/../b.csv"):
        with pytest.raises(mc.CommitterError, match="must not"):
            write(task, bad, b"x")
    with pytest.raises(mc.CommitterError, match="only below its work path"):
        task.fs.open(committer.paths.dest + "/elsewhere.csv", "wb")
    write(task, "a.csv", b"a")
    assert task.fs.cat_file(task.work_path + "/a.csv") == b"a"
    assert task.fs.ls(task.work_path, detail=False) == [task.work_path + "/a.csv"]
    with pytest.raises(mc.CommitterError, match="cannot rename"):
        committer.commit_task(task, {"a.csv": "b.csv"})


def test_an_unknown_marker_type_is_named() -> None:
    with pytest.raises(mc.ConfigError, match=r"markers\.type"):
        mc.CommitterConfig.from_hadoop_conf({"mapreduce.manifest.committer.markers.type": "timeline"})
    with pytest.raises(mc.CommitterError, match="'timeline'"):
        mc.create_committer(
            "memory://x/out",
            "job-1",
            "transactional",
            config=mc.CommitterConfig(markers_type="timeline"),  # type: ignore[arg-type]
        )


def test_names_carry_the_tid_and_the_attempt_tag() -> None:
    tid = transaction_id("job-1")
    assert tid == transaction_id("job-1") != transaction_id("job-2")
    assert tid.isdigit() and int(tid) < 2**63
    name = f"part-00000-tid-{tid}-{attempt_tag('a')}.snappy.parquet"
    parsed = parse_data_file_name(name)
    assert parsed is not None and parsed.tid == tid and parsed.tag == attempt_tag("a")
    assert parse_data_file_name("part-00000.parquet") is None
    assert parse_data_file_name(f"_committed-tid-{tid}-{attempt_tag('a')}") is None
    assert os.path.basename(name) == name


def test_a_later_job_attempt_deletes_the_files_of_the_attempt_that_died(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    first = new_job(destination, committers)
    run_task(first, "task_0", "attempt_0_0", {"a.csv": b"attempt 0"})
    first.close()
    second = TransactionalCommitter(destination, "job-1", 1, config())
    committers.append(second)
    second.setup_job()
    run_task(second, "task_0", "attempt_0_1", {"a.csv": b"attempt 1"})

    second.commit_job()

    assert readable(second) == {"a.csv": b"attempt 1"}
    assert sorted(data_files(second).values()) == [b"attempt 1"]


def test_a_running_task_keeps_a_direct_marker_job_alive_without_its_driver(
    tmp_path: Path, committers: list[TransactionalCommitter]
) -> None:
    """Spark's ``format("manifest")`` sets the job up in a worker that exits: the running tasks' beats then say
    the job is alive, and once they end (their beats removed) the expired driver beat says it is dead."""
    destination = str(tmp_path / "out")
    short = config("direct", heartbeat_expiry_seconds=0.4)
    driver = new_job(destination, committers, markers="direct")
    driver.close()  # the driver's heartbeat stops with it
    task_committer = TransactionalCommitter(destination, "job-1", config=short)
    committers.append(task_committer)
    with task_committer.keep_alive("attempt_0"):
        run_task(task_committer, "task_0", "attempt_0", {"a.csv": b"a"})
        time.sleep(0.6)
        assert mc.rollback(destination, config=short) == [], "a task is running: the job is alive"
    time.sleep(0.5)

    (rolled,) = mc.rollback(destination, config=short)

    assert len(rolled.deleted) == 1 and "heartbeat" in rolled.reason
    assert data_files(task_committer) == {}


def test_a_rerun_of_an_old_jobs_commit_leaves_a_later_jobs_success(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    first = new_job(destination, committers, job_id="job-a")
    run_task(first, "task_0", "attempt_0", {"a.csv": b"a"})
    first.commit_job()
    second = new_job(destination, committers, job_id="job-b")
    run_task(second, "task_0", "attempt_0", {"b.csv": b"b"})
    second.commit_job()

    again = TransactionalCommitter(destination, "job-a", config=FAST).commit_job()

    assert again.job_id == "job-a" and len(again.filenames) == 1
    assert success_file(second).job_id == "job-b"


# --- after a kill (the cases tests/protocols/transactional/test_kill.py found, each made small) -----------------


def test_a_rerun_and_an_abort_remove_directories_a_killed_run_emptied(
    tmp_path: Path, committers: list[TransactionalCommitter]
) -> None:
    """A run killed after deleting a file and before removing its emptied directory: the rerun (or the second
    abort) finds no file there, and must still remove the directory."""
    destination = str(tmp_path / "out")
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0_0", {"only-failed/part-0.csv": b"failed"}, commit=False)
    run_task(committer, "task_0", "attempt_0_1", {"part-0.csv": b"retry"})
    (failed,) = tmp_path.glob("out/only-failed/*.csv")
    failed.unlink()  # what the killed job commit had done

    committer.commit_job({"task_0": "attempt_0_1"})

    assert not (tmp_path / "out" / "only-failed").exists()
    aborted = new_job(destination, committers, job_id="job-2")
    run_task(aborted, "task_0", "attempt_0_0", {"p/part-0.csv": b"x"})
    aborted.close()
    (written,) = tmp_path.glob("out/p/*.csv")
    written.unlink()  # what the killed abort had done

    TransactionalCommitter(destination, "job-2", config=FAST).abort_job()

    assert not (tmp_path / "out" / "p").exists()


def test_a_rerun_after_the_commit_point_counts_the_jobs_files_in_success(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    """Killed between ``_committed_<tid>`` and ``_SUCCESS``: the rerun's ``_SUCCESS`` counts the job's files and
    bytes (from the files in place) and its tasks, as the commit that died would have."""
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"aaa", "d/b.csv": b"bb"})
    run_task(committer, "task_1", "attempt_1", {"c.csv": b"c"})
    committer.close()
    no_success = Fault("write_bytes", "_SUCCESS", error=lambda: PermissionError("injected: killed"), times=None)
    dying = TransactionalCommitter(
        destination, "job-1", config=FAST, store_wrapper=lambda inner: FaultInjectingStore(inner, [no_success])
    )
    committers.append(dying)
    with pytest.raises(PermissionError):
        dying.commit_job()
    rerun = TransactionalCommitter(destination, "job-1", config=FAST)
    committers.append(rerun)
    assert committed_record_name(transaction_id("job-1")) in tree(rerun)

    again = rerun.commit_job()

    for success in (again, success_file(rerun)):
        counters = success.iostatistics.counters
        assert counters["committer_files_committed"] == 3
        assert counters["committer_bytes_committed"] == 6
        assert counters["committer_tasks_completed"] == 2


def test_a_store_that_takes_batches_reads_the_manifests_a_batch_a_call(
    tmp_path: Path, committers: list[TransactionalCommitter]
) -> None:
    """Where a store puts a batch of calls in flight at once (Azure, GCS), the job commit reads its manifests
    ``CALLS_A_BATCH`` a call, not one a call, and commits every task."""
    destination = str(tmp_path / "out")
    committer = new_job(destination, committers)
    tasks = CALLS_A_BATCH + 3
    for index in range(tasks):
        run_task(committer, f"task_{index}", f"attempt_{index}", {f"f{index}.csv": b"x" * index})
    committer.close()
    wrapped: list[InFlightTogether] = []

    def together(inner: StoreOperations) -> StoreOperations:
        wrapped.append(InFlightTogether(inner))
        return wrapped[-1]

    batching = TransactionalCommitter(destination, "job-1", config=FAST, store_wrapper=together)
    committers.append(batching)
    batching.commit_job()

    manifests = [batch for store in wrapped for batch in store.read_batches if batch[0].endswith(MANIFEST_SUFFIX)]
    assert sorted(len(batch) for batch in manifests) == [3, CALLS_A_BATCH]
    assert success_file(batching).iostatistics.counters["committer_tasks_completed"] == tasks
    assert sorted(readable(batching)) == sorted(f"f{index}.csv" for index in range(tasks))


class _KilledInsideCleanup(WrappingStore):
    """The first recursive delete of the job's state removes ``MARKERS.type`` and then the process dies: the
    store's own order inside one delete is not ours to choose."""

    def __init__(self, inner: StoreOperations, type_file: str) -> None:
        super().__init__(inner)
        self.type_file = type_file
        self.fired = False

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        if operation == "delete_dir" and "/_temporary/" in path and not self.fired:
            self.fired = True
            self.inner.delete_file(self.type_file)
            raise PermissionError(f"injected: killed while deleting {path}")
        return call()


def test_an_abort_killed_inside_its_cleanup_can_be_run_again(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    """The batched marker files go before the cleanup: an abort killed after the cleanup removed
    ``MARKERS.type`` must not leave ``MARKERS<i>`` that the reader refuses without it."""
    earlier = new_job(destination, committers, job_id="job-0")
    run_task(earlier, "task_0", "attempt_0", {"kept.csv": b"earlier job"})
    earlier.commit_job()
    before = tree(earlier)
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"d/part-0.csv": b"x"})
    run_task(committer, "task_1", "attempt_1", {"part-1.csv": b"y"})
    committer.close()
    type_file = committer.marker_paths.type_file
    dying = TransactionalCommitter(
        destination, "job-1", config=FAST, store_wrapper=lambda inner: _KilledInsideCleanup(inner, type_file)
    )
    committers.append(dying)
    with pytest.raises(PermissionError):
        dying.abort_job()

    TransactionalCommitter(destination, "job-1", config=FAST).abort_job()

    assert tree(earlier) == before


def test_a_rerun_finishes_with_the_attempts_the_killed_commit_began_with(
    destination: str, committers: list[TransactionalCommitter]
) -> None:
    """``commit-started`` holds the accepted attempts: a rerun told other ones is refused, rather than deleting
    the accepted attempt's files as debris and committing an empty job."""
    committer = new_job(destination, committers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"accepted"})
    committer.close()
    no_commit = Fault("write_bytes", "_committed_", error=lambda: PermissionError("injected: killed"), times=None)
    dying = TransactionalCommitter(
        destination, "job-1", config=FAST, store_wrapper=lambda inner: FaultInjectingStore(inner, [no_commit])
    )
    committers.append(dying)
    with pytest.raises(PermissionError):
        dying.commit_job({"task_0": "attempt_0"})

    with pytest.raises(mc.JobStateError, match="already began committing"):
        TransactionalCommitter(destination, "job-1", config=FAST).commit_job({})
    rerun = TransactionalCommitter(destination, "job-1", config=FAST)
    committers.append(rerun)
    rerun.commit_job({"task_0": "attempt_0"})

    assert readable(rerun) == {"a.csv": b"accepted"}


# --- a crash at every step of the job commit, on every store ------------------------------------------------------


def _crash_scenario(destination: str, committers: list[TransactionalCommitter]) -> TransactionalCommitter:
    """An earlier committed job, then a job with a winner, a speculative loser and a failed attempt per task."""
    earlier = new_job(destination, committers, job_id="job-0")
    run_task(earlier, "task_0", "attempt_0", {"dt=0/kept.csv": b"earlier"})
    earlier.commit_job()
    job = new_job(destination, committers)
    run_task(job, "task_0_a", "attempt_0_a", {"dt=1/part-0.csv": b"winner 0"})
    run_task(job, "task_0_b", "attempt_0_b", {"dt=1/part-0.csv": b"loser 0", "dt=9/only-loser.csv": b"x"})
    run_task(job, "task_1_a", "attempt_1_a", {"dt=2/part-1.csv": b"failed"}, commit=False)
    run_task(job, "task_1_b", "attempt_1_b", {"dt=2/part-1.csv": b"winner 1"})
    job.close()  # its marker server stops: the crashed commit, the rerun and the abort read the files
    return earlier


LOCAL_ONLY_STEPS = ("remove_empty_dir", "rename_dir", "mkdirs")
ACCEPTED = {"task_0_a": "attempt_0_a", "task_1_b": "attempt_1_b"}
EXPECTED = {"dt=0/kept.csv": b"earlier", "dt=1/part-0.csv": b"winner 0", "dt=2/part-1.csv": b"winner 1"}


def _steps_of_a_commit(tmp_path: Path) -> list[tuple[str, str]]:
    """The distinct steps of the scenario's job commit (digits folded, so every MARKERS<i> or task is one step),
    each as (operation, path relative to the destination), from a reference run on local disk; the steps every
    store takes (not those of real directories and the trash, which only local disk has)."""
    destination = str(tmp_path / "reference")
    built: list[TransactionalCommitter] = []
    try:
        _crash_scenario(destination, built)
        calls: list[tuple[str, str]] = []
        with TransactionalCommitter(
            destination, "job-1", config=FAST, store_wrapper=lambda inner: StepRecorder(inner, calls)
        ) as committer:
            committer.commit_job(ACCEPTED)
    finally:
        for committer in built:
            committer.close()
    root = destination.rstrip("/") + "/"
    steps: dict[tuple[str, str], tuple[str, str]] = {}
    for operation, path in calls:
        relative = path.split(" -> ")[0].removeprefix(root)
        if operation in LOCAL_ONLY_STEPS or TRASH_DIR in relative:
            continue  # steps of stores with real directories (and a trash); the SIGKILL tests cover them
        steps.setdefault((operation, re.sub(r"[0-9]+", "N", relative)), (operation, relative))
    return list(steps.values())


@functools.cache
def commit_steps() -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as directory:
        return _steps_of_a_commit(Path(directory))


MUTATIONS = ("write_bytes", "delete_file", "delete_dir", "rename_file")


@pytest.fixture(params=CORE_STORES)
def core_destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_destination(request, tmp_path)


@pytest.mark.parametrize("then", ["rerun", "abort"])
@pytest.mark.parametrize("step", range(len(commit_steps())), ids=lambda i: "{}:{}".format(*commit_steps()[i]))
def test_a_crash_at_any_step_of_the_job_commit_then_rerun_or_abort(
    core_destination: str, committers: list[TransactionalCommitter], step: int, then: str
) -> None:
    """The commit fails right after one of its store calls took effect (a crash there); a fresh committer then
    finishes it, or aborts: before the commit point back to the destination as it was, after it the output kept.
    Memory and local disk: every step."""
    _crash_then(core_destination, committers, step, then)


CHANGING_STEPS = [index for index, (operation, _) in enumerate(commit_steps()) if operation in MUTATIONS]


@pytest.mark.parametrize("then", ["rerun", "abort"])
@pytest.mark.parametrize("step", CHANGING_STEPS, ids=lambda i: "{}:{}".format(*commit_steps()[i]))
def test_a_crash_after_any_change_of_the_job_commit_on_the_emulators(
    cloud_destination: str, committers: list[TransactionalCommitter], step: int, then: str
) -> None:
    """Azurite and fake-gcs-server: a crash after each step that changes the store. A crash after a read leaves
    the store as a crash after the change before it does, so these are all the states a crash can leave."""
    _crash_then(cloud_destination, committers, step, then)


def _crash_then(destination: str, committers: list[TransactionalCommitter], step: int, then: str) -> None:
    operation, relative = commit_steps()[step]
    earlier = _crash_scenario(destination, committers)
    before_job = {p: d for p, d in tree(earlier).items() if "job-1" not in p and transaction_id("job-1") not in p}
    before_job = {p: d for p, d in before_job.items() if not p.startswith("dt=") or p.startswith("dt=0")}
    fault = Fault(operation, relative, when="after", error=lambda: PermissionError("injected crash"))
    capture = FaultCapture([fault])
    crashing = TransactionalCommitter(destination, "job-1", config=FAST, store_wrapper=capture)
    committers.append(crashing)
    with contextlib.suppress(PermissionError):
        crashing.commit_job(ACCEPTED)
    assert capture.injecting.injected[operation] == 1, "the step was reached"
    committed = TransactionPaths(crashing.paths).committed
    past_commit_point = earlier.store.info(committed) is not None
    fresh = TransactionalCommitter(destination, "job-1", config=FAST)
    committers.append(fresh)

    if then == "rerun":
        fresh.commit_job(ACCEPTED)
        assert readable(earlier) == EXPECTED
        assert success_file(earlier).job_id == "job-1"
        assert not any(path.startswith("_temporary/job-1") for path in tree(earlier))
    else:
        fresh.abort_job()
        if past_commit_point:
            assert readable(earlier) == EXPECTED
        else:
            assert {p: d for p, d in tree(earlier).items() if not p.startswith("_temporary")} == {
                p: d for p, d in before_job.items() if not p.startswith("_temporary")
            }
        assert TransactionalCommitter(destination, "job-1", config=FAST).abort_job().deleted == ()
