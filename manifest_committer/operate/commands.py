"""``commit`` and ``abort`` of one job attempt: the committer's own calls, and a report of what they changed.

Each runs the job's own committer exactly as an engine's driver would (same destination, job id and attempt),
so a rerun finishes an interrupted commit and an abort reverts one, with every promise of the contract. This
module only finds the job (as ``status`` sees it), builds the committer of the protocol that recognised the
job's state, hands the call to that protocol's ``JobOperations`` and frames its report; it refuses a job id that
is not there (a typo must not look like a successful abort).
"""

from __future__ import annotations

import logging
import posixpath
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from ..config import CommitterConfig
from ..errors import CommitterError
from ..formatting import format_bytes
from ..paths import TEMPORARY_DIR, JobPaths, check_id
from ..protocols.base import CommitterBase
from ..protocols.job_state import AttemptStatus, CommitReport, JobStatus
from ..protocols.names import ProtocolName
from ..protocols.registry import create_committer, operations_of
from ..protocols.transactional.records import TransactionPaths
from ..statistic_names import COMMITTER_BYTES_COMMITTED, COMMITTER_FILES_COMMITTED, COMMITTER_TASKS_COMPLETED
from ..store.factory import open_destination_store
from ..success_data import SUCCESS_MARKER
from .progress import CommitProgressBar
from .status import inspect_destination

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Found:
    """The job attempt a command acts on, as ``status`` sees it."""

    attempt: int
    status: AttemptStatus | None
    """``None``: the job has no state left under ``_temporary`` (its commit point passed)."""
    protocol: ProtocolName
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
    opened = open_destination_store(request.destination, request.storage_options)
    store, root = opened.store, opened.path
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
            protocol = ProtocolName.TRANSACTIONAL if committed_record else ProtocolName.MANIFEST
            if success is not None and success_is_ours and success.committer in list(ProtocolName):
                protocol = ProtocolName(success.committer)
            return _Found(request.attempt or 0, None, protocol, success_is_ours)
        others = ", ".join(j.job_id for j in status.jobs) or "none"
        where = posixpath.join(status.destination, TEMPORARY_DIR)
        raise CommitterError(f"{where}: no job {request.job_id!r} in flight there (jobs there: {others})")
    chosen = _attempt_of(job, _pick(status.destination, job, request.attempt))
    return _Found(chosen.attempt, chosen, ProtocolName(chosen.protocol), success_is_ours)


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


def _committer(request: JobRequest, found: _Found) -> CommitterBase:
    """A fresh committer of the job's protocol: it runs no marker server or heartbeat (only ``setup_job`` does)."""
    return create_committer(
        request.destination,
        request.job_id,
        protocol=found.protocol,
        job_attempt=found.attempt,
        config=request.config,
        storage_options=request.storage_options,
    )


class CommitInterrupted(KeyboardInterrupt):
    """The job commit was interrupted (Ctrl-C); the message says what it had moved and what settles the job."""


def _interrupted(request: JobRequest, done: tuple[int, int] | None) -> str:
    where = f"{request.destination} --job {request.job_id}"
    if request.attempt is not None:
        where += f" --attempt {request.attempt}"
    moved = (
        f"after moving {done[0]:,} of {done[1]:,} files into the destination"
        if done is not None
        else "part-way (its journal holds what it moved)"
    )
    return (
        f"the commit of job {request.job_id} stopped {moved}; `manifest-committer commit {where}` finishes it, "
        f"`manifest-committer abort {where}` undoes it"
    )


def run_commit(request: JobRequest, *, progress_stream: TextIO | None = None) -> str:
    """Run (or rerun) the job commit; return what changed. ``progress_stream``: draw a bar there (where the
    protocol moves files). Interrupted (``KeyboardInterrupt``), it raises ``CommitInterrupted`` saying what it
    had moved and how to finish or undo the job."""
    found = _find_attempt(request)
    if found.status is None and not found.success_is_ours:
        # Committed long ago, its state gone, a later job's _SUCCESS in place: a rerun would only rewrite
        # _SUCCESS, over the later job's.
        return (
            f"Job {request.job_id} was already committed ({found.protocol}; its commit record is in place) and has "
            f"no state left under {TEMPORARY_DIR}: nothing to do"
        )
    progress: list[tuple[int, int]] = []
    try:
        with (
            _committer(request, found) as committer,
            CommitProgressBar(
                request.job_id, progress_stream or sys.stderr, enabled=progress_stream is not None
            ) as bar,
        ):

            def callback(done: int, total: int) -> None:
                progress[:] = [(done, total)]
                bar(done, total)

            report = operations_of(found.protocol).commit(committer, found.status, callback)
            url = committer.destination_url
    except KeyboardInterrupt as interrupt:
        raise CommitInterrupted(_interrupted(request, progress[0] if progress else None)) from interrupt
    return "\n".join([_commit_head(request, found, url, report), *report.lines, *_commit_lines(report)])


def _commit_head(request: JobRequest, found: _Found, url: str, report: CommitReport) -> str:
    label = "" if found.protocol == ProtocolName.MANIFEST else f" ({found.protocol})"
    if report.already:
        return f"Job {request.job_id} (attempt {found.attempt:02d}) was already committed; finished its cleanup{label}"
    verb = "Resumed and finished the interrupted commit of job" if report.resumed else "Committed job"
    return f"{verb} {request.job_id} (attempt {found.attempt:02d}) into {url}{label}"


def _commit_lines(report: CommitReport) -> list[str]:
    counters = report.success.iostatistics.counters
    return [
        f"  Files:      {counters.get(COMMITTER_FILES_COMMITTED, 0):,} committed{report.details}",
        f"  Bytes:      {format_bytes(counters.get(COMMITTER_BYTES_COMMITTED, 0))}",
        f"  Tasks:      {counters.get(COMMITTER_TASKS_COMPLETED, 0):,} committed task manifests",
        f"  {SUCCESS_MARKER}:   "
        + (
            "in place"
            if report.success_written
            else "not written (mapreduce.fileoutputcommitter.marksuccessfuljobs=false)"
        ),
        "  Job state:  " + ("left under _temporary (cleanup skipped or failed)" if report.state_left else "deleted"),
    ]


def run_abort(request: JobRequest, *, dry_run: bool) -> str:
    """Abort the job attempt (or, with ``dry_run``, list what an abort would revert and delete)."""
    found = _find_attempt(request)
    if found.status is None:
        raise CommitterError(
            f"{request.destination}: job {request.job_id} is committed ({SUCCESS_MARKER} is its) and has no state "
            "left under _temporary: nothing to abort"
        )
    with _committer(request, found) as committer:
        lines = operations_of(found.protocol).abort(committer, found.status, dry_run=dry_run)
    return "\n".join(lines)
