"""The job commit's write-ahead journal: the one place that decides whether a destination file is this job's.

A file of the right size at a destination proves nothing (a user's file may have that size), so ownership is
decided from what the job itself recorded, under ``JobPaths.journal_dir``, before and after each change:

``commit-started`` (beside the journal)
    What the commit accepted (task id -> attempt id) and the unit size, written before the destination first
    changes. A rerun commits exactly that set; an abort reverts exactly that set.
``run-<n>``
    Rerun ``n`` (1, 2, ...) of the job commit began; run 0 is the one that wrote ``commit-started``.
``dirs-<n>.json``
    Before run ``n`` touches the destination's directories: the directories it is about to create (abort
    removes those, if empty, and no others) and the files in the way it is about to delete.
``<n>/<taskAttemptId>-<start>.intent`` and ``.done``
    Before run ``n`` renames the first row of a unit (``unit_size`` consecutive rows, manifests taken in task
    attempt id order; the name is the unit's first row), its intent; after the unit, or in a ``finally``
    when it fails part-way, ``{"upTo": k, "notMovable": b}``:
    rows below ``k`` are this job's; row ``k``, where the unit stopped, was certainly not moved
    (``notMovable``) or may have been (its rename failed in a way that does not say). A unit whose renames were
    in flight together (``concurrent_calls``) may have moved rows after ``k`` as well: ``alsoOurs`` lists those,
    ``alsoInDoubt`` those whose rename failed in a way that does not say; rows after ``k`` in neither list were
    certainly not moved.

A row is this job's when a ``done`` record puts it below ``upTo``; when it is *in doubt* (an intent without its
``done``: the process died mid-unit; or the row a unit stopped at, not known unmovable) it is this job's only if
its source is gone and the destination holds a file of its size (the store's rename never overwrites, so only
this job's rename can have put it there), or, on a copy-then-delete store, if both are there and their checksums
prove the destination a copy of the source. A destination holding what a failed server-side copy of the row's
source left (``StoreOperations.is_failed_copy``) is this job's leftover, never a file of use: a rerun deletes it
and renames again, an abort deletes it. Every other row is not this job's: a missing source is an error,
never "already committed", and a file at its destination is a conflict.

Residual assumption: between a rename's failure and the ``done`` record that says why, a kill leaves the row in
doubt; if in that instant its source had vanished (someone deleted the task attempt directory) while an
unrelated file of the same size sat at its destination, that file would be taken for this job's. Records are
written once and never rewritten (a rerun writes under its own run number), so a torn record is only ever the
last one: an unreadable ``done`` counts as missing, which puts its rows in doubt, never in ownership.

Memory stays bounded: a unit's history is read when the unit is processed, two small reads per earlier run.
"""

from __future__ import annotations

import enum
import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._json import dump_json, load_json_document
from ..entry_file import FileToCommit, RenameUnit
from ..errors import JobStateError, ManifestError
from ..parallel import Outcome, run_together
from ..statistic_names import OP_LOAD_FILE
from ..store import FileStatus
from ..success_data import SuccessData
from .base import Stage

log = logging.getLogger(__name__)

COMMIT_RECORD_TYPE = "manifest-committer/commit-started/1"

Gate = Stage[Any, Any]


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """The content of ``commit-started``: what a job commit accepted, and how it cut its renames into units."""

    job_id: str
    accepted: dict[str, str]
    """Task id -> the task attempt id whose manifest was committed."""
    unit_size: int

    def to_json(self) -> bytes:
        return dump_json(
            {"type": COMMIT_RECORD_TYPE, "jobId": self.job_id, "accepted": self.accepted, "unitSize": self.unit_size}
        )

    @classmethod
    def from_json(cls, data: bytes, origin: str) -> CommitRecord:
        document = load_json_document(data, origin)
        if not isinstance(document, dict) or document.get("type") != COMMIT_RECORD_TYPE:
            raise ManifestError(f"{origin}: not a commit-started record of this committer")
        job_id, accepted, unit_size = document.get("jobId"), document.get("accepted"), document.get("unitSize")
        if (
            not isinstance(job_id, str)
            or not isinstance(accepted, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in accepted.items())
            or not isinstance(unit_size, int)
            or isinstance(unit_size, bool)
            or unit_size < 1
        ):
            raise ManifestError(f"{origin}: commit-started record with a missing or malformed field")
        return cls(job_id, dict(accepted), unit_size)


