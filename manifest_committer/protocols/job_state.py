"""What a job attempt's state on the store says, as the tools show it; and what each protocol offers the tools.

``status`` describes every job attempt under a destination's ``_temporary``, and ``commit`` / ``abort`` report
what they changed. Which protocol a job attempt is of, how to describe its state, and how to report a commit or
an abort are each protocol's own (``JobOperations``, implemented in ``protocols/<name>/operations.py`` and listed
by ``registry.OPERATIONS``); the tools in ``operate/`` only dispatch. The dataclasses here are the model of
``status --json`` (``schemas/status.schema.json``).

Manifests, journal records, markers and ``_SUCCESS`` are untrusted documents: one that does not parse is
described with the reason, never fatal, since a damaged job is exactly what an on-call person looks at.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .._json import load_json_document
from ..errors import CommitterError
from ..manifest import MANIFEST_SUFFIX, TaskManifest
from ..markers import MarkerPaths, job_liveness, read_markers
from ..stages.journal import committed_summary, count_runs, read_commit_record
from ..stages.reads import StateReads
from ..statistic_names import OP_LOAD_MANIFEST
from ..success_data import SuccessData
from .names import ProtocolName

if TYPE_CHECKING:
    from .base import CommitterBase

log = logging.getLogger(__name__)

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
    destination's uploads: ``stages/upload/state.find_job_uploads``)."""

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
    """One job attempt: ``_temporary/<jobId>/<NN>`` (``_temporary/<NN>`` for ``v1`` and ``v2``)."""

    attempt: int
    url: str
    protocol: str = ProtocolName.MANIFEST
    """The protocol whose committer ``commit`` and ``abort`` use, recognised from the attempt's state."""
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
class CommitReport:
    """What a protocol's ``commit`` says it did, for the command's report."""

    success: SuccessData
    already: bool
    """The commit point had passed before: only the cleanup ran."""
    resumed: bool
    """An interrupted job commit was finished."""
    lines: list[str]
    """What this protocol adds between the head line and the common figures."""
    success_written: bool
    state_left: bool
    details: str = ""
    """Said after the count of files committed (files already in place, renames recovered)."""


@dataclass(frozen=True, slots=True)
class RollbackVerdict:
    """What ``rollback`` makes of a job attempt: whether it can undo it at all, and if so why it should now."""

    applies: bool
    """The attempt's protocol keeps what rollback undoes (write markers): transactional and upload jobs."""
    reason: str | None = None
    """Why the job is to be rolled back (its driver is gone, or the caller named it); ``None``: leave it (it is
    committed, alive, or ``held``)."""
    held: str | None = None
    """Why a job whose lease has expired is left all the same, for the report: it is in its commit."""


NOT_ROLLED_BACK = RollbackVerdict(applies=False)
"""The verdict of the protocols rollback does not undo (abort their jobs instead)."""


class JobOperations(Protocol):
    """What the tools need of one protocol beyond its committer: recognise, describe, report."""

    @property
    def protocols(self) -> tuple[ProtocolName, ...]:
        """The protocols these operations serve (``v1`` and ``v2`` share theirs)."""
        ...

    def recognises(self, reads: StateReads) -> ProtocolName | None:
        """This protocol's name if the job attempt at ``reads.paths`` is of it (one of ``protocols``), else
        ``None``; asked in the registry's order, the default protocol last."""
        ...

    def jobs_of_own_layout(self, reads: StateReads) -> list[JobStatus]:
        """The jobs kept in a layout without a job id under ``_temporary`` (Hadoop's v1/v2); ``[]`` elsewhere."""
        ...

    def inspect(self, reads: StateReads, protocol: ProtocolName) -> AttemptStatus:
        """The job attempt at ``reads.paths``: what it holds, and what ``commit`` and ``abort`` would do."""
        ...

    def commit(
        self, committer: CommitterBase, before: AttemptStatus | None, progress: Callable[[int, int], None] | None
    ) -> CommitReport:
        """Run (or rerun) the job commit with ``committer``; ``before`` is the attempt as ``status`` saw it
        (``None``: no state left, the job committed)."""
        ...

    def abort(self, committer: CommitterBase, before: AttemptStatus, *, dry_run: bool) -> list[str]:
        """Abort the job attempt (or, with ``dry_run``, say what an abort would do): the report's lines."""
        ...

    def judge_for_rollback(self, reads: StateReads, *, named: bool) -> RollbackVerdict:
        """Whether ``rollback`` undoes the job attempt at ``reads.paths``, and why: its protocol's own evidence
        that it is committed, then (unless the caller ``named`` it) the liveness of its driver."""
        ...


