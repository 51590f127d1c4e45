"""``status``: what is in flight under ``DEST/_temporary``, what ``commit`` or ``abort`` would do, the last
``_SUCCESS``, and for a destination of the transactional protocol its data files by what the records make of them.

A job attempt whose ``protocol`` file says ``upload`` is an ``upload`` job (S3: its records, and the job's
incomplete uploads found as its abort finds them); one with a ``markers/`` directory (or whose
``_started_<tid>``/``_committed_<tid>`` is in the destination) is a ``transactional`` job; any other is a
``manifest`` job. ``commands.py`` picks the committer
for ``commit`` and ``abort`` by the same rule (``AttemptStatus.protocol``).

Read only: every store call is a read (info, list, read), through a stage's gate like any other, and nothing
local is removed either (spill files of killed processes are only reported). Manifests, journal records,
markers and ``_SUCCESS`` are untrusted documents: one that does not parse is reported with the reason, never
fatal, since a damaged job is exactly what an on-call person runs ``status`` for.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from .._json import load_json_document
from ..config import CommitterConfig
from ..entry_file import find_spill_files
from ..errors import CommitterError, JobStateError
from ..formatting import format_bytes
from ..iostatistics import StatisticsStore
from ..manifest import MANIFEST_SUFFIX, TaskManifest
from ..markers import MarkerPaths, job_liveness, read_markers
from ..paths import TEMPORARY_DIR, TRASH_DIR, JobPaths
from ..protocols.transactional.readers import count_files
from ..protocols.transactional.records import COMMITTED_PREFIX, STARTED_PREFIX, TransactionPaths
from ..protocols.upload.records import PENDING_SUFFIX, UploadPaths
from ..stages.base import Stage, StageContext
from ..stages.journal import committed_summary, count_runs, read_commit_record
from ..stages.upload.state import find_job_uploads, list_if_present, recorded_attempts
from ..statistic_names import COMMITTER_BYTES_COMMITTED, COMMITTER_FILES_COMMITTED, OP_LOAD_FILE, OP_LOAD_MANIFEST
from ..store import StoreOperations
from ..success_data import SuccessData

log = logging.getLogger(__name__)

STATUS_SCHEMA = "manifest-committer/status/1"
"""The ``schema`` field of ``status --json``: fields are only ever added under this name."""
STATUS = "status"
MANIFEST = "manifest"
TRANSACTIONAL = "transactional"
UPLOAD = "upload"
_ATTEMPT_DIR = re.compile(r"[0-9]{2}\Z")
_UNIT_RECORD = re.compile(r"(?P<key>.+)\.(?P<kind>intent|done)\Z")


@dataclass(frozen=True, slots=True)
class ManifestStatus:
    """One committed task manifest, from the file itself."""

    url: str
    task_id: str | None = None
    task_attempt_id: str | None = None
    files: int = 0
    bytes: int = 0
    error: str | None = None
    """Why the manifest cannot be used (a job commit would refuse to start)."""


@dataclass(frozen=True, slots=True)
class MarkerStatus:
    """The write markers of a job attempt (transactional and upload protocols) and whether its driver lives."""

    markers: int = 0
    batched: bool = False
    direct: int = 0
    driver_alive: bool | None = None
    liveness: str = ""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class UploadStatus:
    """The multipart uploads of an upload job attempt: the closed files its task attempts recorded, and the job's
    incomplete uploads as its abort finds them (the markers of every attempt of the job and one listing of the
    destination's uploads: ``stages/upload_state.find_job_uploads``)."""

    records: int = 0
    """``.pending`` records of this job attempt: files closed by a task attempt (empty files included)."""
    incomplete: int = 0
    """Incomplete uploads of the job: what ``abort`` would abort (or a commit complete or abort)."""
    left: int = 0
    """Incomplete uploads at keys another job in flight marks too, named by no record of this job: abort leaves
    them (they may be the other job's)."""
    error: str | None = None
    """Why the uploads could not be found (unreadable markers, a failed listing)."""


@dataclass(frozen=True, slots=True)
class TransactionStatus:
    """The records of a transactional job attempt's transaction in the destination."""

    tid: str
    started: bool
    """``_started_<tid>`` is in place (set-up ran; abort deletes it)."""
    committed: bool
    """``_committed_<tid>`` is in place: the commit point has passed and readers see the job's files."""
    record: str
    """URL of ``_committed_<tid>``, there or not."""


@dataclass(frozen=True, slots=True)
class CommitProgress:
    """A job commit that began (``commit-started``), and how far its renames got, as its journal shows."""

    accepted: dict[str, str]
    """Task id -> the attempt the commit accepted."""
    files: int
    """Files of the accepted manifests."""
    files_renamed: int
    """Files the journal records as moved into the destination."""
    units: int
    """Units of renames begun (``unit_size`` files each)."""
    units_in_doubt: int
    """Units whose run died before recording how far it got: settled from evidence on rerun or abort."""
    runs: int
    """Runs of the job commit begun (1: the first; more: reruns)."""
    finished: bool
    """The commit point has passed (``commit-finished`` or this job's ``_SUCCESS``): only cleanup is left."""


@dataclass(frozen=True, slots=True)
class AttemptStatus:
    """One job attempt directory ``_temporary/<jobId>/<NN>``."""

    attempt: int
    url: str
    protocol: str = MANIFEST
    """``transactional`` (markers or transaction records) or ``manifest``: the committer commit and abort use."""
    transaction: TransactionStatus | None = None
    task_attempts: list[str] = field(default_factory=list)
    manifests: list[ManifestStatus] = field(default_factory=list)
    manifest_files: int = 0
    manifest_bytes: int = 0
    markers: MarkerStatus | None = None
    commit: CommitProgress | None = None
    uploads: UploadStatus | None = None
    """Upload jobs only: their records and incomplete uploads."""
    would_commit: str = ""
    would_abort: str = ""


@dataclass(frozen=True, slots=True)
class JobStatus:
    job_id: str
    attempts: list[AttemptStatus] = field(default_factory=list)
    other_entries: list[str] = field(default_factory=list)
    """Entries of the job directory that are not job attempts (another committer's layout)."""


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


class _Reads(Stage[None, None]):
    """A gate for the reads of ``status``: timed, retried and counted as every stage's calls are."""

    name = STATUS

    def execute(self, arguments: None) -> None:
        raise JobStateError("the status gate is not a step to run")

    def try_read(self, path: str, statistic: str = OP_LOAD_FILE) -> bytes | None:
        try:
            return self.read_bytes(path, statistic)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def names(self, path: str) -> list[tuple[str, bool]]:
        """Entries of a directory as (name, is_dir), sorted; none if it is missing."""
        try:
            listing = self.list_dir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted((posixpath.basename(status.path.rstrip("/")), status.is_dir) for status in listing)


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
    top = _gate(store, config, JobPaths(dest, "-"))
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
    jobs = []
    trash: list[str] = []
    for job_id, is_dir in top.names(posixpath.join(dest, TEMPORARY_DIR)):
        if job_id == TRASH_DIR:
            trash = sorted(name for name, _ in top.names(posixpath.join(dest, TEMPORARY_DIR, TRASH_DIR)))
        elif is_dir:
            jobs.append(_inspect_job(store, config, dest, job_id))
    spill = [
        SpillFileStatus(found.path, found.job_id, found.pid, found.size)
        for found in find_spill_files(spill_directory)
        if not found.alive
    ]
    files = None
    if count_data_files and _transactional_was_here(top, jobs):
        files = _count_data_files(top)
    return DestinationStatus(store.to_url(dest), jobs, _last_success(top), spill, trash, files)


def _transactional_was_here(reads: _Reads, jobs: list[JobStatus]) -> bool:
    if any(attempt.protocol == TRANSACTIONAL for job in jobs for attempt in job.attempts):
        return True
    return any(
        not is_dir and name.startswith((COMMITTED_PREFIX, STARTED_PREFIX))
        for name, is_dir in reads.names(reads.paths.dest)
    )


def _count_data_files(reads: _Reads) -> DataFiles:
    try:
        counts = count_files(reads.context.store, reads.paths.dest, reads.context.store_retry)
    except (CommitterError, OSError) as error:
        return DataFiles(error=str(error))
    return DataFiles(counts.committed, counts.without_tid, counts.uncommitted, counts.removed, counts.records)


def _gate(store: StoreOperations, config: CommitterConfig, paths: JobPaths) -> _Reads:
    return _Reads(StageContext(config=config, store=store, paths=paths, stats=StatisticsStore()))


def _inspect_job(store: StoreOperations, config: CommitterConfig, dest: str, job_id: str) -> JobStatus:
    job = JobStatus(job_id)
    reads = _gate(store, config, JobPaths(dest, job_id))
    for name, is_dir in reads.names(reads.paths.job_dir):
        if is_dir and _ATTEMPT_DIR.match(name):
            job.attempts.append(_inspect_attempt(_gate(store, config, JobPaths(dest, job_id, int(name)))))
        else:
            job.other_entries.append(name + ("/" if is_dir else ""))
    return job


def _inspect_attempt(reads: _Reads) -> AttemptStatus:
    paths = reads.paths
    task_attempts = [name for name, is_dir in reads.names(paths.task_attempts_dir) if is_dir]
    manifests = [
        _inspect_manifest(reads, posixpath.join(paths.manifest_dir, name))
        for name, is_dir in reads.names(paths.manifest_dir)
        if name.endswith(MANIFEST_SUFFIX)
    ]
    markers = _inspect_markers(reads)
    upload = reads.info(UploadPaths(paths).protocol_file) is not None
    transaction = _inspect_transaction(reads)
    transactional = not upload and (markers is not None or transaction.started or transaction.committed)
    commit = _inspect_commit(reads, manifests)
    uploads = None
    if upload:
        task_attempts = recorded_attempts(reads, UploadPaths(paths))
        uploads = _inspect_uploads(reads, task_attempts)
        would_commit, would_abort = _what_an_upload_job_would_do(manifests, markers, commit, uploads)
    elif transactional:
        would_commit, would_abort = _what_a_transactional_job_would_do(task_attempts, manifests, markers, transaction)
    else:
        would_commit, would_abort = _what_would_happen(reads, task_attempts, manifests, commit)
    return AttemptStatus(
        attempt=paths.job_attempt,
        url=reads.to_url(paths.job_attempt_dir),
        protocol=UPLOAD if upload else TRANSACTIONAL if transactional else MANIFEST,
        transaction=transaction if transactional else None,
        task_attempts=task_attempts,
        manifests=manifests,
        manifest_files=sum(m.files for m in manifests),
        manifest_bytes=sum(m.bytes for m in manifests),
        markers=markers,
        commit=commit,
        uploads=uploads,
        would_commit=would_commit,
        would_abort=would_abort,
    )


def _inspect_manifest(reads: _Reads, path: str) -> ManifestStatus:
    url = reads.to_url(path)
    try:
        data = reads.read_bytes(path, OP_LOAD_MANIFEST)
        manifest = TaskManifest.from_json(data, url)
    except (CommitterError, OSError, ValueError) as error:
        return ManifestStatus(url, error=str(error))
    return ManifestStatus(url, manifest.task_id, manifest.task_attempt_id, len(manifest.files), manifest.total_size)


def _inspect_markers(reads: _Reads) -> MarkerStatus | None:
    marker_paths = MarkerPaths(reads.paths)
    if reads.info(marker_paths.markers_dir) is None:
        return None
    store, retry = reads.context.store, reads.context.store_retry
    try:
        found = read_markers(store, marker_paths, retry)
    except (CommitterError, OSError) as error:
        return MarkerStatus(error=str(error))
    try:
        liveness = job_liveness(store, marker_paths, retry, expiry_seconds=reads.config.heartbeat_expiry_seconds)
    except (CommitterError, OSError) as error:
        return MarkerStatus(len(found.markers), found.batched, found.direct_count, error=str(error))
    return MarkerStatus(len(found.markers), found.batched, found.direct_count, not liveness.dead, liveness.reason)


def _inspect_uploads(reads: _Reads, attempts: list[str]) -> UploadStatus:
    """The attempt's records (one listing per task attempt) and the job's incomplete uploads (as abort finds
    them: the same function, so status and abort cannot disagree)."""
    layout = UploadPaths(reads.paths)
    records = sum(
        1
        for attempt in attempts
        for status in list_if_present(reads, layout.attempt_pending_dir(attempt))
        if not status.is_dir and status.path.endswith(PENDING_SUFFIX)
    )
    try:
        found = find_job_uploads(reads, set())
    except (CommitterError, OSError) as error:
        return UploadStatus(records, error=str(error))
    return UploadStatus(records, len(found.targets), len(found.left))


def _inspect_transaction(reads: _Reads) -> TransactionStatus:
    transaction = TransactionPaths(reads.paths)
    started, committed = reads.info(transaction.started), reads.info(transaction.committed)
    return TransactionStatus(
        transaction.tid,
        started is not None and not started.is_dir,
        committed is not None and not committed.is_dir,
        reads.to_url(transaction.committed),
    )


def _inspect_commit(reads: _Reads, manifests: list[ManifestStatus]) -> CommitProgress | None:
    record = read_commit_record(reads)
    finished = committed_summary(reads) is not None
    if record is None:
        return CommitProgress({}, 0, 0, 0, 0, 0, finished) if finished else None
    files = sum(
        m.files for m in manifests if m.task_id is not None and record.accepted.get(m.task_id) == m.task_attempt_id
    )
    renamed, begun, in_doubt = _journal_progress(reads)
    return CommitProgress(record.accepted, files, renamed, begun, in_doubt, count_runs(reads), finished)


def _journal_progress(reads: _Reads) -> tuple[int, int, int]:
    """(files recorded as moved, units begun, units in doubt) from every run's unit records."""
    moved: dict[str, int] = {}
    begun: set[str] = set()
    for run, is_dir in reads.names(reads.paths.journal_dir):
        if not is_dir:
            continue
        for name, _ in reads.names(posixpath.join(reads.paths.journal_dir, run)):
            match = _UNIT_RECORD.match(name)
            if match is None:
                continue
            key = match.group("key")
            begun.add(key)
            if match.group("kind") == "done":
                moved[key] = max(moved.get(key, 0), _up_to(reads, posixpath.join(reads.paths.journal_dir, run, name)))
    return sum(moved.values()), len(begun), len(begun - moved.keys())


def _up_to(reads: _Reads, path: str) -> int:
    data = reads.try_read(path)
    try:
        document = load_json_document(data or b"", reads.to_url(path))
        up_to, also_ours = document["upTo"], document.get("alsoOurs", [])
    except (CommitterError, KeyError, TypeError, AttributeError):
        return 0  # torn: counts as missing, as in the journal itself
    if not isinstance(up_to, int) or isinstance(up_to, bool) or up_to < 0:
        return 0
    return up_to + (len(also_ours) if isinstance(also_ours, list) else 0)


def _what_would_happen(
    reads: _Reads,
    task_attempts: list[str],
    manifests: list[ManifestStatus],
    commit: CommitProgress | None,
) -> tuple[str, str]:
    state = f"delete the job's state ({len(task_attempts)} task attempt directories, {len(manifests)} manifests)"
    if commit is not None and commit.finished:
        return (
            "finish the cleanup only: the commit point has passed and the output is in place",
            "keep the output (the job is committed) and delete the job's state under _temporary",
        )
    if commit is not None:
        doubt = f", {commit.units_in_doubt} units in doubt (settled from evidence)" if commit.units_in_doubt else ""
        return (
            f"resume the interrupted job commit of {len(commit.accepted)} task attempts: "
            f"{commit.files_renamed:,} of {commit.files:,} files renamed so far per the journal{doubt}",
            f"revert the {commit.files_renamed:,} files this commit renamed (and any in doubt it moved), remove the "
            "directories it created, put back an earlier _SUCCESS it moved aside, then "
            + state
            + " (abort --dry-run lists them)",
        )
    broken = [m for m in manifests if m.error is not None]
    if broken:
        return (
            f"refuse, changing nothing in the destination: {broken[0].error}",
            state + "; the destination is untouched",
        )
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"commit {len(manifests)} task manifests: {files:,} files, {size:,} bytes",
        state + "; the destination is untouched",
    )


