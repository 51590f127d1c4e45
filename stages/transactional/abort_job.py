"""TransactionalAbortJob: delete exactly the data files the job's markers name, unless the job is committed."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ...markers.layout import MarkerPaths, batched_file_index
from ...parallel import run_bounded
from ...paths import JobPaths
from ...protocols.transactional.records import TransactionPaths, TransactionRecord, parse_data_file_name
from ...statistic_names import JOB_STAGE_ABORT, OP_DELETE_FILE_UNDER_DESTINATION
from ...store import LinkInPathError
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job
from ..journal import committed_summary
from ..marker_reads import read_job_markers, skipped_diagnostics
from .directory_records import delete_directory_records, write_directory_records

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransactionalAbortJobArguments:
    dry_run: bool = False
    """Find what would be deleted, change nothing."""


@dataclass(frozen=True, slots=True)
class TransactionalAbortJobResult:
    committed: bool
    """The job's ``_committed_<tid>`` is in place: its output was kept, only its state deleted."""
    deleted: tuple[str, ...]
    """URLs of the data files deleted (or, in a dry run, that would be)."""
    cleanup: CleanupResult | None
    skipped: tuple[str, ...] = ()
    """Markers not followed, each naming the marker file (and line) and why: a marker of a file this job did not
    write, a path outside the destination, or through a symbolic link out of it. Nothing they name was deleted."""

    @property
    def files_reverted(self) -> int:
        return len(self.deleted)

    @property
    def diagnostics(self) -> dict[str, str]:
        return skipped_diagnostics(self.skipped)


class TransactionalAbortJobStage(Stage[TransactionalAbortJobArguments, TransactionalAbortJobResult]):
    """Roll the job back from its markers alone (no marker server needed), then delete ``_started_<tid>`` and the
    job's state.

    Only a marker naming a file of this job's transaction (its name carries the job's tid) is followed: a crafted
    ``MARKERS`` line naming another job's committed file, another tool's file or a path outside the destination
    is skipped and reported (``skipped``), and a file behind a symbolic link out of the destination is never
    deleted. Safe to repeat after a kill at any point: what is gone stays gone, what is left is found again
    through the markers. A ``_committed_<tid>`` of this job in one of their directories goes first (written by
    hand or crafted: a job commit writes them after the root's only). After the commit point (the root's
    ``_committed_<tid>`` in place) the output stays, and the directories' records a killed commit had not written
    yet are written.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: TransactionalAbortJobArguments) -> TransactionalAbortJobResult:
        transaction = TransactionPaths(self.paths)
        if self.info(transaction.committed) is not None:
            log.info("%s: job %s is committed; keeping its output", self.name, self.paths.job_id)
            if arguments.dry_run:
                return TransactionalAbortJobResult(True, (), None)
            self._finish_directory_records(transaction)
            return TransactionalAbortJobResult(True, (), self._cleanup())
        named = marker_named_relatives(self, transaction)
        targets = [transaction.data_path(relative) for relative in sorted(named.relatives)]
        if arguments.dry_run:
            present = [path for path in targets if self.info(path) is not None]
            return TransactionalAbortJobResult(False, tuple(self.to_url(p) for p in present), None, named.skipped)
        delete_directory_records(self, transaction, named.relatives)  # first: no reader takes a file for committed
        outcome = delete_named_files(self, targets)
        remove_emptied_directories(self, outcome.followed)  # also those an earlier, killed abort emptied
        self.delete_file(transaction.started)
        retire_batched_markers(self, transaction.job)
        cleanup = self._cleanup()
        skipped = named.skipped + outcome.skipped
        log.info(
            "%s: deleted %d data files of job %s (%d markers skipped)",
            self.name,
            len(outcome.deleted),
            self.paths.job_id,
            len(skipped),
        )
        return TransactionalAbortJobResult(False, tuple(self.to_url(p) for p in outcome.deleted), cleanup, skipped)

    def _finish_directory_records(self, transaction: TransactionPaths) -> None:
        """A commit killed between its commit point and ``commit-finished`` may have left directories without
        their record: write them from the root's, as a rerun would, so that the output kept is readable from each
        partition too. Not once the job's state is gone (its commit finished) or its summary is in place."""
        if self.info(self.paths.job_attempt_dir) is None or committed_summary(self) is not None:
            return
        url = self.to_url(transaction.committed)
        record = TransactionRecord.from_json(self.read_bytes(transaction.committed), url)
        if record.job_id not in (None, self.paths.job_id):
            log.warning("%s: %s was written by job %s: writing no records from it", self.name, url, record.job_id)
            return
        write_directory_records(self, transaction, record)

    def _cleanup(self) -> CleanupResult:
        return clean_up_job(self, suppress_errors=False)


@dataclass(frozen=True, slots=True)
class NamedFiles:
    """What the markers of a job's attempts name: this transaction's files, and what was skipped."""

    relatives: set[str]
    """Destination-relative paths of this transaction's files."""
    skipped: tuple[str, ...]
    """Markers not followed, each naming the marker file (and line) and why."""