# --- what several protocols describe alike ------------------------------------------------------------------------


def inspect_manifests(reads: StateReads) -> list[ManifestStatus]:
    """Every committed task manifest of the job attempt, each read and checked."""
    paths = reads.paths
    return [
        _inspect_manifest(reads, posixpath.join(paths.manifest_dir, name))
        for name, _ in reads.names(paths.manifest_dir)
        if name.endswith(MANIFEST_SUFFIX)
    ]


def _inspect_manifest(reads: StateReads, path: str) -> ManifestStatus:
    url = reads.to_url(path)
    try:
        data = reads.read_bytes(path, OP_LOAD_MANIFEST)
        manifest = TaskManifest.from_json(data, url)
    except (CommitterError, OSError, ValueError) as error:
        return ManifestStatus(url, error=str(error))
    return ManifestStatus(url, manifest.task_id, manifest.task_attempt_id, len(manifest.files), manifest.total_size)


def task_attempt_directories(reads: StateReads) -> list[str]:
    return [name for name, is_dir in reads.names(reads.paths.task_attempts_dir) if is_dir]


def inspect_markers(reads: StateReads) -> MarkerStatus | None:
    """The job attempt's write markers and its driver's liveness; ``None`` if it has no ``markers/``."""
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


def inspect_commit(reads: StateReads, manifests: list[ManifestStatus]) -> CommitProgress | None:
    """The job commit's progress from its journal (manifest and upload protocols); ``None`` if none began."""
    record = read_commit_record(reads)
    finished = committed_summary(reads) is not None
    if record is None:
        return CommitProgress({}, 0, 0, 0, 0, 0, finished) if finished else None
    files = sum(
        m.files for m in manifests if m.task_id is not None and record.accepted.get(m.task_id) == m.task_attempt_id
    )
    renamed, begun, in_doubt = _journal_progress(reads)
    return CommitProgress(record.accepted, files, renamed, begun, in_doubt, count_runs(reads), finished)


def _journal_progress(reads: StateReads) -> tuple[int, int, int]:
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


def _up_to(reads: StateReads, path: str) -> int:
    data = reads.try_read(path)
    try:
        document = load_json_document(data or b"", reads.to_url(path))
        up_to, also_ours = document["upTo"], document.get("alsoOurs", [])
    except (CommitterError, KeyError, TypeError, AttributeError):
        return 0  # torn: counts as missing, as in the journal itself
    if not isinstance(up_to, int) or isinstance(up_to, bool) or up_to < 0:
        return 0
    return up_to + (len(also_ours) if isinstance(also_ours, list) else 0)


def unusable(manifests: list[ManifestStatus]) -> str | None:
    """Why a job commit would refuse to start (the first unusable manifest), or ``None``."""
    broken = [m for m in manifests if m.error is not None]
    return broken[0].error if broken else None


def judge_by_markers(reads: StateReads, committed_path: str, *, named: bool) -> RollbackVerdict:
    """The verdict of a job attempt that keeps write markers: leave it once ``committed_path`` (its commit point's
    record) is in place; else roll it back if the caller ``named`` it or its driver is gone (its lease expired and
    its marker server does not answer), unless it began its commit: then it is ``held`` (``in_its_commit``)."""
    if reads.info(committed_path) is not None:
        log.info("rollback: job %s is committed (%s); leaving it", reads.paths.job_id, reads.to_url(committed_path))
        return RollbackVerdict(applies=True)
    if named:
        return RollbackVerdict(applies=True, reason="named by the caller")
    store, retry = reads.context.store, reads.context.store_retry
    liveness = job_liveness(
        store, MarkerPaths(reads.paths), retry, expiry_seconds=reads.config.heartbeat_expiry_seconds
    )
    if not liveness.dead:
        log.info("rollback: job %s is alive (%s); leaving it", reads.paths.job_id, liveness.reason)
        return RollbackVerdict(applies=True)
    started = reads.paths.commit_started_path
    if reads.info(started) is not None:
        held = in_its_commit(reads, liveness.reason)
        log.warning("rollback: job %s attempt %02d left: %s", reads.paths.job_id, reads.paths.job_attempt, held)
        return RollbackVerdict(applies=True, held=held)
    return RollbackVerdict(applies=True, reason=liveness.reason)


