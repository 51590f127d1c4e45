"""A reader of one partition of a transactional table: the ``_committed_<tid>`` in every directory the job wrote
into (or removed a file from), beside the files it governs, as Databricks writes them.

``committed_files``, ``vacuum``, ``rollback`` and ``status`` given a partition's URL judge its files by the records
there; the root's record still lists every file, for readers of the whole table (and of tables written before).
On memory, local disk and Azurite.
"""

from __future__ import annotations

import json
import posixpath
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.operate.status import inspect_destination
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import TransactionPaths, committed_record_name, transaction_id
from manifest_committer.store import StoreOperations, open_store
from manifest_committer.store.faults import Fault, FaultInjectingStore
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.committing import FAST, run_task, task_side_name, tree, write
from tests.fixtures.stores import STORE_MARKS, store_destination

STORES = ["memory", "local", pytest.param("azure", marks=STORE_MARKS["azure"])]


@pytest.fixture(params=STORES)
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_destination(request, tmp_path)


def new_job(
    table: str,
    committers: list[TransactionalCommitter],
    job_id: str,
    *,
    config: mc.CommitterConfig = FAST,
    store_wrapper: Callable[[StoreOperations], StoreOperations] | None = None,
) -> TransactionalCommitter:
    committer = TransactionalCommitter(table, job_id, config=config, store_wrapper=store_wrapper)
    committers.append(committer)
    committer.setup_job()
    return committer


def readable(url: str) -> list[str]:
    """What ``committed_files(url)`` lists, by task-side path relative to ``url``."""
    prefix = url.rstrip("/") + "/"
    return sorted(task_side_name(urllib.parse.unquote(found.removeprefix(prefix))) for found in mc.committed_files(url))


def record_at(committer: TransactionalCommitter, directory: str) -> dict[str, Any] | None:
    path = TransactionPaths(committer.paths).committed_in(directory)
    try:
        data = committer.store.read_bytes(path)
    except FileNotFoundError:
        return None
    document: dict[str, Any] = orjson.loads(data)
    return document


def names(document: dict[str, Any] | None, field: str) -> list[str]:
    assert document is not None
    return [task_side_name(name) for name in document[field]]


PARTITIONED = {"dt=1/a.csv": b"a", "dt=1/b.csv": b"b", "dt=2/c.csv": b"c", "year=2026/month=01/d.csv": b"d"}


# --- reading one partition ---------------------------------------------------------------------------------------


def test_a_reader_of_one_partition_sees_its_committed_files(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """Each directory that received a file holds a record listing that directory's files; the root's lists all.
    A reader of a partition, or of a directory above partitions, finds them; the whole table counts each once."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", PARTITIONED)
    committer.commit_job()
    root = committer.destination_url

    assert readable(root + "/dt=1") == ["a.csv", "b.csv"]
    assert readable(root + "/dt=2") == ["c.csv"]
    assert readable(root + "/year=2026") == ["month=01/d.csv"]
    assert readable(root) == sorted(PARTITIONED), "a file listed at two levels is one file"
    assert names(record_at(committer, ""), "added") == sorted(PARTITIONED)
    assert names(record_at(committer, "dt=1"), "added") == ["a.csv", "b.csv"]
    assert names(record_at(committer, "year=2026/month=01"), "added") == ["d.csv"]
    assert record_at(committer, "year=2026") is None, "no record where the job wrote no file"
    for directory in ("", "dt=1", "dt=2", "year=2026/month=01"):  # every one valid: the documents plugin checks
        document = record_at(committer, directory)
        assert document is not None and document["removed"] == [] and document["jobId"] == "job-1"


def test_a_reader_of_one_partition_never_sees_an_uncommitted_file(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """A straggler of a committed transaction beside its committed files, and a running job's file: neither is
    listed from the partition."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a"})
    committer.commit_job()
    late = TransactionalCommitter(table, "job-1", config=FAST)
    committers.append(late)
    write(late.task_attempt("task_9", "attempt_9"), "dt=1/late.csv", b"straggler")
    running = new_job(table, committers, "job-running")
    run_task(running, "task_0", "attempt_0", {"dt=1/running.csv": b"running"})

    assert readable(committer.destination_url + "/dt=1") == ["a.csv"]


