"""``commit`` and ``abort`` of one job attempt: the committer's own calls, and a report of what they changed.

Each runs the job's own committer exactly as an engine's driver would (same destination, job id and attempt),
so a rerun finishes an interrupted commit and an abort reverts one, with every promise of CONTRACT §4; this
module only finds the job, picks its protocol from its state (``AttemptStatus.protocol``: ``UploadCommitter`` for
a job whose ``protocol`` file says ``upload``, ``TransactionalCommitter`` for a job with write markers,
``ManifestCommitter`` otherwise), says what happened, and refuses a job id that is not there (a typo must not
look like a successful abort).
"""

from __future__ import annotations

import logging
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from ..config import CommitterConfig
from ..errors import CommitterError, JobStateError
from ..formatting import format_bytes
from ..iostatistics import StatisticsStore
from ..paths import TEMPORARY_DIR, JobPaths, check_id
from ..protocols.manifest.committer import ManifestCommitter
from ..protocols.transactional.committer import TransactionalCommitter
from ..protocols.transactional.records import TransactionPaths
from ..protocols.upload.committer import UploadCommitter
from ..stages.base import Stage, StageContext
from ..stages.upload.state import job_marker_keys
from ..statistic_names import (
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
)
from ..store.factory import open_destination_store
from ..success_data import SUCCESS_MARKER, SuccessData
from .progress import CommitProgressBar
from .status import MANIFEST, TRANSACTIONAL, UPLOAD, AttemptStatus, JobStatus, MarkerStatus, inspect_destination

log = logging.getLogger(__name__)

_SHOWN = 50
"""Paths listed by a dry run before ``... and N more``."""