def marker_named_relatives(
    gate: Stage[Any, Any], transaction: TransactionPaths, admitted: AbstractSet[str] = frozenset()
) -> NamedFiles:
    """The destination-relative paths of the data files the markers of this job attempt and its earlier attempts
    name, keeping only files of this transaction (their names carry its tid); the others are skipped, with the
    entries the reader could not take as markers. Each attempt's ``MARKERS<i>`` files are read in parallel on the
    stage's pool (``marker_reads``).

    ``admitted``: relative paths the caller has already proved files of this transaction (a job commit's
    admitted manifest entries), whose markers need no second check of their names."""
    tid = transaction.tid  # a hash of the job id: computed once, not once a marker
    relatives: set[str] = set()
    skipped: list[str] = []
    for attempt in _attempts_up_to(gate, transaction.job):
        marker_paths = MarkerPaths(JobPaths(transaction.job.dest, transaction.job.job_id, attempt))
        found = read_job_markers(gate, marker_paths)
        skipped.extend(found.skipped)
        for marker in found.markers:
            if marker.data_file in admitted:
                relatives.add(marker.data_file)
                continue
            parsed = parse_data_file_name(marker.data_file.rpartition("/")[2])
            if parsed is None or parsed.tid != tid:
                skipped.append(
                    f"{gate.to_url(marker_paths.markers_dir)}: a marker names {marker.data_file!r}, which is not a "
                    f"file of transaction {tid}: not followed"
                )
                continue
            relatives.add(marker.data_file)
    if skipped:
        log.warning(
            "%s: %d markers of job %s skipped (nothing they name is deleted), e.g. %s",
            gate.name,
            len(skipped),
            transaction.job.job_id,
            skipped[0],
        )
    return NamedFiles(relatives, tuple(sorted(skipped)))


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What ``delete_named_files`` did."""

    deleted: list[str]
    """Store paths of the files that were there and are deleted, sorted."""
    followed: list[str]
    """Store paths whose way from the destination holds no symbolic link: their emptied parents may go."""
    skipped: tuple[str, ...]
    """Paths not followed: a directory on the way is a symbolic link (local disk)."""


def delete_named_files(gate: Stage[Any, Any], targets: Iterable[str]) -> DeleteOutcome:
    """Delete each store path below the destination in parallel on the job's pool (each tried once, timed as
    ``op_delete_file_under_destination``), never through a symbolic link out of it: such a path is skipped and
    reported."""
    paths = list(targets)
    deleted: list[str] = []
    linked: list[str] = []

    def one(path: str) -> tuple[str, str]:
        try:
            found = gate.call(OP_DELETE_FILE_UNDER_DESTINATION, lambda: gate.delete_file_below(path, retry=False), path)
        except LinkInPathError:
            return path, "link"
        return path, "deleted" if found else ""

    def record(result: tuple[str, str]) -> None:
        path, what = result
        if what == "deleted":
            deleted.append(path)
        elif what == "link":
            linked.append(path)

    run_bounded(gate.context.pool, paths, one, max_in_flight=gate.context.max_in_flight, on_result=record)
    skipped = tuple(
        sorted(f"{gate.to_url(path)}: a directory on the way is a symbolic link: not followed" for path in linked)
    )
    if skipped:
        log.warning("%s: %d files not deleted through a symbolic link, e.g. %s", gate.name, len(skipped), skipped[0])
    followed = sorted(set(paths) - set(linked))
    return DeleteOutcome(sorted(deleted), followed, skipped)


def retire_batched_markers(gate: Stage[Any, Any], job: JobPaths) -> None:
    """Delete the ``MARKERS<i>`` files of this job attempt and its earlier ones, ahead of the cleanup.

    The reverse of the server's order (``MARKERS.type`` first, then the batches): the cleanup's recursive delete
    goes in the store's own order, and an abort killed inside it after ``MARKERS.type`` went would leave batches
    without their type, which the marker reader refuses, so that every later abort would fail. Called once the
    data files they name are gone."""
    for attempt in _attempts_up_to(gate, job):
        markers_dir = MarkerPaths(JobPaths(job.dest, job.job_id, attempt)).markers_dir
        try:
            entries = gate.list_dir(markers_dir)
        except FileNotFoundError:
            continue
        for status in entries:
            if not status.is_dir and batched_file_index(posixpath.basename(status.path)) is not None:
                gate.delete_file(status.path)


def _attempts_up_to(gate: Stage[Any, Any], job: JobPaths) -> list[int]:
    """This job attempt and the earlier attempts that left state under the job's directory."""
    try:
        entries = gate.list_dir(job.job_dir)
    except FileNotFoundError:
        return [job.job_attempt]
    names = (posixpath.basename(status.path.rstrip("/")) for status in entries if status.is_dir)
    earlier = {int(name) for name in names if len(name) == 2 and name.isdigit() and int(name) < job.job_attempt}
    return sorted(earlier | {job.job_attempt})


def remove_emptied_directories(gate: Stage[Any, Any], doomed: list[str]) -> None:
    """On stores with real directories, remove the parents of the data files that were to be deleted that are
    now empty, deepest first, never the destination itself.

    ``doomed`` is every file the caller set out to delete, not only those it found: a run killed after its
    deletes and before this left emptied directories that a rerun or a second abort finds no file in. A
    directory that existed empty before the job and received its files goes too: which parents a task created
    is not recorded (the markers name files only)."""
    if not gate.capabilities.real_directories:
        return
    root = gate.paths.dest.rstrip("/")
    parents: set[str] = set()
    for path in doomed:
        parent = posixpath.dirname(path)
        while parent.startswith(root + "/"):
            parents.add(parent)
            parent = posixpath.dirname(parent)
    for directory in sorted(parents, key=lambda d: (-d.count("/"), d)):
        gate.remove_empty_dir(directory)