def read_commit_record(gate: Gate) -> CommitRecord | None:
    """The job's ``commit-started`` record; ``None`` if absent or torn (then the commit had changed nothing)."""
    path = gate.paths.commit_started_path
    return _commit_record(gate, path, _read_if_present(gate, path))


def _commit_record(gate: Gate, path: str, data: bytes | None) -> CommitRecord | None:
    if data is None:
        return None
    try:
        record = CommitRecord.from_json(data, gate.to_url(path))
    except ManifestError as error:
        # Written before the destination first changes: a torn one means the commit changed nothing.
        log.warning("Ignoring an unreadable commit-started record (the commit had changed nothing): %s", error)
        return None
    if record.job_id != gate.paths.job_id:
        raise ManifestError(f"{gate.to_url(path)}: commit-started record of job {record.job_id!r}")
    return record


def write_commit_record(gate: Gate, record: CommitRecord) -> None:
    gate.write_bytes(gate.paths.commit_started_path, record.to_json())


def check_not_rolled_back(gate: Gate, witness: str | None = None) -> None:
    """The commit's side of the rollback fence, run once ``commit-started`` is in place and before anything is
    deleted or published: a ``rolled-back`` record means another process judged this job dead (its driver paused
    past its lease) and is undoing it, or has. ``witness``, a file the commit would publish, is checked after the
    record: a rollback that already deleted its state (the record with it) deleted the job's files first."""
    paths = gate.paths
    gone = gate.info(paths.rolled_back_path) is not None
    if not gone and witness is not None:
        gone = gate.info(witness) is None
    if gone:
        job = f"{gate.to_url(paths.dest)} --job {paths.job_id}"
        raise JobStateError(
            f"{gate.to_url(paths.job_attempt_dir)}: job {paths.job_id} was rolled back by another process while "
            f"this driver was paused (its lease expired before its commit began); nothing is published. "
            f"`manifest-committer abort {job}` settles it"
        )


def check_accepted(gate: Gate, record: CommitRecord, accepted: Mapping[str, str] | None) -> None:
    """A rerun commits what the first run accepted; a caller that now accepts other attempts is told so."""
    if accepted is not None and dict(accepted) != record.accepted:
        raise JobStateError(
            f"{gate.to_url(gate.paths.commit_started_path)}: job {gate.paths.job_id} already began committing "
            f"attempts {_describe(record.accepted)}; this call accepts {_describe(accepted)}. A job commit is "
            "finished with the attempts it began with (or aborted)"
        )


def _describe(accepted: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{task}: {attempt}" for task, attempt in sorted(accepted.items())) + "}"


def committed_summary(gate: Gate) -> SuccessData | None:
    """This job's summary if its commit point has passed, else ``None``.

    The commit point is this job's ``_SUCCESS`` in place or, with ``marksuccessfuljobs=false``, its
    ``commit-finished`` record (which holds the same summary). A torn record is no record: it is written after
    every file is in place, so without it the commit is simply not finished yet.
    """
    for path in (gate.paths.commit_finished_path, gate.paths.success_path):
        data = _read_if_present(gate, path)
        success = None if data is None else this_jobs_summary(gate, data, path)
        if success is not None:
            return success
    return None


@dataclass(frozen=True, slots=True)
class JobRecords:
    """What a job commit finds of its earlier runs."""

    finished: SuccessData | None
    """This job's summary if its commit point has passed (``committed_summary``)."""
    started: CommitRecord | None
    """Its ``commit-started`` record (``read_commit_record``); not read into when ``finished``."""


