"""Black-box attacks on the transactional protocol (issue 23), each reproduced as it was found on the landed code:
state crafted by someone who is not the job (a marker line, a marker POSTed to the server, a commit record planted
above the destination, a symbolic link), names written by Databricks, a late losing attempt, and the races of
``vacuum``. Real jobs on local disk (symbolic links only exist there) and in memory."""

from __future__ import annotations

import os
import posixpath
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.protocols.transactional import readers
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import transaction_id
from manifest_committer.store import StoreOperations
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.committing import run_task

TID_OF_OTHER_TOOL = "7628641425835151768"
DATABRICKS_NAME = f"part-00000-tid-{TID_OF_OTHER_TOOL}-a8c83893-f6af-49ab-9e0d-8e1181b7e684-37-1-c000.snappy.parquet"
"""A name Databricks' transactional commit gives a data file (docs/formats.md)."""


def config(markers: str = "batched", **overrides: Any) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.markers.type": markers},
        save_retry_interval=0,
        store_retry_interval=0,
        **overrides,
    )


@pytest.fixture
def dest(tmp_path: Path) -> str:
    out = tmp_path / "out"
    out.mkdir()
    return str(out)


def new_job(
    dest: str,
    committers: list[TransactionalCommitter],
    job_id: str = "job-1",
    markers: str = "batched",
    *,
    store_wrapper: Callable[[StoreOperations], StoreOperations] | None = None,
    **overrides: Any,
) -> TransactionalCommitter:
    committer = mc.create_committer(
        dest, job_id, "transactional", config=config(markers, **overrides), store_wrapper=store_wrapper
    )
    assert isinstance(committer, TransactionalCommitter)
    committers.append(committer)
    committer.setup_job()
    return committer


def files_under(root: str) -> dict[str, bytes]:
    """Every file below ``root`` outside ``_temporary``, by relative path."""
    found = {}
    for directory, names, files in os.walk(root):
        names[:] = [name for name in names if name != "_temporary"]
        for name in files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


def data_files(dest: str) -> set[str]:
    return {path for path in files_under(dest) if not os.path.basename(path).startswith("_")}


def ours(dest: str, job_id: str) -> set[str]:
    return {path for path in data_files(dest) if f"-tid-{transaction_id(job_id)}-" in path}


def craft_marker_line(committer: TransactionalCommitter, line: str) -> None:
    """Append ``line`` to a ``MARKERS<i>`` file of the job, as anyone who can write the job's state could."""
    markers_dir = Path(committer.marker_paths.markers_dir)
    markers_dir.mkdir(parents=True, exist_ok=True)
    if not (markers_dir / "MARKERS.type").exists():
        (markers_dir / "MARKERS.type").write_bytes(b"BATCHED")
    with open(markers_dir / "MARKERS19", "ab") as handle:
        handle.write(line.encode() + b"\n")


def killed(committer: TransactionalCommitter) -> None:
    """The driver dies: its marker server stops answering, its lease is no longer renewed."""
    if committer.marker_server is not None:
        committer.marker_server.stop(flush=False)
    committer.close()


# --- markers naming files the job did not write ------------------------------------------------------------------


@pytest.mark.parametrize("markers", ["batched", "direct"])
def test_a_crafted_marker_does_not_stop_the_job_commit_and_deletes_nothing_it_names(
    dest: str, committers: list[TransactionalCommitter], markers: str
) -> None:
    """Found: the job commit failed ("refusing to delete it")."""
    Path(dest, "other-tool.csv").write_bytes(b"a file of another tool")
    committer = new_job(dest, committers, markers=markers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"a"})
    craft_marker_line(committer, "other-tool.csv.marker.CREATE")

    summary = committer.commit_job()

    assert Path(dest, "other-tool.csv").read_bytes() == b"a file of another tool"
    assert [url.rsplit("/", 1)[1].split("-tid-")[0] for url in mc.committed_files(dest)] == ["a", "other-tool.csv"]
    assert summary.diagnostics["markers.skipped"] == "1"
    assert "other-tool.csv" in summary.diagnostics["markers.skipped.detail"]