@dataclass(frozen=True, slots=True)
class _Found:
    """The job attempt a command acts on, as ``status`` sees it."""

    attempt: int
    status: AttemptStatus | None
    """``None``: the job has no state left under ``_temporary`` (its commit point passed)."""
    protocol: str
    """``manifest``, ``transactional`` or ``upload`` (``AttemptStatus.protocol``)."""
    success_is_ours: bool
    """The destination's ``_SUCCESS`` is this job's."""


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What the command line names: a destination, a job and (optionally) its attempt."""

    destination: str
    job_id: str
    attempt: int | None
    config: CommitterConfig
    storage_options: dict[str, Any]


def _find_attempt(request: JobRequest) -> _Found:
    """The attempt to act on (the one named, else the highest present), its status and its protocol. A job
    whose state is gone is found only when the destination shows it committed (its ``_SUCCESS`` or its
    ``_committed_<tid>``)."""
    check_id("job id", request.job_id)
    store, root = open_destination_store(request.destination, request.storage_options)
    try:
        status = inspect_destination(store, root, request.config, count_data_files=False)
        committed_record = store.info(TransactionPaths(JobPaths(root, request.job_id)).committed) is not None
    finally:
        store.close()
    job = next((job for job in status.jobs if job.job_id == request.job_id), None)
    success = status.last_success
    success_is_ours = success is not None and success.job_id == request.job_id
    if job is None or not job.attempts:
        if success_is_ours or committed_record:
            protocol = TRANSACTIONAL if committed_record else MANIFEST
            if success is not None and success_is_ours and success.committer == UPLOAD:
                protocol = UPLOAD
            return _Found(request.attempt or 0, None, protocol, success_is_ours)
        others = ", ".join(j.job_id for j in status.jobs) or "none"
        where = posixpath.join(status.destination, TEMPORARY_DIR)
        raise CommitterError(f"{where}: no job {request.job_id!r} in flight there (jobs there: {others})")
    chosen = _attempt_of(job, _pick(status.destination, job, request.attempt))
    return _Found(chosen.attempt, chosen, chosen.protocol, success_is_ours)


def _pick(destination: str, job: JobStatus, attempt: int | None) -> int:
    numbers = [a.attempt for a in job.attempts]
    if attempt is None:
        return max(numbers)
    if attempt not in numbers:
        raise CommitterError(
            f"{destination}/{TEMPORARY_DIR}/{job.job_id}: no attempt {attempt:02d} "
            f"(attempts there: {', '.join(f'{n:02d}' for n in numbers)})"
        )
    return attempt


def _attempt_of(job: JobStatus, attempt: int) -> AttemptStatus:
    return next(a for a in job.attempts if a.attempt == attempt)


def _committer(request: JobRequest, attempt: int) -> ManifestCommitter:
    return ManifestCommitter(
        request.destination,
        request.job_id,
        job_attempt=attempt,
        config=request.config,
        storage_options=request.storage_options,
    )


def _transactional_committer(request: JobRequest, attempt: int) -> TransactionalCommitter:
    """A fresh committer of the job: it runs no marker server or heartbeat (only ``setup_job`` starts them)."""
    return TransactionalCommitter(request.destination, request.job_id, attempt, request.config, request.storage_options)


def _upload_committer(request: JobRequest, attempt: int) -> UploadCommitter:
    """A fresh committer of the upload job: it runs no marker server or heartbeat (only ``setup_job`` does)."""
    return UploadCommitter(request.destination, request.job_id, attempt, request.config, request.storage_options)


def run_commit(request: JobRequest, *, progress_stream: TextIO | None = None) -> str:
    """Run (or rerun) the job commit; return what changed. ``progress_stream``: draw a bar there."""
    found = _find_attempt(request)
    if found.protocol == TRANSACTIONAL:
        return _run_transactional_commit(request, found)
    if found.protocol == UPLOAD:
        return _run_upload_commit(request, found)
    attempt, before = found.attempt, found.status
    already = before is None or (before.commit is not None and before.commit.finished)
    resumed = before is not None and before.commit is not None and not before.commit.finished
    with (
        _committer(request, attempt) as committer,
        CommitProgressBar(request.job_id, progress_stream or sys.stderr, enabled=progress_stream is not None) as bar,
    ):
        callback: Callable[[int, int], None] = bar
        success = committer.commit_job(progress=callback)
        state_left = committer.store.info(committer.paths.job_dir) is not None
        success_written = committer.store.info(committer.paths.success_path) is not None
    counters = success.iostatistics.counters
    details = _details(
        counters.get(COMMITTER_FILES_ALREADY_COMMITTED, 0), counters.get(COMMIT_FILE_RENAME_RECOVERED, 0)
    )
    head = _commit_head(request, attempt, committer.destination_url, already=already, resumed=resumed)
    return "\n".join([head, *_commit_lines(success, details, success_written=success_written, state_left=state_left)])


def _commit_head(request: JobRequest, attempt: int, url: str, *, already: bool, resumed: bool) -> str:
    if already:
        return f"Job {request.job_id} (attempt {attempt:02d}) was already committed; finished its cleanup"
    verb = "Resumed and finished the interrupted commit of job" if resumed else "Committed job"
    return f"{verb} {request.job_id} (attempt {attempt:02d}) into {url}"


def _commit_lines(success: SuccessData, details: str, *, success_written: bool, state_left: bool) -> list[str]:
    counters = success.iostatistics.counters
    return [
        f"  Files:      {counters.get(COMMITTER_FILES_COMMITTED, 0):,} committed{details}",
        f"  Bytes:      {format_bytes(counters.get(COMMITTER_BYTES_COMMITTED, 0))}",
        f"  Tasks:      {counters.get(COMMITTER_TASKS_COMPLETED, 0):,} committed task manifests",
        f"  {SUCCESS_MARKER}:   "
        + ("in place" if success_written else "not written (mapreduce.fileoutputcommitter.marksuccessfuljobs=false)"),
        "  Job state:  " + ("left under _temporary (cleanup skipped or failed)" if state_left else "deleted"),
    ]


def _run_transactional_commit(request: JobRequest, found: _Found) -> str:
    """Commit a transactional job: ``_committed_<tid>`` is the commit point; the files of attempts not committed
    (found through the markers) are deleted first. No progress bar: nothing is renamed."""
    before = found.status
    if before is None and not found.success_is_ours:
        # Committed long ago, its state gone, a later job's _SUCCESS in place: a rerun would only rewrite
        # _SUCCESS, over the later job's.
        return (
            f"Job {request.job_id} was already committed (transactional; its _committed_ record is in place) and has "
            f"no state left under {TEMPORARY_DIR}: nothing to do"
        )
    already = before is None or (before.transaction is not None and before.transaction.committed)
    resumed = not already and before is not None and before.commit is not None
    warning = _driver_warning(before.markers if before is not None else None)
    with _transactional_committer(request, found.attempt) as committer:
        success = committer.commit_job()
        state_left = committer.store.info(committer.paths.job_dir) is not None
        success_written = committer.store.info(committer.paths.success_path) is not None
        record = committer.store.to_url(TransactionPaths(committer.paths).committed)
    head = _commit_head(request, found.attempt, committer.destination_url, already=already, resumed=resumed)
    lines = [head + " (transactional)"]
    if warning:
        lines.append(f"  Warning:    {warning}")
    if not already:
        markers = before.markers if before is not None else None
        named = f" ({markers.markers:,} write markers read)" if markers is not None and markers.error is None else ""
        lines += [
            f"  Record:     {record} written: the commit point (no file moved)",
            f"  Others:     files of attempts not committed, named by the write markers, deleted{named}",
        ]
    lines += _commit_lines(success, "", success_written=success_written, state_left=state_left)
    return "\n".join(lines)


def _run_upload_commit(request: JobRequest, found: _Found) -> str:
    """Commit an upload job: complete the chosen attempts' uploads (``If-None-Match: *``, no data copied), write
    ``_SUCCESS``, abort the job's other incomplete uploads. No progress bar: each file is one call. The report
    counts the job's incomplete uploads before and after, from the same finding as ``status`` and ``abort``."""
    before = found.status
    already = before is None or (before.commit is not None and before.commit.finished)
    resumed = not already and before is not None and before.commit is not None
    warning = _driver_warning(before.markers if before is not None else None)
    with _upload_committer(request, found.attempt) as committer:
        keys = _job_upload_keys(committer)
        incomplete_before = _incomplete_at(committer, keys)
        success = committer.commit_job()
        incomplete_after = _incomplete_at(committer, keys)
        state_left = committer.store.info(committer.paths.job_dir) is not None
        success_written = committer.store.info(committer.paths.success_path) is not None
    head = _commit_head(request, found.attempt, committer.destination_url, already=already, resumed=resumed)
    lines = [head + " (upload)"]
    if warning:
        lines.append(f"  Warning:    {warning}")
    files = success.iostatistics.counters.get(COMMITTER_FILES_COMMITTED, 0)
    if not already:
        lines.append(f"  Uploads:    {files:,} completed with If-None-Match: * (no object data copied)")
    lines.append(
        f"  Incomplete: {incomplete_before:,} uploads of the job before, {incomplete_after:,} after"
        + (" (left at keys another job in flight marks too)" if incomplete_after else "")
    )
    lines += _commit_lines(success, "", success_written=success_written, state_left=state_left)
    return "\n".join(lines)