def read_job_records(gate: Gate, *also: Callable[[], object]) -> JobRecords:
    """``committed_summary`` and ``read_commit_record`` with their three reads in one round trip, and ``also``
    (the caller's own independent calls) in the same one."""
    paths = gate.paths
    summaries = [(path, _reader(gate, path)) for path in (paths.commit_finished_path, paths.success_path)]
    started = _reader(gate, paths.commit_started_path)
    steps: list[Callable[[], object]] = [read for _, read in summaries]
    steps += [started, *also]
    run_together(gate.context.pool, steps, max_in_flight=gate.context.max_in_flight)
    for path, read in summaries:
        data = read.get()
        success = None if data is None else this_jobs_summary(gate, data, path)
        if success is not None:
            return JobRecords(success, None)
    return JobRecords(None, _commit_record(gate, paths.commit_started_path, started.get()))


def _reader(gate: Gate, path: str) -> Outcome[bytes | None]:
    return Outcome(lambda: _read_if_present(gate, path))


def this_jobs_summary(gate: Gate, data: bytes, path: str) -> SuccessData | None:
    """The summary in ``data`` (read from ``path``) if it is this job's and successful; ``None`` otherwise."""
    try:
        success = SuccessData.from_json(data, gate.to_url(path))
    except ManifestError as error:
        log.info("Not this job's summary: %s", error)
        return None
    return success if success.success and success.job_id == gate.paths.job_id else None


def _read_if_present(gate: Gate, path: str) -> bytes | None:
    return gate.read_bytes_if_present(path, OP_LOAD_FILE)


class Evidence(enum.Enum):
    """What the store shows of a row whose rename may have happened."""

    MOVED = "moved"
    """The source is gone and the destination holds a file of the row's size (and etag, where kept)."""
    COPIED = "copied"
    """A copy-then-delete rename that copied but did not delete: both there, checksums equal."""
    FAILED_COPY = "failed copy"
    """A copy-then-delete rename whose copy failed: the source there, and at the destination what the failed
    copy left, its store-side copy properties naming this source (``StoreOperations.is_failed_copy``)."""
    NONE = "none"
    """Anything else: not this job's doing."""


def _matches(found: FileStatus | None, row: FileToCommit, gate: Gate) -> bool:
    """A sanity check on top of the evidence, never ownership on its own: same size, same etag where kept."""
    if found is None or found.is_dir or found.size != row.size:
        return False
    if row.etag is not None and found.etag is not None and gate.capabilities.etags_preserved_in_rename:
        return found.etag == row.etag
    return True


def evidence(gate: Gate, row: FileToCommit, *, retry: bool = True) -> Evidence:
    """Probe a row in doubt: did this job's rename take effect (or half effect)?"""
    source = gate.info(row.source, retry=retry)
    if source is None:
        return Evidence.MOVED if _matches(gate.info(row.dest, retry=retry), row, gate) else Evidence.NONE
    if gate.capabilities.atomic_rename:
        return Evidence.NONE
    dest = gate.info(row.dest, retry=retry)
    if dest is None or dest.is_dir:
        return Evidence.NONE
    if gate.is_failed_copy(row.source, row.dest, retry=retry):  # before COPIED: such a blob may carry the checksum
        return Evidence.FAILED_COPY
    if _matches(dest, row, gate) and gate.same_content(source, dest):
        return Evidence.COPIED
    return Evidence.NONE


@dataclass(frozen=True, slots=True)
class UnitHistory:
    """What earlier runs recorded of one unit."""

    ours_below: int = 0
    """Rows below this index were moved by this job."""
    doubt_from: int | None = None
    """An intent without its ``done``: every row from here on may have been moved."""
    doubt_rows: frozenset[int] = field(default_factory=frozenset)
    """Rows where a unit stopped with an error that does not say whether the rename happened."""
    ours_rows: frozenset[int] = field(default_factory=frozenset)
    """Rows at or above ``ours_below`` that a unit of renames in flight together moved before it stopped."""

    def recorded_ours(self, index: int) -> bool:
        return index < self.ours_below or index in self.ours_rows

    def in_doubt(self, index: int) -> bool:
        if self.recorded_ours(index):
            return False
        return (self.doubt_from is not None and index >= self.doubt_from) or index in self.doubt_rows

    @property
    def touched(self) -> bool:
        return self.ours_below > 0 or self.doubt_from is not None or bool(self.doubt_rows) or bool(self.ours_rows)


