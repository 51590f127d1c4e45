"""``mc.rollback``: undo the transactional and upload jobs of a destination whose drivers died, from their state
alone (an upload job: the objects a partial commit completed, and every incomplete upload of the job).

A job qualifies when it has write markers and no ``_committed_<tid>``, and its driver is gone (its lease is older
than ``heartbeat.expiry.seconds`` and its marker server does not answer; ``markers/heartbeat.py``). Each is undone
by a fresh committer's ``abort_job``: exactly the data files of the job its markers name are deleted, then its
state; a marker naming anything else is skipped and reported. ``rollback(url, job_id=X)`` skips the liveness
check (the caller says X is dead) but still refuses a job without markers, which is not one this can undo (a
manifest job is aborted with ``abort_job``).

Each job is judged and undone on its own: a job whose state cannot be read or whose abort fails is reported
(``RolledBack.error``) and the other jobs are still rolled back.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

from ..config import CommitterConfig
from ..errors import CommitterError
from ..markers import MarkerPaths, job_liveness
from ..paths import TEMPORARY_DIR, JobPaths, check_id, is_valid_id
from ..protocols.transactional.committer import TransactionalCommitter
from ..protocols.transactional.readers import call_on, store_retry_policy
from ..protocols.transactional.records import TransactionPaths
from ..protocols.upload.committer import UploadCommitter
from ..protocols.upload.records import UploadPaths
from ..retry import describe_error
from ..store import StoreOperations
from ..store.factory import open_destination_store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RolledBack:
    """One job attempt rolled back."""

    job_id: str
    job_attempt: int
    deleted: tuple[str, ...]
    """URLs of the data files deleted."""
    reason: str
    """Why the job was judged dead (or that the caller named it)."""
    aborted: tuple[str, ...] = ()
    """Upload jobs: URLs of the keys whose incomplete uploads were aborted (with ``dry_run``, would be)."""
    protocol: str = "transactional"
    """``transactional`` or ``upload``."""
    skipped: tuple[str, ...] = ()
    """Markers not followed (naming a file the job did not write, or through a symbolic link), each with where and
    why: nothing they name was deleted."""
    error: str | None = None
    """Why this job could not be judged or undone (its state unreadable, its abort failed); ``None`` when it was.
    Nothing is promised about a job with an error, beyond that the other jobs were still handled."""


def rollback(
    url: str,
    job_id: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    config: CommitterConfig | None = None,
    dry_run: bool = False,
) -> list[RolledBack]:
    """Roll back the named job, or every dead job of the destination; returns what was rolled back (with
    ``dry_run``, what would be, each job's files and uploads from its committer's ``plan_abort``, the same stage
    as its abort: nothing changes). A job that could not be judged or undone is in the list with its ``error``."""
    config = config or CommitterConfig()
    store, root = open_destination_store(url, storage_options)
    results: list[RolledBack] = []
    candidates: list[tuple[str, int, str, bool]] = []
    try:
        retry = store_retry_policy(store)
        if job_id is not None:
            check_id("job id", job_id)
            jobs = [job_id]
        else:
            jobs = _job_ids(store, root, retry)
        with_markers = 0
        for job in jobs:
            for attempt in _job_attempts(store, root, job, retry):
                try:
                    judged = _judge(store, JobPaths(root, job, attempt), retry, config, named=job_id is not None)
                except Exception as error:
                    results.append(_failed(job, attempt, "its state could not be read", error))
                    with_markers += 1
                    continue
                if judged is None:
                    continue  # no markers: not a job this can undo
                with_markers += 1
                reason, upload = judged
                if reason is not None:
                    candidates.append((job, attempt, reason, upload))
        if job_id is not None and not with_markers:
            raise CommitterError(
                f"{store.to_url(posixpath.join(root, TEMPORARY_DIR, job_id))}: job {job_id} has no write markers; "
                "it is not a transactional job that rollback can undo (abort it with `manifest-committer abort`)"
            )
    finally:
        store.close()
    for job, attempt, reason, upload in candidates:
        try:
            results.append(
                _undo(
                    url,
                    job,
                    attempt,
                    reason,
                    upload=upload,
                    config=config,
                    storage_options=storage_options,
                    dry_run=dry_run,
                )
            )
        except Exception as error:
            results.append(_failed(job, attempt, reason, error, upload))
    return sorted(results, key=lambda result: (result.job_id, result.job_attempt))


def _undo(
    url: str,
    job: str,
    attempt: int,
    reason: str,
    *,
    upload: bool,
    config: CommitterConfig,
    storage_options: dict[str, Any] | None,
    dry_run: bool,
) -> RolledBack:
    """Abort (or plan the abort of) one dead job attempt with a fresh committer."""
    if upload:
        with UploadCommitter(url, job, attempt, config, storage_options) as uploader:
            undone = uploader.plan_abort() if dry_run else uploader.abort_job()
        if not dry_run:
            log.warning(
                "Rolled back upload job %s attempt %d (%s): %d objects deleted, %d incomplete uploads aborted",
                job,
                attempt,
                reason,
                len(undone.deleted),
                len(undone.aborted),
            )
        return RolledBack(job, attempt, undone.deleted, reason, undone.aborted, "upload", undone.skipped)
    with TransactionalCommitter(url, job, attempt, config, storage_options) as committer:
        outcome = committer.plan_abort() if dry_run else committer.abort_job()
    if not dry_run:
        log.warning("Rolled back job %s attempt %d (%s): %d files deleted", job, attempt, reason, len(outcome.deleted))
    return RolledBack(job, attempt, outcome.deleted, reason, skipped=outcome.skipped)


def _failed(job: str, attempt: int, reason: str, error: Exception, upload: bool = False) -> RolledBack:
    message = f"job {job} attempt {attempt:02d}: {describe_error(error)}"
    log.error("Rollback of job %s attempt %d failed (the other jobs go on): %s", job, attempt, message)
    return RolledBack(job, attempt, (), reason, protocol="upload" if upload else "transactional", error=message)


def _judge(
    store: StoreOperations, paths: JobPaths, retry: Any, config: CommitterConfig, *, named: bool
) -> tuple[str | None, bool] | None:
    """``None`` for a job attempt without markers; else why it is to be rolled back (``None``: leave it), and
    whether it is an upload job."""
    markers_dir = MarkerPaths(paths).markers_dir
    upload = call_on(retry, store.info, UploadPaths(paths).protocol_file, "info") is not None
    if not upload and call_on(retry, store.info, markers_dir, "info") is None:
        return None
    return _why_dead(store, paths, retry, config, named=named, upload=upload), upload


def _job_ids(store: StoreOperations, root: str, retry: Any) -> list[str]:
    temporary = posixpath.join(root, TEMPORARY_DIR)
    try:
        entries = retry.call(lambda: store.list_dir(temporary), f"list {temporary}")
    except FileNotFoundError:
        return []
    names = (posixpath.basename(status.path.rstrip("/")) for status in entries if status.is_dir)
    return sorted(name for name in names if is_valid_id(name))


def _job_attempts(store: StoreOperations, root: str, job_id: str, retry: Any) -> list[int]:
    job_dir = JobPaths(root, job_id, 0).job_dir
    try:
        entries = retry.call(lambda: store.list_dir(job_dir), f"list {job_dir}")
    except FileNotFoundError:
        return []
    names = (posixpath.basename(status.path.rstrip("/")) for status in entries if status.is_dir)
    return sorted(int(name) for name in names if len(name) == 2 and name.isdigit())


def _why_dead(
    store: StoreOperations, paths: JobPaths, retry: Any, config: CommitterConfig, *, named: bool, upload: bool = False
) -> str | None:
    """Why this job attempt (which has markers, or is an upload job) is to be rolled back, or ``None`` to leave it.

    An upload job is committed once its ``commit-finished`` record is in place (its abort then keeps the output
    and only aborts leftover uploads)."""
    markers = MarkerPaths(paths)
    committed = paths.commit_finished_path if upload else TransactionPaths(paths).committed
    if retry.call(lambda: store.info(committed), f"info {committed}") is not None:
        log.info("rollback: job %s is committed (%s); leaving it", paths.job_id, store.to_url(committed))
        return None
    if named:
        return "named by the caller"
    liveness = job_liveness(store, markers, retry, expiry_seconds=config.heartbeat_expiry_seconds)
    if not liveness.dead:
        log.info("rollback: job %s is alive (%s); leaving it", paths.job_id, liveness.reason)
        return None
    return liveness.reason
