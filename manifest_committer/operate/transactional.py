"""``rollback`` and ``vacuum``: the commands over a whole destination (rollback: transactional and upload jobs;
vacuum: the transactional protocol's files).

Each is the library call (``mc.rollback``, ``mc.vacuum``) and a report of what it deleted, every file named, so
the output is the record of the change. The decisions stay in the library: ``rollback`` judges a job dead by
``markers/heartbeat.py``, ``vacuum --dry-run`` asks ``mc.vacuum`` itself for its list, so a dry run and the real
run cannot disagree on what goes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..config import CommitterConfig
from ..errors import CommitterError
from ..paths import JobPaths, check_id
from ..protocols.transactional.readers import vacuum
from ..protocols.transactional.records import TransactionPaths
from ..store.factory import open_destination_store
from .rollback import rollback

log = logging.getLogger(__name__)


class PartlyFailedError(CommitterError):
    """A command over a destination did part of its work: ``report`` says what it changed, the message what
    failed. The command line prints both and exits non-zero."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True, slots=True)
class DestinationRequest:
    """What the command line names for a destination-wide command."""

    destination: str
    config: CommitterConfig
    storage_options: dict[str, Any]


def _destination_url(request: DestinationRequest, job_id: str | None = None) -> tuple[str, str | None]:
    """The destination's URL, and the URL of ``job_id``'s ``_committed_<tid>`` when it is in place; a
    ``CommitterError`` if the destination is not there (a typo must not read as "nothing to do")."""
    opened = open_destination_store(request.destination, request.storage_options)
    store, root = opened.store, opened.path
    try:
        url = store.to_url(root)
        if store.info(root) is None:
            raise CommitterError(f"{url}: no such destination")
        if job_id is None:
            return url, None
        record = TransactionPaths(JobPaths(root, check_id("job id", job_id))).committed
        return url, store.to_url(record) if store.info(record) is not None else None
    finally:
        store.close()


def run_rollback(request: DestinationRequest, job_id: str | None = None, *, dry_run: bool = False) -> str:
    """Roll back every dead transactional job of the destination (or the named one); return what was deleted
    (with ``dry_run``, what would be: the same judgement of which jobs are dead, each job's abort planned)."""
    where, committed = _destination_url(request, job_id)
    if committed is not None:  # its state may be gone: rollback would call it "not a transactional job"
        return f"Nothing rolled back: job {job_id} of {where} is committed ({committed} is in place)"
    rolled = rollback(
        request.destination, job_id, storage_options=request.storage_options, config=request.config, dry_run=dry_run
    )
    held = [job for job in rolled if job.held is not None]
    held_lines = [f"Job {job.job_id} (attempt {job.job_attempt:02d}): NOT rolled back: {job.held}" for job in held]
    rolled = [job for job in rolled if job.held is None]
    if not rolled:
        if job_id is not None:  # committed between the check above and the rollback's own
            return f"Nothing rolled back: job {job_id} of {where} is committed"
        nothing = (
            f"Nothing rolled back: no dead transactional job in {where}, and no dead upload job (jobs whose lease is "
            "fresh, or whose driver answers, are left alone, and so are jobs in their commit)"
        )
        return "\n".join([nothing, *held_lines])
    failed = [job for job in rolled if job.error is not None]
    rolled = [job for job in rolled if job.error is None]
    total = sum(len(job.deleted) for job in rolled)
    uploads = sum(len(job.aborted) for job in rolled)
    aborting = f", aborting {uploads:,} incomplete uploads" if uploads else ""
    if dry_run:
        lines = [
            f"Dry run: rollback of {where} would undo {len(rolled)} job attempt(s), deleting {total:,} data files"
            f"{aborting} (nothing was changed)"
        ]
    else:
        aborted = f", {uploads:,} incomplete uploads aborted" if uploads else ""
        lines = [f"Rolled back {len(rolled)} job attempt(s) of {where}: {total:,} data files deleted{aborted}"]
    verb, abort_verb = ("would delete", "would abort") if dry_run else ("deleted", "aborted")
    for job in rolled:
        kind = ", upload" if job.protocol == "upload" else ""
        lines.append(f"Job {job.job_id} (attempt {job.job_attempt:02d}{kind}): {job.reason}")
        lines.append(f"  {verb} {len(job.deleted):,} data files" + (":" if job.deleted else ""))
        lines.extend(f"    {url}" for url in job.deleted)
        if job.protocol == "upload":
            lines.append(f"  {abort_verb} {len(job.aborted):,} incomplete uploads" + (", at:" if job.aborted else ""))
            lines.extend(f"    {url}" for url in job.aborted)
        if job.skipped:
            lines.append(f"  skipped {len(job.skipped):,} markers (nothing they name was deleted):")
            lines.extend(f"    {entry}" for entry in job.skipped)
    for job in failed:
        lines.append(f"Job {job.job_id} (attempt {job.job_attempt:02d}): NOT rolled back: {job.error}")
    lines.extend(held_lines)
    report = "\n".join(lines)
    if failed:
        names = ", ".join(f"{job.job_id} (attempt {job.job_attempt:02d})" for job in failed)
        raise PartlyFailedError(f"rollback of {where}: {len(failed)} job attempt(s) not rolled back: {names}", report)
    return report


def run_vacuum(request: DestinationRequest, retention_hours: float, *, dry_run: bool) -> str:
    """Vacuum the destination (or, with ``dry_run``, list what vacuum would delete now); return the files."""
    where, _ = _destination_url(request)
    found = vacuum(
        request.destination,
        retention_hours,
        storage_options=request.storage_options,
        dry_run=dry_run,
        config=request.config,
    )
    retention = f"retention {retention_hours:g} hours"
    if dry_run:
        head = f"Dry run: vacuum of {where} ({retention}) would delete {len(found):,} data files (nothing was changed)"
    else:
        head = f"Vacuum of {where} ({retention}): deleted {len(found):,} data files"
    lines = [head + (":" if found else "")]
    lines.extend(f"  {url}" for url in found)
    return "\n".join(lines)
