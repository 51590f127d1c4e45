"""``mc.rollback``: undo the transactional and upload jobs of a destination whose drivers died, from their state
alone (an upload job: the objects a partial commit completed, and every incomplete upload of the job).

A job qualifies when it has write markers and no ``_committed_<tid>``, and its driver is gone (its lease is older
than ``heartbeat.expiry.seconds`` and its marker server does not answer; ``markers/heartbeat.py``); a job that
began its commit (``commit-started``) is never undone on that evidence alone: it is reported as ``held``, for a
``commit`` to finish or an abort by name to undo (a driver paused in its commit looks dead too). Each is undone
by a fresh committer's ``abort_job``: exactly the data files of the job its markers name are deleted, then its
state; a marker naming anything else is skipped and reported. ``rollback(url, job_id=X)`` skips the liveness
check (the caller says X is dead) but still refuses a job without markers, which is not one this can undo (a
manifest job is aborted with ``abort_job``).

Which jobs rollback undoes is each protocol's to say (``JobOperations.judge_for_rollback``, found through the
registry by the protocol that recognises the job's state). Each job is judged and undone on its own: a job whose state
cannot be read or whose abort fails is reported (``RolledBack.error``) and the other jobs are still rolled back.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

from ..config import CommitterConfig
from ..errors import CommitterError
from ..paths import TEMPORARY_DIR, JobPaths, check_id, is_valid_id
from ..protocols.job_state import in_its_commit
from ..protocols.marker_protocol import MarkerProtocolCommitter
from ..protocols.names import ProtocolName
from ..protocols.registry import create_committer, operations_of, recognise
from ..retry import describe_error
from ..stages.reads import StateReads
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
    held: str | None = None
    """Not rolled back, and why: the job's lease has expired but it began its commit (``commit-started`` is in
    place), so it is left for a ``commit`` to finish or an ``abort`` by name to undo; ``deleted`` is empty."""


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
    as its abort: nothing changes). A job that could not be judged or undone is in the list with its ``error``; one
    left because it is in its commit, with its ``held``."""
    config = config or CommitterConfig()
    opened = open_destination_store(url, storage_options)
    store, root = opened.store, opened.path
    results: list[RolledBack] = []
    candidates: list[_Candidate] = []
    try:
        top = StateReads.over(store, config, JobPaths(root, "-"))
        if job_id is not None:
            check_id("job id", job_id)
            jobs = [job_id]
        else:
            jobs = _job_ids(top)
        with_markers = 0
        for job in jobs:
            for attempt in _job_attempts(top, job):
                reads = top.at(JobPaths(root, job, attempt))
                try:
                    protocol = recognise(reads)
                    verdict = operations_of(protocol).judge_for_rollback(reads, named=job_id is not None)
                except Exception as error:
                    results.append(_failed(job, attempt, "its state could not be read", error))
                    with_markers += 1
                    continue
                if not verdict.applies:
                    continue  # no markers: not a job this can undo
                with_markers += 1
                if verdict.held is not None:
                    results.append(RolledBack(job, attempt, (), verdict.held, protocol=protocol, held=verdict.held))
                elif verdict.reason is not None:
                    candidates.append(_Candidate(job, attempt, verdict.reason, protocol, job_id is not None))
        if job_id is not None and not with_markers:
            raise CommitterError(
                f"{store.to_url(posixpath.join(root, TEMPORARY_DIR, job_id))}: job {job_id} has no write markers; "
                "it is not a transactional job that rollback can undo (abort it with `manifest-committer abort`)"
            )
    finally:
        store.close()
    for candidate in candidates:
        try:
            results.append(_undo(url, candidate, config=config, storage_options=storage_options, dry_run=dry_run))
        except Exception as error:
            results.append(_failed(candidate.job_id, candidate.attempt, candidate.reason, error, candidate.protocol))
    return sorted(results, key=lambda result: (result.job_id, result.job_attempt))


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A job attempt judged to be rolled back."""

    job_id: str
    attempt: int
    reason: str
    protocol: ProtocolName
    named: bool


def _undo(
    url: str,
    candidate: _Candidate,
    *,
    config: CommitterConfig,
    storage_options: dict[str, Any] | None,
    dry_run: bool,
) -> RolledBack:
    """Abort (or plan the abort of) one dead job attempt with a fresh committer of its protocol."""
    job, attempt = candidate.job_id, candidate.attempt
    with create_committer(url, job, candidate.protocol, attempt, config, storage_options) as committer:
        if not isinstance(committer, MarkerProtocolCommitter):  # only marker protocols judge a job dead
            raise CommitterError(f"{committer.destination_url}: job {job} of {candidate.protocol} has no markers")
        if not dry_run:
            held = _fence(StateReads.over(committer.store, config, committer.paths), named=candidate.named)
            if held is not None:
                return RolledBack(job, attempt, (), held, protocol=candidate.protocol, held=held)
        undone = committer.plan_abort() if dry_run else committer.abort_job()
    aborted: tuple[str, ...] = getattr(undone, "aborted", ())
    if not dry_run:
        log.warning(
            "Rolled back %s job %s attempt %d (%s): %d data files deleted, %d incomplete uploads aborted",
            candidate.protocol,
            job,
            attempt,
            candidate.reason,
            len(undone.deleted),
            len(aborted),
        )
    return RolledBack(job, attempt, undone.deleted, candidate.reason, aborted, candidate.protocol, undone.skipped)


def _fence(gate: StateReads, *, named: bool) -> str | None:
    """Rollback's side of the fence (``JobPaths.rolled_back_path``): write ``rolled-back``, then check
    ``commit-started`` again; a commit writes that, then checks this record, so at least one side sees the other.
    Returns why the job is held if its commit began meanwhile (the record is taken back). A job the caller named
    skips the check, but the record still stops a paused driver that wakes from publishing."""
    paths = gate.paths
    gate.write_bytes(paths.rolled_back_path, b"{}")
    if named or gate.info(paths.commit_started_path) is None:
        return None
    gate.delete_file(paths.rolled_back_path)
    held = in_its_commit(gate, "its commit began while this rollback judged it")
    log.warning("rollback: job %s attempt %02d left: %s", paths.job_id, paths.job_attempt, held)
    return held


def _failed(
    job: str, attempt: int, reason: str, error: Exception, protocol: str = ProtocolName.TRANSACTIONAL
) -> RolledBack:
    message = f"job {job} attempt {attempt:02d}: {describe_error(error)}"
    log.error("Rollback of job %s attempt %d failed (the other jobs go on): %s", job, attempt, message)
    return RolledBack(job, attempt, (), reason, protocol=protocol, error=message)


def _job_ids(top: StateReads) -> list[str]:
    return sorted(
        name
        for name, is_dir in top.names(posixpath.join(top.paths.dest, TEMPORARY_DIR))
        if is_dir and is_valid_id(name)
    )


def _job_attempts(top: StateReads, job_id: str) -> list[int]:
    job_dir = JobPaths(top.paths.dest, job_id, 0).job_dir
    return sorted(int(name) for name, is_dir in top.names(job_dir) if is_dir and len(name) == 2 and name.isdigit())