def _job_upload_keys(committer: UploadCommitter) -> set[str]:
    """The keys every attempt of the job marks (read before a commit or abort deletes the markers)."""
    gate = _UploadReads(committer)
    return job_marker_keys(gate)


def _incomplete_at(committer: UploadCommitter, keys: set[str]) -> int:
    """How many incomplete uploads S3 lists at ``keys`` (one paginated listing of the destination)."""
    if not keys:
        return 0
    gate = _UploadReads(committer)
    return sum(1 for upload in gate.list_uploads(committer.paths.dest.rstrip("/") + "/") if upload.path in keys)


class _UploadReads(Stage[None, None]):
    """A gate for the command's own reads around an upload job's commit or abort (timed, retried, counted)."""

    name = "status"

    def __init__(self, committer: UploadCommitter) -> None:
        super().__init__(StageContext(committer.config, committer.store, committer.paths, StatisticsStore()))

    def execute(self, arguments: None) -> None:
        raise JobStateError("the reads of the upload commands are not a step to run")


def _driver_warning(markers: MarkerStatus | None) -> str:
    """A job whose driver still answers may be running: acting on it is the caller's call (CONTRACT §6)."""
    if markers is None or not markers.driver_alive:
        return ""
    return f"the job's driver looks alive ({markers.liveness}); it may still be running"