def test_a_crafted_marker_does_not_stop_an_abort_which_deletes_the_jobs_own_files(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Found: the abort failed too, and the job's uncommitted file stayed."""
    Path(dest, "other-tool.csv").write_bytes(b"kept")
    committer = new_job(dest, committers)
    run_task(committer, "task_0", "attempt_0", {"a.csv": b"a"})
    craft_marker_line(committer, "other-tool.csv.marker.CREATE")
    craft_marker_line(committer, "../outside.csv.marker.CREATE")
    killed(committer)

    result = TransactionalCommitter(dest, "job-1", config=config()).abort_job()

    assert data_files(dest) == {"other-tool.csv"}, "the job's own file went, the named one stayed"
    assert len(result.skipped) == 2
    assert not Path(dest, "_temporary").exists() or not any(Path(dest, "_temporary").iterdir())


def test_a_marker_posted_without_the_secret_is_refused_and_recorded_nowhere(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Found: any local process could POST a marker for a file the job never wrote."""
    import http.client

    committer = new_job(dest, committers)
    state = orjson.loads(Path(committer.marker_paths.server_state).read_bytes())
    connection = http.client.HTTPConnection(state["host"], state["port"], timeout=5)
    body = orjson.dumps({"marker": "victim.csv.marker.CREATE"})
    connection.request("POST", "/v1/markers/create", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    text = answer.read()

    assert answer.status == 401, text
    assert committer.marker_server is not None and committer.marker_server.markers() == frozenset()
    secret = Path(committer.marker_paths.markers_dir, "secret").read_bytes().strip()
    assert secret and secret not in text and secret not in orjson.dumps(state)


# --- readers never look above the destination -------------------------------------------------------------------


def test_a_record_planted_above_the_destination_changes_nothing_readers_decide(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Found: a record in the parent (``/tmp`` is writable by everyone) made vacuum delete a committed file and
    committed_files list an uncommitted one."""
    committed = new_job(dest, committers, "job-committed")
    run_task(committed, "task_0", "attempt_0", {"kept.csv": b"kept"})
    committed.commit_job()
    (kept,) = ours(dest, "job-committed")
    running = new_job(dest, committers, "job-running")
    run_task(running, "task_0", "attempt_0", {"not-yet.csv": b"uncommitted"})
    (uncommitted,) = ours(dest, "job-running")
    parent = Path(dest).parent
    out = Path(dest).name
    planted = {"added": [f"{out}/{uncommitted}"], "removed": [f"{out}/{kept}"]}
    for job_id in ("job-committed", "job-running"):
        (parent / f"_committed_{transaction_id(job_id)}").write_bytes(orjson.dumps(planted))

    listed = {url.rsplit("/", 1)[1] for url in mc.committed_files(dest)}
    deleted = mc.vacuum(dest, retention_hours=0, now=time.time() + 10)

    assert listed == {kept}
    assert deleted == []
    assert Path(dest, kept).read_bytes() == b"kept"


# --- Databricks names -----------------------------------------------------------------------------------------------


def test_databricks_names_are_judged_by_their_records(dest: str) -> None:
    """Found: an uncommitted Databricks file was listed as another tool's, and vacuum never removed it."""
    committed_name = DATABRICKS_NAME.replace("part-00000", "part-00001")
    for name in (DATABRICKS_NAME, committed_name):
        Path(dest, name).write_bytes(b"parquet")
    Path(dest, f"_committed_{TID_OF_OTHER_TOOL}").write_bytes(orjson.dumps({"added": [committed_name], "removed": []}))
    Path(dest, "other-tool.csv").write_bytes(b"no tid")

    listed = sorted(url.rsplit("/", 1)[1] for url in mc.committed_files(dest))
    deleted = mc.vacuum(dest, retention_hours=0, now=time.time() + 10)

    assert listed == ["other-tool.csv", committed_name]
    assert [url.rsplit("/", 1)[1] for url in deleted] == [DATABRICKS_NAME]
    assert data_files(dest) == {"other-tool.csv", committed_name}


# --- a late losing attempt ----------------------------------------------------------------------------------------


def test_a_late_losing_attempt_never_displaces_the_accepted_one(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Found: the loser's task commit replaced the winner's record, and the job commit failed ("manifest of
    attempt _0, but attempt _1 was accepted")."""
    committer = new_job(dest, committers)
    loser = run_task(committer, "task_0", "attempt_0_0", {"a.csv": b"loser"}, commit=False)
    run_task(committer, "task_0", "attempt_0_1", {"a.csv": b"winner"})
    committer.commit_task(loser)  # late: after the winner

    committer.commit_job({"task_0": "attempt_0_1"})

    (committed,) = mc.committed_files(dest)
    assert Path(committed.removeprefix("file://")).read_bytes() == b"winner"
    assert len(data_files(dest)) == 1, "the loser's file was deleted"


def test_without_accepted_attempts_the_first_saved_attempt_is_committed(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Two attempts of a task both commit and nobody says which was accepted: the first saved wins, as under the
    upload protocol (a commit coordinator accepts the first attempt to ask), and the other's file goes."""
    committer = new_job(dest, committers)
    first = run_task(committer, "task_0", "attempt_0_1", {"a.csv": b"first"}, commit=False)
    second = run_task(committer, "task_0", "attempt_0_0", {"a.csv": b"second"}, commit=False)
    committer.commit_task(first)
    time.sleep(0.01)
    committer.commit_task(second)

    committer.commit_job()

    (committed,) = mc.committed_files(dest)
    assert Path(committed.removeprefix("file://")).read_bytes() == b"first"
    assert len(data_files(dest)) == 1


# --- vacuum and the jobs that run or died ---------------------------------------------------------------------------


def test_vacuum_deletes_the_files_of_a_dead_job_past_the_retention(
    dest: str, committers: list[TransactionalCommitter]
) -> None:
    """Found: vacuum never deleted the files of a job that died (its state stays under ``_temporary``)."""
    dead = new_job(dest, committers, "job-dead", heartbeat_expiry_seconds=0.2)
    run_task(dead, "task_0", "attempt_0", {"dead.csv": b"dead"})
    killed(dead)
    alive = new_job(dest, committers, "job-alive")
    run_task(alive, "task_0", "attempt_0", {"alive.csv": b"alive"})
    time.sleep(0.3)

    deleted = mc.vacuum(dest, retention_hours=0, now=time.time() + 10)

    assert [url.rsplit("/", 1)[1].split("-tid-")[0] for url in deleted] == ["dead"]
    assert data_files(dest) == ours(dest, "job-alive"), "the live job's file stays, whatever its age"


def test_vacuum_learns_which_jobs_live_before_it_reads_the_table(
    dest: str, committers: list[TransactionalCommitter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a job that committed between vacuum's read of the table and its listing of the running jobs lost
    its just-committed file (with a retention shorter than the job's run time)."""
    job = new_job(dest, committers)
    run_task(job, "task_0", "attempt_0", {"a.csv": b"committed meanwhile"})
    read_table = readers._read_table

    def read_then_commit(*args: Any, **kwargs: Any) -> Any:
        table = read_table(*args, **kwargs)
        if not Path(dest, f"_committed_{transaction_id('job-1')}").exists():
            job.commit_job()
        return table

    monkeypatch.setattr(readers, "_read_table", read_then_commit)

    deleted = mc.vacuum(dest, retention_hours=0, now=time.time() + 10)

    assert deleted == []
    (committed,) = mc.committed_files(dest)
    assert Path(committed.removeprefix("file://")).read_bytes() == b"committed meanwhile"


# --- links out of the destination -------------------------------------------------------------------------------


def test_rollback_and_abort_never_follow_a_link_out_of_the_destination(
    dest: str, tmp_path: Path, committers: list[TransactionalCommitter]
) -> None:
    """Found: rollback followed a directory's symbolic link out of the destination and unlinked the file there."""
    committer = new_job(dest, committers, heartbeat_expiry_seconds=0.2)
    run_task(committer, "task_0", "attempt_0", {"p/a.csv": b"a"})
    (own,) = ours(dest, "job-1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / posixpath.basename(own)
    victim.write_bytes(b"not the job's")
    os.symlink(outside, Path(dest, "link"))
    craft_marker_line(committer, f"link/{posixpath.basename(own)}.marker.CREATE")
    killed(committer)
    time.sleep(0.3)

    (rolled,) = mc.rollback(dest)

    assert victim.read_bytes() == b"not the job's"
    assert not Path(dest, own).exists(), "the job's own file was deleted"
    assert rolled.error is None and len(rolled.skipped) == 1


class _PauseBefore(WrappingStore):
    """Holds the first write whose path contains ``part`` until released."""

    def __init__(self, inner: StoreOperations, part: str, reached: threading.Event, release: threading.Event):
        super().__init__(inner)
        self.part, self.reached, self.release = part, reached, release

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        if operation == "write_bytes" and self.part in path and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(20)
        return call()


def test_a_job_in_setup_is_never_taken_for_dead(dest: str, committers: list[TransactionalCommitter]) -> None:
    """Suspected: a job between creating ``markers/`` and publishing its server looked dead to rollback."""
    reached, release = threading.Event(), threading.Event()
    setup_error: list[BaseException] = []

    def set_up() -> None:
        try:
            new_job(dest, committers, store_wrapper=lambda inner: _PauseBefore(inner, "server.json", reached, release))
        except BaseException as error:  # reported below
            setup_error.append(error)

    thread = threading.Thread(target=set_up)
    thread.start()
    try:
        assert reached.wait(20)
        assert Path(dest, "_temporary", "job-1", "00", "markers").is_dir()

        rolled = mc.rollback(dest)
    finally:
        release.set()
        thread.join(20)

    assert rolled == []
    assert setup_error == []
    (job,) = committers
    run_task(job, "task_0", "attempt_0", {"a.csv": b"a"})
    job.commit_job()
    assert len(mc.committed_files(dest)) == 1
