"""Reading a destination written by the transactional protocol: ``committed_files`` and ``vacuum``.

Both list the destination recursively, skipping names that start with ``_`` or ``.`` (commit records,
``_SUCCESS``, ``_temporary``, hidden files) as Spark and Hive readers do, and decide from the ``_committed_<tid>``
records alone (``protocols/transactional/records.py``):

- a data file whose name carries a tid (this library's names and Databricks' alike) is committed only when a
  ``_committed_<tid>`` in its directory or an ancestor up to the URL lists it in ``added`` (a straggler of a
  killed attempt that carries a committed tid is not);
- a file any committed record lists in ``removed`` is not committed, whoever wrote it;
- a file without a tid (another tool's) is committed unless removed.

Records are read only at the URL and below it, never above: a directory above a table may be writable by
anyone (``/tmp``), and a record planted there must not decide what the table holds. A record is applied only to
files in its own directory and below. A job commit writes one into every directory it writes into (``records.py``),
so a partition's URL is judged by the records beside its files; a file the records of several levels name (its
directory's and the root's) is one file. ``vacuum`` first learns which jobs are alive (as ``rollback`` decides,
``markers/heartbeat.py``), then reads the table; it deletes, once older than the retention, tid-bearing files
that are not committed and tid-bearing files listed as removed (the record that removed them older than the
retention too, so a reader that started before the overwrite can finish); never a committed file, never a file
without a tid, and never a file of a job that is alive (or whose liveness cannot be told), whatever its age. A
dead job's files go like any uncommitted file.
"""

from __future__ import annotations