def _details(already: int, recovered: int) -> str:
    parts = []
    if already:
        parts.append(f"{already:,} already in place from an earlier run")
    if recovered:
        parts.append(f"{recovered:,} renames recovered after an error")
    return f" ({'; '.join(parts)})" if parts else ""


def run_abort(request: JobRequest, *, dry_run: bool) -> str:
    """Abort the job attempt (or, with ``dry_run``, list what an abort would revert and delete)."""
    found = _find_attempt(request)
    attempt, before = found.attempt, found.status
    if before is None:
        raise CommitterError(
            f"{request.destination}: job {request.job_id} is committed ({SUCCESS_MARKER} is its) and has no state "
            "left under _temporary: nothing to abort"
        )
    if found.protocol == TRANSACTIONAL:
        return _run_transactional_abort(request, before, dry_run=dry_run)
    if found.protocol == UPLOAD:
        return _run_upload_abort(request, before, dry_run=dry_run)
    with _committer(request, attempt) as committer:
        if dry_run:
            return _format_plan(request, attempt, committer)
        result = committer.abort_job()
    cleanup = result.cleanup.outcome.value
    if result.cleanup.error is not None:
        cleanup += f" ({result.cleanup.error})"
    lines = [
        f"Aborted job {request.job_id} (attempt {attempt:02d}) of {committer.destination_url}",
        f"  Files reverted:       {result.files_reverted:,}",
        f"  Directories removed:  {result.directories_removed:,}",
        f"  Cleanup:              {cleanup}",
    ]
    if before.commit is not None and before.commit.finished:
        lines.insert(1, "  The job was committed: its output stays; only its state was deleted")
    return "\n".join(lines)


def _format_plan(request: JobRequest, attempt: int, committer: ManifestCommitter) -> str:
    plan = committer.plan_abort()
    lines = [f"Dry run: abort of job {request.job_id} (attempt {attempt:02d}) would (nothing was changed):"]
    if plan.committed:
        lines.append("  keep the output: the job is committed")
    elif not plan.commit_started:
        lines.append("  change nothing in the destination: no job commit had started")
    else:
        if plan.manifests_unusable is not None:
            lines.append(f"  not revert files: the manifests are unusable now ({plan.manifests_unusable})")
        lines.append(f"  delete {len(plan.files):,} files this job's commit moved into the destination:")
        lines.extend(f"    {url}" for url in plan.files[:_SHOWN])
        if len(plan.files) > _SHOWN:
            lines.append(f"    ... and {len(plan.files) - _SHOWN:,} more")
        if plan.directories:
            lines.append(f"  remove {len(plan.directories):,} directories it created, if empty then:")
            lines.extend(f"    {url}" for url in plan.directories[:_SHOWN])
        if plan.restore_success:
            lines.append(f"  put back the earlier {SUCCESS_MARKER} that the commit moved aside")
    paths: JobPaths = committer.paths
    if plan.job_directory is not None:
        lines.append(f"  delete the job's state {plan.job_directory}")
    elif committer.store.info(paths.job_dir) is not None:
        lines.append("  keep the job's state (mapreduce.fileoutputcommitter.cleanup.skipped=true)")
    return "\n".join(lines)