NO_HISTORY = UnitHistory()


@dataclass(frozen=True, slots=True)
class _DoneRecord:
    up_to: int
    not_movable: bool
    also_ours: frozenset[int]
    also_in_doubt: frozenset[int]


def _rows_after(document: Any, key: str, up_to: int, rows: int, origin: str) -> frozenset[int]:
    """The optional list of row indices ``key``, each after ``up_to`` and inside the unit, else ``ManifestError``."""
    found = document.get(key, [])
    if not isinstance(found, list) or not all(
        isinstance(index, int) and not isinstance(index, bool) and up_to < index < rows for index in found
    ):
        raise ManifestError(f"{origin}: malformed {key} (row indices after upTo {up_to} and below {rows})")
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class JournalRun:
    """Which run of a job commit this is, as stages hand it to one another (the journal binds it to a gate)."""

    unit_size: int
    run: int | None
    """The number this run writes its records under; ``None`` for an abort, which only reads."""
    earlier_runs: int
    """How many runs before may have left records."""

    @classmethod
    def first(cls, unit_size: int) -> JournalRun:
        """The run that wrote ``commit-started``: nothing before it to read."""
        return cls(unit_size, 0, 0)

    @classmethod
    def rerun(cls, gate: Gate, unit_size: int) -> JournalRun:
        """A rerun takes the next number (recorded as ``run-<n>``) and reads the records of every run before."""
        runs = count_runs(gate)
        gate.write_bytes(_run_marker(gate, runs), b"")
        log.info("Job %s: resuming an interrupted job commit (run %d)", gate.paths.job_id, runs)
        return cls(unit_size, runs, runs)

    @classmethod
    def abort(cls, gate: Gate, unit_size: int) -> JournalRun:
        return cls(unit_size, None, count_runs(gate))