import functools
import logging
import math
import posixpath
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...admission import relative_problem
from ...config import CommitterConfig
from ...errors import ConfigError
from ...markers.heartbeat import job_liveness
from ...markers.layout import MarkerPaths
from ...paths import TEMPORARY_DIR, TRASH_DIR, JobPaths, is_hidden, is_valid_id
from ...retry import RetryPolicy
from ...store import FileStatus, LinkInPathError, StoreOperations, open_store
from .records import (
    COMMITTED_PREFIX,
    TidName,
    TransactionRecord,
    committed_record_tid,
    parse_data_file_name,
    transaction_id,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

LIST_THREADS = 16
"""Directories listed at once: a table's partitions are many small listings, each a round trip."""


@dataclass
class _Table:
    """What one pass over a destination found."""

    root: str
    data_files: list[FileStatus] = field(default_factory=list)
    records: dict[str, FileStatus] = field(default_factory=dict)
    """Store path of each ``_committed_<tid>`` found -> its status."""
    added: dict[str, set[str]] = field(default_factory=dict)
    """tid -> store paths its records list as added."""
    record_dirs: dict[str, set[str]] = field(default_factory=dict)
    """tid -> the directories holding one of its records."""
    removed: dict[str, float | None] = field(default_factory=dict)
    """Store path listed as removed -> modification time of the newest record removing it."""


def committed_files(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Sorted URLs of the data files under ``url`` that a reader may read (see the module)."""
    opened = open_store(url, storage_options)
    store, root = opened.store, opened.path
    try:
        table = _read_table(store, root, store_retry_policy(store))
        return sorted(store.to_url(status.path) for status in table.data_files if _is_committed(table, status.path))
    finally:
        store.close()


def vacuum(
    url: str,
    retention_hours: float = 168.0,
    *,
    storage_options: dict[str, Any] | None = None,
    now: float | None = None,
    dry_run: bool = False,
    config: CommitterConfig | None = None,
) -> list[str]:
    """Delete the debris of the transactional protocol under ``url`` older than ``retention_hours``; returns the
    sorted URLs deleted (see the module for what is and is never deleted).

    ``dry_run``: delete nothing and return the URLs a real run would delete now; both runs decide in
    ``_vacuumable``, so the list is the real run's, bar files that change in between. ``now`` moves the
    retention's clock only; liveness is judged on the real clock with ``config``'s ``heartbeat.expiry.seconds``."""
    if (
        isinstance(retention_hours, bool)
        or not isinstance(retention_hours, (int, float))
        or math.isnan(retention_hours)  # every comparison with NaN is false: no file would be within the retention
        or retention_hours < 0
    ):
        raise ConfigError(f"vacuum {url}: retention_hours must be a number of hours >= 0, got {retention_hours!r}")
    cutoff = (time.time() if now is None else now) - float(retention_hours) * 3600.0
    opened = open_store(url, storage_options)
    store, root = opened.store, opened.path
    try:
        retry = store_retry_policy(store)
        running = live_tids(store, root, retry, config or CommitterConfig())  # before the table: see the module
        table = _read_table(store, root, retry)
        doomed = [status for status in table.data_files if _vacuumable(table, status, cutoff, running)]
        doomed = _spare_tids_committed_above(store, table, retry, doomed)
        if dry_run:
            log.info("vacuum %s (dry run): would delete %d of %d data files", url, len(doomed), len(table.data_files))
            return sorted(store.to_url(status.path) for status in doomed)
        deleted: list[str] = []
        for status in doomed:
            try:
                gone = call_on(retry, functools.partial(store.delete_file_below, root), status.path, "vacuum delete")
            except LinkInPathError:
                log.warning("vacuum: not deleting %s: a directory on the way is a symbolic link", status.path)
                continue
            if gone:
                deleted.append(store.to_url(status.path))
        log.info("vacuum %s: deleted %d of %d data files", url, len(deleted), len(table.data_files))
        return sorted(deleted)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class FileCounts:
    """The data files of a destination by what the commit records make of them (``status`` shows these)."""

    committed: int
    """Files a reader may read (``committed_files``), those without a tid included."""
    without_tid: int
    """Of ``committed``: files without a tid (another tool's), which vacuum never deletes."""
    uncommitted: int
    """Files with a tid that no committed record adds: debris of failed attempts and dead jobs, or files of jobs
    still running. What vacuum considers, with ``removed``."""
    removed: int
    """Files a committed record lists as removed (overwritten), still present until vacuum deletes them."""
    records: int
    """``_committed_<tid>`` records read."""


def count_files(store: StoreOperations, root: str, retry: RetryPolicy) -> FileCounts:
    """Count the data files below store path ``root`` as ``committed_files`` and ``vacuum`` judge them (one
    recursive listing and every record read: as costly as ``committed_files``)."""
    table = _read_table(store, root, retry)
    committed = without_tid = uncommitted = removed = 0
    for status in table.data_files:
        if status.path in table.removed:
            removed += 1
        elif _is_committed(table, status.path):
            committed += 1
            without_tid += parse_data_file_name(posixpath.basename(status.path)) is None
        else:
            uncommitted += 1
    return FileCounts(committed, without_tid, uncommitted, removed, len(table.records))


# --- deciding ---------------------------------------------------------------------------------------------------


def _is_committed(table: _Table, path: str) -> bool:
    if path in table.removed:
        return False
    parsed = parse_data_file_name(posixpath.basename(path))
    return parsed is None or path in table.added.get(parsed.tid, ())


def _vacuumable(table: _Table, status: FileStatus, cutoff: float, running: set[str]) -> bool:
    parsed = parse_data_file_name(posixpath.basename(status.path))
    if parsed is None or status.modified is None or status.modified >= cutoff:
        return False  # never a file without a tid; never a file whose age is unknown or within the retention
    if status.path in table.removed:
        removed_at = table.removed[status.path]
        return removed_at is not None and removed_at < cutoff
    if status.path in table.added.get(parsed.tid, ()):
        return False
    if parsed.tid in running and parsed.tid not in table.added:
        log.info("vacuum: keeping %s: its job is alive", status.path)
        return False
    return True


# --- reading ----------------------------------------------------------------------------------------------------


def store_retry_policy(store: StoreOperations) -> RetryPolicy:
    """The store retry policy of a default ``CommitterConfig``, for calls made outside a committer."""
    config = CommitterConfig()
    return RetryPolicy(
        attempts=config.store_retry_attempts,
        initial_wait=config.store_retry_interval,
        is_retryable=store.is_transient,
        max_wait=config.store_retry_max_wait,
        max_time=config.store_retry_max_time,
    )


def _read_table(store: StoreOperations, root: str, retry: RetryPolicy) -> _Table:
    table = _Table(root)
    top = retry.call(lambda: store.info(root), f"info {root}")
    if top is None:
        raise FileNotFoundError(f"{store.to_url(root)}: no such directory")
    if not top.is_dir:
        raise ConfigError(f"{store.to_url(root)}: a file, not a table directory")
    with ThreadPoolExecutor(LIST_THREADS, thread_name_prefix="committed-files") as pool:
        level = [root]
        while level:
            listings = pool.map(lambda path: retry.call(lambda: store.list_dir(path), f"list {path}"), level)
            level = []
            for listing in listings:
                for status in listing:
                    name = posixpath.basename(status.path.rstrip("/"))
                    if status.is_dir:
                        if not is_hidden(name):
                            level.append(status.path.rstrip("/"))
                    elif committed_record_tid(name) is not None:
                        table.records[status.path] = status
                    elif not is_hidden(name):
                        table.data_files.append(status)
        loaded = pool.map(lambda path: _load_record(store, path, retry), sorted(table.records))
        for path, record in zip(sorted(table.records), loaded, strict=True):
            _apply_record(table, path, record, store.capabilities.separator_aliases)
    return table


def _spare_tids_committed_above(
    store: StoreOperations, table: _Table, retry: RetryPolicy, doomed: list[FileStatus]
) -> list[FileStatus]:
    """``doomed`` less the files without a record of their tid in their own directory whose tid has a
    ``_committed_<tid>`` in a directory above the URL: vacuum of one partition must not delete what the table's
    record commits (a table whose directories have no records of their own, or a commit killed before it wrote
    them). Only whether such a record exists is asked, never what it holds, so a record planted above can keep
    debris but never delete a file or make one readable; ``removed`` files above are the table's vacuum's
    business."""
    root = table.root
    unjudged = [status for status in doomed if not _judged_here(table, status)]
    tids = {parsed.tid for parsed in map(_tid_of, unjudged) if parsed is not None}
    spared: set[str] = set()
    directory = root.rstrip("/")
    while tids - spared:
        parent = posixpath.dirname(directory)
        if not parent or parent == directory:
            break
        directory = parent
        for tid in sorted(tids - spared):
            record = posixpath.join(directory, f"{COMMITTED_PREFIX}{tid}")
            if call_on(retry, store.info, record, "info") is not None:
                log.warning(
                    "vacuum %s: keeping the files of transaction %s: %s is above it (vacuum the table there)",
                    store.to_url(root),
                    tid,
                    store.to_url(record),
                )
                spared.add(tid)
    return [
        status for status in doomed if _judged_here(table, status) or (_tid_of(status) or _NO_TID).tid not in spared
    ]


def _judged_here(table: _Table, status: FileStatus) -> bool:
    """Whether a record of the file's tid lies in the file's own directory: a job commit writes one there listing
    every file of the directory it commits, so the file is judged by what is under the URL alone. A record of
    the tid higher up, short of the table's root, may list that directory's files only."""
    parsed = _tid_of(status)
    return parsed is not None and posixpath.dirname(status.path) in table.record_dirs.get(parsed.tid, ())


def _tid_of(status: FileStatus) -> TidName | None:
    return parse_data_file_name(posixpath.basename(status.path))


_NO_TID = TidName("", "")


def call_on(retry: RetryPolicy, function: Callable[[str], T], path: str, what: str) -> T:
    """One store call on ``path`` under the retry policy."""
    return retry.call(lambda: function(path), f"{what} {path}")


def _load_record(store: StoreOperations, path: str, retry: RetryPolicy) -> TransactionRecord:
    data = retry.call(lambda: store.read_bytes(path), f"read {path}")
    return TransactionRecord.from_json(data, store.to_url(path))


def _apply_record(table: _Table, path: str, record: TransactionRecord, aliases: str) -> None:
    directory = posixpath.dirname(path)
    tid = committed_record_tid(posixpath.basename(path))
    assert tid is not None  # only records are loaded
    added = _as_stored(record.added, aliases, path)
    table.added.setdefault(tid, set()).update(posixpath.join(directory, name) for name in added)
    table.record_dirs.setdefault(tid, set()).add(directory)
    modified = table.records[path].modified
    for name in _as_stored(record.removed, aliases, path):
        removed = posixpath.join(directory, name)
        earlier = table.removed.get(removed)
        table.removed[removed] = _newest(earlier, modified) if removed in table.removed else modified


def _as_stored(names: Iterable[str], aliases: str, record: str) -> list[str]:
    """A record's names as the store holds them: each of the store's ``separator_aliases`` (Azure's ``\\``) read
    as ``/``, as the store read it when the file was written; a name that is then no plain relative path
    (``..\\x``) names nothing in the record's directory and is left out."""
    if not aliases:
        return list(names)
    stored: list[str] = []
    for name in names:
        kept = name
        for alias in aliases:
            kept = kept.replace(alias, "/")
        problem = relative_problem(kept)
        if problem is None:
            stored.append(kept)
        else:
            log.warning("%s: ignoring the name %r, which this store keeps as %r, which %s", record, name, kept, problem)
    return stored


def _newest(first: float | None, second: float | None) -> float | None:
    if first is None or second is None:
        return None  # unknown age: never old enough
    return max(first, second)


def live_tids(store: StoreOperations, root: str, retry: RetryPolicy, config: CommitterConfig) -> set[str]:
    """The tids of the jobs under ``root/_temporary`` that are alive, or whose liveness cannot be told (a job
    without markers, state that cannot be read): vacuum keeps their files. A job is alive as ``rollback`` decides
    (``job_liveness``): its lease is fresh, or its marker server answers; and a job that began its commit
    (``commit-started``) is kept as rollback holds it, whatever its lease."""
    temporary = posixpath.join(root, TEMPORARY_DIR)
    try:
        entries: Iterable[FileStatus] = retry.call(lambda: store.list_dir(temporary), f"list {temporary}")
    except FileNotFoundError:
        return set()
    names = (posixpath.basename(status.path.rstrip("/")) for status in entries if status.is_dir)
    live: set[str] = set()
    for job_id in sorted(name for name in names if name != TRASH_DIR and is_valid_id(name)):
        if _job_may_be_alive(store, root, job_id, retry, config):
            live.add(transaction_id(job_id))
    return live


def _job_may_be_alive(
    store: StoreOperations, root: str, job_id: str, retry: RetryPolicy, config: CommitterConfig
) -> bool:
    job_dir = JobPaths(root, job_id).job_dir
    try:
        entries = retry.call(lambda: store.list_dir(job_dir), f"list {job_dir}")
        attempts = sorted(
            int(name)
            for name in (posixpath.basename(status.path.rstrip("/")) for status in entries if status.is_dir)
            if len(name) == 2 and name.isdigit()
        )
        with_markers = 0
        for attempt in attempts:
            paths = MarkerPaths(JobPaths(root, job_id, attempt))
            if call_on(retry, store.info, paths.markers_dir, "info") is None:
                continue
            with_markers += 1
            liveness = job_liveness(store, paths, retry, expiry_seconds=config.heartbeat_expiry_seconds)
            if not liveness.dead:
                return True
            started = JobPaths(root, job_id, attempt).commit_started_path
            if call_on(retry, store.info, started, "info") is not None:
                log.info("vacuum: keeping the files of job %s: it is in its commit (%s)", job_id, liveness.reason)
                return True  # as rollback holds it: a driver paused in its commit looks dead too
            log.info("vacuum: job %s attempt %02d is dead (%s)", job_id, attempt, liveness.reason)
    except Exception as error:
        log.warning("vacuum: keeping the files of job %s: its liveness cannot be told (%s)", job_id, error)
        return True
    return with_markers == 0  # no markers: not a job whose liveness can be told, so not a dead one either