def _run_transactional_abort(request: JobRequest, before: AttemptStatus, *, dry_run: bool) -> str:
    """Abort a transactional job from its markers alone (``TransactionalCommitter.abort_job``), or list what that
    would delete (``plan_abort``, the same stage in dry-run mode)."""
    attempt = before.attempt
    warning = _driver_warning(before.markers)
    with _transactional_committer(request, attempt) as committer:
        if dry_run:
            return _format_transactional_plan(request, attempt, committer, warning)
        result = committer.abort_job()
    lines = [f"Aborted job {request.job_id} (attempt {attempt:02d}, transactional) of {committer.destination_url}"]
    if warning:
        lines.append(f"  Warning:             {warning}")
    if result.committed:
        lines.append("  The job was committed: its output stays; only its state was deleted")
    else:
        lines.append(f"  Data files deleted:  {len(result.deleted):,}")
        lines.extend(f"    {url}" for url in result.deleted)
    cleanup = "not run" if result.cleanup is None else result.cleanup.outcome.value
    if result.cleanup is not None and result.cleanup.error is not None:
        cleanup += f" ({result.cleanup.error})"
    lines.append(f"  Cleanup:             {cleanup}")
    return "\n".join(lines)


def _format_transactional_plan(
    request: JobRequest, attempt: int, committer: TransactionalCommitter, warning: str
) -> str:
    plan = committer.plan_abort()
    store, transaction = committer.store, TransactionPaths(committer.paths)
    lines = [
        f"Dry run: abort of job {request.job_id} (attempt {attempt:02d}, transactional) would (nothing was changed):"
    ]
    if warning:
        lines.append(f"  warning: {warning}")
    if plan.committed:
        lines.append(f"  keep the output: the job is committed ({store.to_url(transaction.committed)} in place)")
    else:
        lines.append(f"  delete {len(plan.deleted):,} data files its write markers name:")
        lines.extend(f"    {url}" for url in plan.deleted[:_SHOWN])
        if len(plan.deleted) > _SHOWN:
            lines.append(f"    ... and {len(plan.deleted) - _SHOWN:,} more")
        lines.append(f"  delete {store.to_url(transaction.started)}")
    lines.append(f"  delete the job's state {store.to_url(committer.paths.job_dir)}")
    return "\n".join(lines)


def _run_upload_abort(request: JobRequest, before: AttemptStatus, *, dry_run: bool) -> str:
    """Abort an upload job from its state alone (``UploadCommitter.abort_job``), or list what that would do
    (``plan_abort``: the same stage, every change left out)."""
    attempt = before.attempt
    warning = _driver_warning(before.markers)
    with _upload_committer(request, attempt) as committer:
        result = committer.plan_abort() if dry_run else committer.abort_job()
        state = committer.store.to_url(committer.paths.job_dir)
    if dry_run:
        lines = [f"Dry run: abort of job {request.job_id} (attempt {attempt:02d}, upload) would (nothing was changed):"]
        verb_delete, verb_abort = "delete", "abort"
    else:
        lines = [f"Aborted job {request.job_id} (attempt {attempt:02d}, upload) of {committer.destination_url}"]
        verb_delete, verb_abort = "deleted", "aborted"
    if warning:
        lines.append(f"  warning: {warning}")
    if result.committed:
        lines.append(
            "  keep the output: the job is committed" if dry_run else "  The job was committed: its output stays"
        )
    else:
        lines.append(f"  {verb_delete} {len(result.deleted):,} objects its interrupted commit had completed:")
        lines.extend(f"    {url}" for url in result.deleted[:_SHOWN])
        if len(result.deleted) > _SHOWN:
            lines.append(f"    ... and {len(result.deleted) - _SHOWN:,} more")
    lines.append(f"  {verb_abort} {len(result.aborted):,} incomplete uploads of the job, at:")
    lines.extend(f"    {url}" for url in result.aborted[:_SHOWN])
    if len(result.aborted) > _SHOWN:
        lines.append(f"    ... and {len(result.aborted) - _SHOWN:,} more")
    if result.left:
        lines.append(
            f"  left {len(result.left):,} incomplete uploads at keys another job in flight marks too (no record of "
            "this job names them):"
        )
        lines.extend(f"    {url}" for url in result.left[:_SHOWN])
    if dry_run:
        lines.append(f"  delete the job's state {state}")
    else:
        cleanup = "not run" if result.cleanup is None else result.cleanup.outcome.value
        if result.cleanup is not None and result.cleanup.error is not None:
            cleanup += f" ({result.cleanup.error})"
        lines.append(f"  Cleanup: {cleanup}")
    return "\n".join(lines)