def _what_a_transactional_job_would_do(
    task_attempts: list[str],
    manifests: list[ManifestStatus],
    markers: MarkerStatus | None,
    transaction: TransactionStatus,
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do with ``TransactionalCommitter`` (``operate/commands.py``)."""
    state = f"delete the job's state ({len(task_attempts)} task attempt directories, {len(manifests)} manifests)"
    if transaction.committed:
        return (
            f"finish _SUCCESS and the cleanup only: _committed_{transaction.tid} is in place (the job is committed)",
            f"keep the output (the job is committed) and {state}",
        )
    count = "an unknown number of" if markers is None or markers.error is not None else f"{markers.markers:,}"
    alive = ""
    if markers is not None and markers.driver_alive:
        alive = f"; its driver looks alive ({markers.liveness}): the job may still be running"
    abort = (
        f"delete the data files its {count} write markers name (abort --dry-run lists them), "
        f"_started_{transaction.tid}, then {state}{alive}"
    )
    broken = [m for m in manifests if m.error is not None]
    if broken:
        return f"refuse, changing nothing in the destination: {broken[0].error}", abort
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"write _committed_{transaction.tid} for {len(manifests)} task manifests ({files:,} files, {size:,} bytes; "
        f"no file moves) after deleting the files of other attempts that its markers name{alive}",
        abort,
    )


def _what_an_upload_job_would_do(
    manifests: list[ManifestStatus],
    markers: MarkerStatus | None,
    commit: CommitProgress | None,
    uploads: UploadStatus,
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do with ``UploadCommitter`` (``operate/commands.py``)."""
    if uploads.error is not None:
        pending = "every incomplete upload of the job (unknown now: " + uploads.error + ")"
    else:
        pending = f"the job's {uploads.incomplete:,} incomplete uploads"
    left = ""
    if uploads.left:
        left = f"; {uploads.left:,} more at keys another job in flight also marks are left to that job"
    alive = ""
    if markers is not None and markers.driver_alive:
        alive = f"; its driver looks alive ({markers.liveness}): the job may still be running"
    state = "delete the job's state under _temporary"
    if commit is not None and commit.finished:
        return (
            f"finish the cleanup only: the commit point has passed; abort {pending}{left}, {state}",
            f"keep the output (the job is committed), abort {pending}{left}, {state}",
        )
    if commit is not None:
        return (
            f"resume the interrupted job commit of {len(commit.accepted)} task attempts ({commit.files:,} files): "
            "complete the rest of their uploads with If-None-Match: * (no data copied), write _SUCCESS, abort the "
            f"job's other incomplete uploads{left}, {state}{alive}",
            "delete the objects the interrupted commit completed (each proved this job's by its token and ETag; "
            f"abort --dry-run lists them), abort {pending}{left}, {state}{alive}",
        )
    abort = f"abort {pending}{left}, {state}; the destination is untouched (nothing was visible){alive}"
    broken = [m for m in manifests if m.error is not None]
    if broken:
        return f"refuse, changing nothing in the destination: {broken[0].error}", abort
    tasks = len({m.task_id for m in manifests})
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"complete the uploads of {len(manifests)} task manifests of {tasks} tasks (one attempt per task; "
        f"{files:,} files, {size:,} bytes in all manifests) with If-None-Match: *, no data copied, write _SUCCESS, "
        f"then abort the job's other incomplete uploads{left}{alive}",
        abort,
    )


def _last_success(reads: _Reads) -> LastSuccess | None:
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
                lines.append(f"    Job commit:      {_commit_line(attempt.commit, upload=attempt.uploads is not None)}")
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


def _commit_line(commit: CommitProgress | None, *, upload: bool = False) -> str:
    if commit is None:
        return "not started"
    if commit.finished:
        return "finished (commit point passed; cleanup not complete)"
    if upload:
        return (
            f"started, interrupted or running: {commit.files:,} files of {len(commit.accepted):,} task attempts to "
            f"complete, {commit.runs} run(s)"
        )
    return (
        f"started, interrupted or running: {commit.files_renamed:,} of {commit.files:,} files renamed (journal), "
        f"{commit.units:,} units begun, {commit.units_in_doubt:,} in doubt, {commit.runs} run(s)"
    )