def in_its_commit(reads: StateReads, liveness: str) -> str:
    """Why ``rollback`` leaves a job that began its commit (``commit-started``) and whose lease has expired: a
    driver paused in its commit (a long collection, a stopped process) looks the same as a dead one, and one that
    wakes up after its files were deleted would commit what is gone. Whether to finish or undo it is the
    operator's to say, by name."""
    paths = reads.paths
    job = f"{reads.to_url(paths.dest)} --job {paths.job_id}"
    return (
        f"in its commit ({reads.to_url(paths.commit_started_path)} is in place; {liveness}): an expired lease "
        f"alone does not make a committing job dead. Finish it with `manifest-committer commit {job}`, or undo it "
        f"with `manifest-committer abort {job}` once its driver is known to be gone"
    )


def driver_warning(markers: MarkerStatus | None) -> str:
    """A job whose driver still answers may be running: acting on it is the caller's call (docs/markers.md)."""
    if markers is None or not markers.driver_alive:
        return ""
    return f"the job's driver looks alive ({markers.liveness}); it may still be running"


def describe_attempt(
    reads: StateReads,
    protocol: ProtocolName,
    url_path: str,
    *,
    task_attempts: list[str],
    manifests: list[ManifestStatus],
    would: tuple[str, str],
    markers: MarkerStatus | None = None,
    commit: CommitProgress | None = None,
    transaction: TransactionStatus | None = None,
    uploads: UploadStatus | None = None,
) -> AttemptStatus:
    """The ``AttemptStatus`` of the job attempt at ``reads.paths`` (its directory ``url_path``), with the totals of
    its manifests; ``would`` is what (commit, abort) would do."""
    return AttemptStatus(
        attempt=reads.paths.job_attempt,
        url=reads.to_url(url_path),
        protocol=protocol,
        transaction=transaction,
        task_attempts=task_attempts,
        manifests=manifests,
        manifest_files=sum(m.files for m in manifests),
        manifest_bytes=sum(m.bytes for m in manifests),
        markers=markers,
        commit=commit,
        uploads=uploads,
        would_commit=would[0],
        would_abort=would[1],
    )


def was_committed(before: AttemptStatus | None) -> bool:
    """The job had passed its commit point before the command: no state left, or its journal says so."""
    return before is None or (before.commit is not None and before.commit.finished)


def commit_report(
    committer: CommitterBase,
    success: SuccessData,
    before: AttemptStatus | None,
    *,
    already: bool,
    lines: list[str] | None = None,
    details: str = "",
) -> CommitReport:
    """The ``CommitReport`` of a commit ``committer`` ran on the attempt ``before`` (as ``status`` saw it):
    resumed where a job commit had begun, and whether ``_SUCCESS`` and the job's state are there now."""
    store, paths = committer.store, committer.paths
    return CommitReport(
        success=success,
        already=already,
        resumed=not already and before is not None and before.commit is not None,
        lines=lines or [],
        success_written=store.info(paths.success_path) is not None,
        state_left=store.info(paths.job_dir) is not None,
        details=details,
    )


def state_left(committer: CommitterBase) -> bool:
    """Whether the job's state is still under ``_temporary`` after a command."""
    return committer.store.info(committer.paths.job_dir) is not None


SHOWN = 50
"""Paths a report lists before ``... and N more``."""


def listed(urls: list[str] | tuple[str, ...], indent: str = "    ") -> list[str]:
    """``urls`` as report lines, at most ``SHOWN`` of them, then how many more."""
    lines = [f"{indent}{url}" for url in urls[:SHOWN]]
    if len(urls) > SHOWN:
        lines.append(f"{indent}... and {len(urls) - SHOWN:,} more")
    return lines