class Journal:
    """The records of one job attempt's commit, read and written through a stage's gate."""

    def __init__(self, gate: Gate, run: JournalRun) -> None:
        self.gate = gate
        self.unit_size = run.unit_size
        self.run = run.run
        self.earlier_runs = run.earlier_runs
        self.directory = gate.paths.journal_dir

    # --- units of renames --------------------------------------------------------------------------------------

    def _unit_path(self, run: int, unit: RenameUnit, kind: str) -> str:
        return posixpath.join(self.directory, f"{run:02d}", f"{unit.key}.{kind}")

    def history(self, unit: RenameUnit) -> UnitHistory:
        """What earlier runs recorded of ``unit``: one read per run, and a probe for a run without ``done``."""
        if self.earlier_runs == 0:
            return NO_HISTORY
        ours_below = 0
        doubt_from: int | None = None
        doubt_rows: set[int] = set()
        ours_rows: set[int] = set()
        for run in range(self.earlier_runs):
            done = self._read_done(run, unit)
            if done is not None:
                ours_below = max(ours_below, done.up_to)
                if done.up_to < len(unit.rows) and not done.not_movable:
                    doubt_rows.add(done.up_to)
                ours_rows.update(done.also_ours)
                doubt_rows.update(done.also_in_doubt)
            elif self.gate.info(self._unit_path(run, unit, "intent")) is not None:
                doubt_from = 0
        return UnitHistory(ours_below, doubt_from, frozenset(doubt_rows), frozenset(ours_rows))

    def _read_done(self, run: int, unit: RenameUnit) -> _DoneRecord | None:
        path = self._unit_path(run, unit, "done")
        data = _read_if_present(self.gate, path)
        if data is None:
            return None
        try:
            document = load_json_document(data, self.gate.to_url(path))
            up_to, not_movable = document["upTo"], document["notMovable"]
            if not isinstance(up_to, int) or not isinstance(not_movable, bool) or not 0 <= up_to <= len(unit.rows):
                raise ManifestError(f"{self.gate.to_url(path)}: malformed record")
            also_ours = _rows_after(document, "alsoOurs", up_to, len(unit.rows), self.gate.to_url(path))
            also_in_doubt = _rows_after(document, "alsoInDoubt", up_to, len(unit.rows), self.gate.to_url(path))
        except (ManifestError, KeyError, TypeError) as error:
            log.warning("Unreadable journal record %s counts as missing: %s", self.gate.to_url(path), error)
            return None
        return _DoneRecord(up_to, not_movable, also_ours, also_in_doubt)

    def begin(self, unit: RenameUnit) -> None:
        """Record the intent to rename ``unit``, before its first rename."""
        self.gate.write_bytes(self._unit_path(self._writing_run, unit, "intent"), dump_json({"rows": len(unit.rows)}))

    def finish(
        self,
        unit: RenameUnit,
        up_to: int,
        *,
        not_movable: bool = False,
        also_ours: Iterable[int] = (),
        also_in_doubt: Iterable[int] = (),
    ) -> None:
        """Record that rows below ``up_to`` are this job's; row ``up_to`` (if any) failed, certainly unmoved
        when ``not_movable``; of the rows after it, ``also_ours`` moved and ``also_in_doubt`` may have."""
        record: dict[str, Any] = {"rows": len(unit.rows), "upTo": up_to, "notMovable": not_movable}
        if also_ours:
            record["alsoOurs"] = sorted(also_ours)
        if also_in_doubt:
            record["alsoInDoubt"] = sorted(also_in_doubt)
        self.gate.write_bytes(self._unit_path(self._writing_run, unit, "done"), dump_json(record))

    @property
    def _writing_run(self) -> int:
        if self.run is None:
            raise JobStateError(f"job {self.gate.paths.job_id}: an abort does not write journal records")
        return self.run

    # --- directories -------------------------------------------------------------------------------------------

    def record_directories(self, created: Iterable[str], deleted: Iterable[str]) -> None:
        """Before this run creates ``created`` or deletes the files ``deleted`` (where directories must go)."""
        path = posixpath.join(self.directory, f"dirs-{self._writing_run:02d}.json")
        self.gate.write_bytes(path, dump_json({"created": sorted(created), "deleted": sorted(deleted)}))

    def created_directories(self) -> list[str]:
        """Every directory a run said it would create, inside the destination only."""
        below_dest = self.gate.paths.dest.rstrip("/") + "/"
        temporary = posixpath.join(self.gate.paths.temporary_dir, "")
        found: set[str] = set()
        for run in range(self.earlier_runs):
            path = posixpath.join(self.directory, f"dirs-{run:02d}.json")
            data = _read_if_present(self.gate, path)
            if data is None:
                continue
            try:
                created = load_json_document(data, self.gate.to_url(path))["created"]
            except (ManifestError, KeyError, TypeError) as error:
                # Written before any directory is made: a torn record means none was.
                log.warning("Unreadable journal record %s counts as missing: %s", self.gate.to_url(path), error)
                continue
            found.update(
                d
                for d in created
                if isinstance(d, str) and d.startswith(below_dest) and not d.startswith(temporary) and ".." not in d
            )
        return sorted(found)


def _run_marker(gate: Gate, run: int) -> str:
    return posixpath.join(gate.paths.journal_dir, f"run-{run:02d}")


def count_runs(gate: Gate) -> int:
    """How many runs of the job commit began: run 0 (``commit-started``) and each ``run-<n>`` marker after."""
    runs = 1
    while gate.info(_run_marker(gate, runs)) is not None:
        runs += 1
    return runs
