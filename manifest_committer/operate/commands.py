"""``commit`` and ``abort`` of one job attempt: the committer's own calls, and a report of what they changed.

Each runs ``ManifestCommitter`` exactly as an engine's driver would (same destination, job id and attempt),
so a rerun finishes an interrupted commit and an abort reverts one, with every promise of CONTRACT §4; this
module only finds the job, says what happened, and refuses a job id that is not there (a typo must not look
like a successful abort).
"""

from __future__ import annotations

import logging
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from ..committer import ManifestCommitter
from ..config import CommitterConfig
from ..errors import CommitterError
from ..paths import TEMPORARY_DIR, JobPaths
from ..statistic_names import (
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
)
from ..store import StoreOperations
from ..success_data import SUCCESS_MARKER
from .progress import CommitProgressBar
from .status import AttemptStatus, JobStatus, inspect_destination

log = logging.getLogger(__name__)

_SHOWN = 50
"""Paths listed by a dry run before ``... and N more``."""


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What the command line names: a destination, a job and (optionally) its attempt."""

    destination: str
    job_id: str
    attempt: int | None
    config: CommitterConfig
    storage_options: dict[str, Any]


def _find_attempt(request: JobRequest) -> tuple[int, AttemptStatus | None, bool]:
    """The attempt to act on (the one named, else the highest present), its status, and whether the
    destination's ``_SUCCESS`` is this job's (a job whose state is gone after its commit point)."""
    committer = ManifestCommitter(
        request.destination, request.job_id, config=request.config, storage_options=request.storage_options
    )
    with committer:
        store: StoreOperations = committer.store
        status = inspect_destination(store, committer.paths.dest, request.config)
    job = next((job for job in status.jobs if job.job_id == request.job_id), None)
    success_is_ours = status.last_success is not None and status.last_success.job_id == request.job_id
    if job is None or not job.attempts:
        if success_is_ours:
            return request.attempt or 0, None, True
        others = ", ".join(j.job_id for j in status.jobs) or "none"
        where = posixpath.join(status.destination, TEMPORARY_DIR)
        raise CommitterError(f"{where}: no job {request.job_id!r} in flight there (jobs there: {others})")
    return _pick(status.destination, job, request.attempt), _attempt_of(job, request.attempt), success_is_ours


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


def _attempt_of(job: JobStatus, attempt: int | None) -> AttemptStatus:
    chosen = max(a.attempt for a in job.attempts) if attempt is None else attempt
    return next(a for a in job.attempts if a.attempt == chosen)


def _committer(request: JobRequest, attempt: int) -> ManifestCommitter:
    return ManifestCommitter(
        request.destination,
        request.job_id,
        job_attempt=attempt,
        config=request.config,
        storage_options=request.storage_options,
    )


def run_commit(request: JobRequest, *, progress_stream: TextIO | None = None) -> str:
    """Run (or rerun) the job commit; return what changed. ``progress_stream``: draw a bar there."""
    attempt, before, _ = _find_attempt(request)
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
    from ..cli import format_bytes

    counters = success.iostatistics.counters
    if already:
        head = f"Job {request.job_id} (attempt {attempt:02d}) was already committed; finished its cleanup"
    else:
        verb = "Resumed and finished the interrupted commit of job" if resumed else "Committed job"
        head = f"{verb} {request.job_id} (attempt {attempt:02d}) into {committer.destination_url}"
    lines = [
        head,
        f"  Files:      {counters.get(COMMITTER_FILES_COMMITTED, 0):,} committed"
        + _details(counters.get(COMMITTER_FILES_ALREADY_COMMITTED, 0), counters.get(COMMIT_FILE_RENAME_RECOVERED, 0)),
        f"  Bytes:      {format_bytes(counters.get(COMMITTER_BYTES_COMMITTED, 0))}",
        f"  Tasks:      {counters.get(COMMITTER_TASKS_COMPLETED, 0):,} committed task manifests",
        f"  {SUCCESS_MARKER}:   "
        + ("in place" if success_written else "not written (mapreduce.fileoutputcommitter.marksuccessfuljobs=false)"),
        "  Job state:  " + ("left under _temporary (cleanup skipped or failed)" if state_left else "deleted"),
    ]
    return "\n".join(lines)


def _details(already: int, recovered: int) -> str:
    parts = []
    if already:
        parts.append(f"{already:,} already in place from an earlier run")
    if recovered:
        parts.append(f"{recovered:,} renames recovered after an error")
    return f" ({'; '.join(parts)})" if parts else ""


def run_abort(request: JobRequest, *, dry_run: bool) -> str:
    """Abort the job attempt (or, with ``dry_run``, list what an abort would revert and delete)."""
    attempt, before, _ = _find_attempt(request)
    if before is None:
        raise CommitterError(
            f"{request.destination}: job {request.job_id} is committed ({SUCCESS_MARKER} is its) and has no state "
            "left under _temporary: nothing to abort"
        )
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