def test_overwrite_is_seen_from_each_partition_and_vacuum_of_one_deletes_what_was_removed_there(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """The replacing job writes a record into a partition it only removed files from: its reader stops seeing
    them at the commit point, and vacuum of that partition deletes them once past the retention."""
    first = new_job(table, committers, "job-0")
    run_task(first, "task_0", "attempt_0", {"dt=1/old.csv": b"old 1", "dt=2/old.csv": b"old 2"})
    first.commit_job()
    second = new_job(table, committers, "job-1")
    run_task(second, "task_0", "attempt_0", {"dt=1/new.csv": b"new 1"})
    root = second.destination_url
    replaced = [second.store.from_url(url) for url in mc.committed_files(root)]

    assert second.commit_job_replacing(replaced).replaced == 2

    assert readable(root + "/dt=1") == ["new.csv"]
    assert readable(root + "/dt=2") == [], "a partition the job only removed from"
    only_removed = record_at(second, "dt=2")
    assert only_removed is not None and only_removed["added"] == [] and names(only_removed, "removed") == ["old.csv"]
    assert names(record_at(second, "dt=1"), "removed") == ["old.csv"]
    assert mc.vacuum(root + "/dt=2", 1.0) == []
    deleted = mc.vacuum(root + "/dt=2", 0.0, now=time.time() + 5)
    assert [task_side_name(url.removeprefix(root + "/")) for url in deleted] == ["dt=2/old.csv"]
    deleted = mc.vacuum(root + "/dt=1", 0.0, now=time.time() + 5)
    assert [task_side_name(url.removeprefix(root + "/")) for url in deleted] == ["dt=1/old.csv"]
    assert readable(root) == ["dt=1/new.csv"]


def test_vacuum_of_a_partition_deletes_its_uncommitted_files_and_never_the_committed(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """A straggler carrying the committed tid in the partition is debris there, judged by the partition's own
    record; the committed files, another partition's and another tool's stay."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "dt=2/b.csv": b"b"})
    committer.commit_job()
    late = TransactionalCommitter(table, "job-1", config=FAST)
    committers.append(late)
    write(late.task_attempt("task_9", "attempt_9"), "dt=1/late.csv", b"straggler")
    write(late.task_attempt("task_9", "attempt_9"), "dt=2/late.csv", b"straggler in another partition")
    committer.store.write_bytes(committer.paths.dest + "/dt=1/foreign.csv", b"another tool's")
    root = committer.destination_url

    deleted = mc.vacuum(root + "/dt=1", 0.0, now=time.time() + 5)

    assert [task_side_name(url.removeprefix(root + "/")) for url in deleted] == ["dt=1/late.csv"]
    assert readable(root + "/dt=1") == ["a.csv", "foreign.csv"]
    files = {task_side_name(path) for path, data in tree(committer).items() if data is not None and "_" not in path}
    assert {"dt=1/a.csv", "dt=2/b.csv", "dt=2/late.csv"} <= files


def test_a_table_with_root_records_only_reads_and_vacuums_as_before(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """A table written before the directories had records (the root's only): the whole table reads the same; a
    partition read alone shows none of its transactional files, and its vacuum deletes none of them (a record of
    their tid above keeps them: only its existence is asked)."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "dt=2/b.csv": b"b"})
    committer.commit_job()
    transaction = TransactionPaths(committer.paths)
    for directory in ("dt=1", "dt=2"):
        committer.store.delete_file(transaction.committed_in(directory))
    root = committer.destination_url

    assert readable(root) == ["dt=1/a.csv", "dt=2/b.csv"]
    assert readable(root + "/dt=1") == []
    assert mc.vacuum(root + "/dt=1", 0.0, now=time.time() + 5) == []
    assert readable(root) == ["dt=1/a.csv", "dt=2/b.csv"]


@pytest.mark.parametrize("crafted", ["../outside.csv", "/etc/passwd", "a/../../b.csv"])
def test_a_crafted_record_in_a_partition_is_refused(
    table: str, committers: list[TransactionalCommitter], crafted: str
) -> None:
    """A record below the root naming a path out of its directory is refused whole, named, by every reader of
    the table and of the partition: it can neither expose nor hide a file elsewhere."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a"})
    committer.commit_job()
    record = committer.paths.dest + "/dt=1/_committed_5"
    committer.store.write_bytes(record, orjson.dumps({"added": [crafted], "removed": [crafted]}))
    root = committer.destination_url

    for url in (root, root + "/dt=1"):
        with pytest.raises(mc.ManifestError, match=r"dt=1/_committed_5: (added|removed)\[0\]"):
            mc.committed_files(url)
        with pytest.raises(mc.ManifestError, match=r"dt=1/_committed_5"):
            mc.vacuum(url, 0.0, now=time.time() + 5)


# --- many partitions at once ----------------------------------------------------------------------------------


class DirectoryRecordWrites(WrappingStore):
    """Counts the writes of ``_committed_`` records below the destination and how many were in flight at once;
    each takes 20 ms, so that writes made one after the other never overlap."""

    def __init__(self, inner: StoreOperations, root: str) -> None:
        super().__init__(inner)
        self.root = root.rstrip("/") + "/"
        self.writes: list[str] = []
        self.peak = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        relative = path.removeprefix(self.root)
        if operation != "write_bytes" or "/" not in relative or "/_committed_" not in relative:
            return call()
        with self._lock:
            self.writes.append(relative)
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)
        try:
            time.sleep(0.02)
            return call()
        finally:
            with self._lock:
                self._in_flight -= 1


def test_many_partitions_get_their_records_in_parallel_through_the_gate(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """40 partitions: their records are written on the job commit's pool (several in flight), each a store call
    of the stage, counted in the job's statistics."""
    files = {f"dt={day:02d}/part-0.csv": f"{day}".encode() for day in range(40)}
    writer = new_job(table, committers, "job-1")
    run_task(writer, "task_0", "attempt_0", files)
    writer.close()
    wrappers: list[DirectoryRecordWrites] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrappers.append(DirectoryRecordWrites(inner, writer.paths.dest))
        return wrappers[-1]

    committer = TransactionalCommitter(
        table, "job-1", config=mc.CommitterConfig(io_threads=8, store_retry_interval=0), store_wrapper=wrap
    )
    committers.append(committer)
    success = committer.commit_job()

    (wrapper,) = wrappers
    assert sorted(wrapper.writes) == [f"dt={day:02d}/{committed_record_name(committer.tid)}" for day in range(40)]
    assert wrapper.peak > 1, "the records are written in parallel"
    assert success.iostatistics.counters["op_save_file"] >= 41, "the root's and 40 directories' records"
    assert readable(committer.destination_url + "/dt=17") == ["part-0.csv"]


# --- rollback and status of a partition ---------------------------------------------------------------------------


def test_rollback_of_a_partition_names_the_committed_job_and_deletes_nothing(
    table: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    """``rollback DEST/dt=1 --job X`` finds X committed by the record beside the partition's files, and changes
    nothing; a rollback of the partition over every job finds no dead job there (a job's state is under the
    table's ``_temporary``) and deletes nothing either."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a"})
    committer.commit_job()
    dead = new_job(table, committers, "job-dead", config=mc.CommitterConfig(markers_type=mc.MarkerType.DIRECT))
    run_task(dead, "task_0", "attempt_0", {"dt=1/dead.csv": b"dead"})
    dead.close()
    partition = committer.destination_url + "/dt=1"
    before = tree(committer)

    assert main(["rollback", partition, "--job", "job-1"]) == 0
    out = capsys.readouterr().out
    assert "Nothing rolled back: job job-1" in out and "is committed" in out
    assert f"dt=1/_committed_{transaction_id('job-1')}" in out
    assert mc.rollback(partition) == []
    assert tree(committer) == before


def test_status_of_a_partition_counts_its_files_by_its_records(
    table: str, committers: list[TransactionalCommitter], capsys: pytest.CaptureFixture[str]
) -> None:
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "dt=1/b.csv": b"b", "dt=2/c.csv": b"c"})
    committer.commit_job()
    late = TransactionalCommitter(table, "job-1", config=FAST)
    committers.append(late)
    write(late.task_attempt("task_9", "attempt_9"), "dt=1/late.csv", b"straggler")

    assert main(["status", "--json", committer.destination_url + "/dt=1"]) == 0
    document = json.loads(capsys.readouterr().out)

    assert document["data_files"] == {
        "committed": 2,
        "without_tid": 0,
        "uncommitted": 1,
        "removed": 0,
        "records": 1,
        "error": None,
    }
    opened = open_store(committer.destination_url + "/dt=2")
    try:
        status = inspect_destination(opened.store, opened.path)
    finally:
        opened.store.close()
    assert status.data_files is not None and status.data_files.committed == 1


def test_records_name_files_relative_to_their_own_directory(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """A record's names carry no directory of its own: a partition's record lists bare names."""
    committer = new_job(table, committers, "job-1")
    run_task(committer, "task_0", "attempt_0", {"dt=1/hour=3/a.csv": b"a"})
    committer.commit_job()
    document = record_at(committer, "dt=1/hour=3")
    assert document is not None
    assert [posixpath.dirname(name) for name in document["added"]] == [""]
    assert readable(committer.destination_url + "/dt=1/hour=3") == ["a.csv"]
    assert readable(committer.destination_url + "/dt=1") == ["hour=3/a.csv"]


# --- a commit that died between the root's record and a directory's ---------------------------------------------


@pytest.mark.parametrize("then", ["rerun", "abort"])
def test_a_commit_failed_after_the_root_record_is_finished_for_each_partition_by_a_rerun_or_an_abort(
    table: str, committers: list[TransactionalCommitter], then: str
) -> None:
    """The root's record is the commit point: a commit that failed before ``dt=2``'s record leaves the table
    committed, and ``dt=2`` read alone as before the job (the commit seen late, never early). A fresh committer's
    rerun, or its abort (which keeps a committed job's output), writes the missing record."""
    earlier = new_job(table, committers, "job-0")
    run_task(earlier, "task_0", "attempt_0", {"dt=2/earlier.csv": b"earlier"})
    earlier.commit_job()
    writer = new_job(table, committers, "job-1")
    run_task(writer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "dt=2/b.csv": b"b"})
    writer.close()
    dies = Fault("write_bytes", f"dt=2/{committed_record_name(writer.tid)}", error=lambda: PermissionError("killed"))
    dying = TransactionalCommitter(
        table, "job-1", config=FAST, store_wrapper=lambda inner: FaultInjectingStore(inner, [dies])
    )
    committers.append(dying)
    with pytest.raises(PermissionError):
        dying.commit_job()
    root = writer.destination_url

    assert readable(root) == ["dt=1/a.csv", "dt=2/b.csv", "dt=2/earlier.csv"], "committed: the root's record"
    assert readable(root + "/dt=2") == ["earlier.csv"], "as before the job"
    assert mc.vacuum(root + "/dt=2", 0.0, now=time.time() + 5) == [], "the root's record above keeps b.csv"
    fresh = TransactionalCommitter(table, "job-1", config=FAST)
    committers.append(fresh)
    if then == "rerun":
        fresh.commit_job()
    else:
        assert fresh.abort_job().committed

    assert readable(root + "/dt=2") == ["b.csv", "earlier.csv"]
    assert readable(root + "/dt=1") == ["a.csv"]
    assert not any(path.startswith("_temporary/job-1") for path in tree(earlier))


def test_an_abort_before_the_commit_point_deletes_a_partition_record_of_its_tid(
    table: str, committers: list[TransactionalCommitter]
) -> None:
    """A record of the job's tid in a partition without the root's (left by hand) goes with the job's files:
    else a later job of the same id, whose attempts name their files alike, would be read there before its
    commit."""
    job = new_job(table, committers, "job-1")
    run_task(job, "task_0", "attempt_0", {"dt=1/a.csv": b"a"})
    assert readable(job.destination_url + "/dt=1") == []
    path = next(p for p in tree(job) if p.startswith("dt=1/") and "-tid-" in p)
    stray = TransactionPaths(job.paths).committed_in("dt=1")
    job.store.write_bytes(stray, orjson.dumps({"added": [path.removeprefix("dt=1/")], "removed": []}))
    assert readable(job.destination_url + "/dt=1") == ["a.csv"]
    job.close()

    aborting = TransactionalCommitter(table, "job-1", config=FAST)
    committers.append(aborting)
    aborting.abort_job()

    assert aborting.store.info(stray) is None
    again = new_job(table, committers, "job-1")
    run_task(again, "task_0", "attempt_0", {"dt=1/a.csv": b"a again"})
    assert readable(again.destination_url + "/dt=1") == [], "not before its commit"
