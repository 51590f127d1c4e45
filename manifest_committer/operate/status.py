"""``status``: what is in flight under ``DEST/_temporary``, what ``commit`` or ``abort`` would do, the last
``_SUCCESS``, and for a destination of the transactional protocol its data files by what the records make of them.

Each job attempt is described by its own protocol (``protocols/registry.py``: the protocol that recognises the
attempt's state, then its ``JobOperations.inspect``); this module walks the destination, dispatches, and formats.
Read only: every store call is a read (info, list, read) through the ``StateReads`` gate, and nothing local is
removed either (spill files of killed processes are only reported).
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from ..config import CommitterConfig
from ..entry_file import find_spill_files
from ..errors import CommitterError
from ..formatting import format_bytes
from ..paths import TEMPORARY_DIR, TRASH_DIR, JobPaths
from ..protocols.job_state import (
    AttemptStatus,
    CommitProgress,
    JobStatus,
    ManifestStatus,
    MarkerStatus,
    TransactionStatus,
    UploadStatus,
)
from ..protocols.names import ProtocolName
from ..protocols.registry import OPERATIONS, operations_of, recognise
from ..protocols.transactional.readers import count_files
from ..protocols.transactional.records import COMMITTED_PREFIX, STARTED_PREFIX
from ..stages.reads import StateReads
from ..statistic_names import COMMITTER_BYTES_COMMITTED, COMMITTER_FILES_COMMITTED
from ..store import StoreOperations
from ..success_data import SuccessData

log = logging.getLogger(__name__)

STATUS_SCHEMA = "manifest-committer/status/1"
"""The ``schema`` field of ``status --json``: fields are only ever added under this name."""
_ATTEMPT_DIR = re.compile(r"[0-9]{2}\Z")

__all__ = [
    "STATUS_SCHEMA",
    "AttemptStatus",
    "CommitProgress",
    "DataFiles",
    "DestinationStatus",
    "JobStatus",
    "LastSuccess",
    "ManifestStatus",
    "MarkerStatus",
    "SpillFileStatus",
    "TransactionStatus",
    "UploadStatus",
    "format_status",
    "inspect_destination",
]


@dataclass(frozen=True, slots=True)
class LastSuccess:
    url: str
    job_id: str | None = None
    success: bool | None = None
    date: str | None = None
    timestamp: int | None = None
    committer: str | None = None
    files: int | None = None
    bytes: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SpillFileStatus:
    path: str
    job_id: str
    pid: int
    size: int


@dataclass(frozen=True, slots=True)
class DataFiles:
    """The destination's data files as ``committed_files`` and ``vacuum`` judge them (``readers.FileCounts``);
    counted only where the transactional protocol has been (its records at the top, or one of its jobs)."""

    committed: int = 0
    without_tid: int = 0
    uncommitted: int = 0
    removed: int = 0
    records: int = 0
    error: str | None = None
    """Why they could not be counted (an unreadable commit record, a failed listing)."""


@dataclass(frozen=True, slots=True)
class DestinationStatus:
    """Everything ``status`` shows; ``to_dict`` is the ``--json`` document."""

    destination: str
    jobs: list[JobStatus]
    last_success: LastSuccess | None
    dead_spill_files: list[SpillFileStatus]
    state_being_deleted: list[str] = dataclasses.field(default_factory=list)
    """Entries of ``_temporary/.trash``: the state of committed jobs, moved aside and deleted after their
    commit returned (or by the next job commit, if that process was killed). Never a job in flight."""
    data_files: DataFiles | None = None
    """Counts of the transactional protocol's data files; ``None`` when not counted (see ``DataFiles``)."""
    schema: str = STATUS_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def inspect_destination(
    store: StoreOperations,
    dest: str,
    config: CommitterConfig | None = None,
    spill_directory: str | None = None,
    *,
    count_data_files: bool = True,
) -> DestinationStatus:
    """The status of the destination at store path ``dest``; a ``CommitterError`` if there is none.

    ``count_data_files``: list the whole destination to count its data files when the transactional protocol has
    been there (off: a large table's listing is the one costly read of ``status``)."""
    config = config or CommitterConfig()
    top = StateReads.over(store, config, JobPaths(dest, "-"))
    try:
        found = top.info(dest)
    except Exception as error:
        if not top.is_auth_error(error):
            raise
        raise CommitterError(
            f"{store.to_url(dest)}: the store refused the request (credentials from {top.credential_sources}): "
            f"{type(error).__name__}: {error}"
        ) from error
    if found is None:
        raise CommitterError(f"{store.to_url(dest)}: no such destination")
    if not found.is_dir:
        raise CommitterError(f"{store.to_url(dest)}: a file, not a destination (a directory that jobs write into)")
    own_layouts = [job for operations in OPERATIONS for job in operations.jobs_of_own_layout(top)]
    taken = {posixpath.basename(job.attempts[0].url.rstrip("/")) for job in own_layouts if job.attempts}
    jobs = []
    trash: list[str] = []
    for name, is_dir in top.names(posixpath.join(dest, TEMPORARY_DIR)):
        if name == TRASH_DIR:
            trash = sorted(entry for entry, _ in top.names(posixpath.join(dest, TEMPORARY_DIR, TRASH_DIR)))
        elif is_dir and name not in taken:
            jobs.append(_inspect_job(top, name))
    jobs = sorted([*jobs, *own_layouts], key=lambda job: job.job_id)
    spill = [
        SpillFileStatus(found.path, found.job_id, found.pid, found.size)
        for found in find_spill_files(spill_directory)
        if not found.alive
    ]
    files = None
    if count_data_files and _transactional_was_here(top, jobs):
        files = _count_data_files(top)
    return DestinationStatus(store.to_url(dest), jobs, _last_success(top), spill, trash, files)


def _inspect_job(top: StateReads, job_id: str) -> JobStatus:
    job = JobStatus(job_id)
    reads = top.at(JobPaths(top.paths.dest, job_id))
    for name, is_dir in reads.names(reads.paths.job_dir):
        if is_dir and _ATTEMPT_DIR.match(name):
            attempt = reads.at(JobPaths(top.paths.dest, job_id, int(name)))
            protocol = recognise(attempt)
            job.attempts.append(operations_of(protocol).inspect(attempt, protocol))
        else:
            job.other_entries.append(name + ("/" if is_dir else ""))
    return job


def _transactional_was_here(reads: StateReads, jobs: list[JobStatus]) -> bool:
    if any(attempt.protocol == ProtocolName.TRANSACTIONAL for job in jobs for attempt in job.attempts):
        return True
    return any(
        not is_dir and name.startswith((COMMITTED_PREFIX, STARTED_PREFIX))
        for name, is_dir in reads.names(reads.paths.dest)
    )


def _count_data_files(reads: StateReads) -> DataFiles:
    try:
        counts = count_files(reads.context.store, reads.paths.dest, reads.context.store_retry)
    except (CommitterError, OSError) as error:
        return DataFiles(error=str(error))
    return DataFiles(counts.committed, counts.without_tid, counts.uncommitted, counts.removed, counts.records)


def _last_success(reads: StateReads) -> LastSuccess | None:
    path = reads.paths.success_path
    url = reads.to_url(path)
    data = reads.try_read(path)
    if data is None:
        return None
    try:
        success = SuccessData.from_json(data, url)
    except (CommitterError, ValueError) as error:
        return LastSuccess(url, error=str(error))
    counters = success.iostatistics.counters
    return LastSuccess(
        url,
        success.job_id,
        success.success,
        success.date,
        success.timestamp,
        success.committer,
        counters.get(COMMITTER_FILES_COMMITTED),
        counters.get(COMMITTER_BYTES_COMMITTED),
    )


def format_status(status: DestinationStatus) -> str:
    """The status for a person: each job and attempt, what commit and abort would do, then the last ``_SUCCESS``."""
    lines = [f"Destination {status.destination}"]
    if not status.jobs:
        lines.append(f"  No job in flight (nothing under {TEMPORARY_DIR})")
    for job in status.jobs:
        protocols = sorted({attempt.protocol for attempt in job.attempts})
        lines.append(f"Job {job.job_id}" + (f" ({', '.join(protocols)})" if protocols else ""))
        if job.other_entries:
            lines.append(f"  Not job attempts (another committer's layout?): {', '.join(job.other_entries)}")
        for attempt in job.attempts:
            lines += [
                f"  Attempt {attempt.attempt:02d}  {attempt.url}",
                f"    Task attempts:   {len(attempt.task_attempts):,}"
                + (
                    f" ({', '.join(attempt.task_attempts[:5])}{', ...' if len(attempt.task_attempts) > 5 else ''})"
                    if attempt.task_attempts
                    else ""
                ),
                f"    Task manifests:  {len(attempt.manifests):,} committed: {attempt.manifest_files:,} files, "
                f"{format_bytes(attempt.manifest_bytes)}",
            ]
            lines.extend(f"      unusable: {m.error}" for m in attempt.manifests if m.error is not None)
            if attempt.transaction is not None:
                lines.append(f"    Transaction:     {_transaction_line(attempt.transaction)}")
            if attempt.markers is not None:
                markers = attempt.markers
                kind = "batched" if markers.batched else "direct"
                lines.append(f"    Markers:         {markers.markers:,} ({kind}, {markers.direct:,} direct)")
                if markers.error is not None:
                    lines.append(f"      unreadable: {markers.error}")
                elif markers.driver_alive is not None:
                    lines.append(
                        f"    Driver:          {'alive' if markers.driver_alive else 'gone'} ({markers.liveness})"
                    )
            if attempt.uploads is not None:
                lines.append(f"    Uploads:         {_uploads_line(attempt.uploads)}")
            if attempt.transaction is None:  # a transactional one's line says if its commit point passed
                lines.append(f"    Job commit:      {_commit_line(attempt.commit, attempt.protocol)}")
            lines += [f"    commit would:    {attempt.would_commit}", f"    abort would:     {attempt.would_abort}"]
    if status.data_files is not None:
        lines.append(_data_files_line(status.data_files))
    success = status.last_success
    if success is None:
        lines.append("Last _SUCCESS: none")
    elif success.error is not None:
        lines.append(f"Last _SUCCESS: unreadable: {success.error}")
    else:
        outcome = "SUCCESS" if success.success else "FAILED"
        figures = ""
        if success.files is not None:
            figures = f", {success.files:,} files, {format_bytes(success.bytes or 0)}"
        lines.append(f"Last _SUCCESS: job {success.job_id}, {outcome}, {success.date}{figures} ({success.committer})")
    if status.state_being_deleted:
        lines.append(f"Committed jobs' state being deleted, under {TEMPORARY_DIR}/{TRASH_DIR} (not jobs in flight):")
        lines.extend(f"  {entry}" for entry in status.state_being_deleted)
    if status.dead_spill_files:
        lines.append("Spill files of killed job commits (the next commit or abort of their job removes them):")
        lines.extend(
            f"  {spill.path}  (job {spill.job_id}, pid {spill.pid}, {format_bytes(spill.size)})"
            for spill in status.dead_spill_files
        )
    return "\n".join(lines)


def _transaction_line(transaction: TransactionStatus) -> str:
    record = f"_committed_{transaction.tid}"
    if transaction.committed:
        return f"tid {transaction.tid}, committed ({record} in place: readers see its files)"
    started = "" if transaction.started else f"; _started_{transaction.tid} missing"
    return f"tid {transaction.tid}, not committed (no {record}: readers ignore its files){started}"


def _data_files_line(files: DataFiles) -> str:
    if files.error is not None:
        return f"Data files: not counted: {files.error}"
    return (
        f"Data files: {files.committed:,} committed ({files.without_tid:,} of them without a tid), "
        f"{files.uncommitted:,} uncommitted with a tid, {files.removed:,} removed by a later commit "
        f"(vacuum considers the last two); {files.records:,} commit records"
    )


def _uploads_line(uploads: UploadStatus) -> str:
    if uploads.error is not None:
        return f"{uploads.records:,} recorded (closed files); incomplete uploads unknown: {uploads.error}"
    left = f", {uploads.left:,} more at keys another job in flight marks" if uploads.left else ""
    return f"{uploads.incomplete:,} incomplete uploads of the job{left}; {uploads.records:,} recorded (closed files)"


def _commit_line(commit: CommitProgress | None, protocol: str) -> str:
    if commit is None:
        return "not started"
    if commit.finished:
        return "finished (commit point passed; cleanup not complete)"
    if protocol == ProtocolName.UPLOAD:
        return (
            f"started, interrupted or running: {commit.files:,} files of {len(commit.accepted):,} task attempts to "
            f"complete, {commit.runs} run(s)"
        )
    if protocol in (ProtocolName.V1, ProtocolName.V2):
        return f"started, interrupted or running: {commit.files:,} files of {len(commit.accepted):,} tasks planned"
    return (
        f"started, interrupted or running: {commit.files_renamed:,} of {commit.files:,} files renamed (journal), "
        f"{commit.units:,} units begun, {commit.units_in_doubt:,} in doubt, {commit.runs} run(s)"
    )
