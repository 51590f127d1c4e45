"""TransactionalCommitJob: publish the job by writing ``_committed_<tid>``; no data file moves.

Steps: (1) a job whose ``_committed_<tid>`` is in place is committed: finish ``_SUCCESS`` and cleanup, return
its summary; (2) load the accepted attempts' manifests (one per attempt; without ``accepted_attempts`` the first
saved of each task) and admit what they name (this job's tid, the manifest's own attempt tag, inside the
destination); (3) write ``commit-started`` (the accepted attempts, so a late task
commit fails rather than report success); (4) delete every file the job's markers name that no accepted
manifest lists: the files of failed, superseded and speculative attempts; (5) write ``_committed_<tid>`` at the
destination's root with ``added`` and ``removed``: the commit point, one small file; (6) the same record in every
other directory holding a file added or removed, listing that directory's files (``directory_records.py``); (7)
``_SUCCESS`` and ``commit-finished``; (8) cleanup.

A kill before (5) leaves the job uncommitted (a rerun redoes 2-8, an abort deletes every marker-named file); a
kill after it leaves the job committed (a rerun finishes 6-8, an abort writes the missing records of 6 and keeps
the output).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

from ...admission import all_destination_relatives_admitted, check_manifest_ids, destination_relative_problem
from ...errors import JobStateError, ManifestError, OutputValidationError
from ...manifest import MANIFEST_SUFFIX, TaskManifest
from ...parallel import Outcome, run_bounded, run_together
from ...paths import HIDDEN_PREFIXES
from ...protocols.transactional.records import (
    TID_SEPARATOR,
    TransactionPaths,
    TransactionRecord,
    attempt_tag,
    parse_data_file_name,
    relative_to,
)
from ...statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    OP_LOAD_MANIFEST,
)
from ...store import FileStatus
from ...success_data import SuccessData
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job, summary_in_trash
from ..journal import (
    CommitRecord,
    check_accepted,
    check_not_rolled_back,
    committed_summary,
    read_commit_record,
    write_commit_record,
)
from ..marker_reads import skipped_diagnostics
from .abort_job import delete_named_files, marker_named_relatives, remove_emptied_directories
from .directory_records import write_directory_records

log = logging.getLogger(__name__)

MAX_FILENAMES = 100


@dataclass(frozen=True, slots=True)
class TransactionalCommitJobArguments:
    committer_name: str
    """What ``_SUCCESS`` names as its committer."""
    accepted_attempts: Mapping[str, str] | None = None
    removed: Sequence[str] = ()
    """Store paths below the destination that this job replaces (overwrite): listed as ``removed``."""
    background_cleanup: bool = False
    outcome_recorded: Callable[[], None] = lambda: None
    """Called once the commit point and ``commit-finished`` are in place, before the cleanup: where the committer
    stops renewing the job's lease, which held while the commit ran."""


@dataclass(frozen=True, slots=True)
class TransactionalCommitJobResult:
    success: SuccessData
    tasks_committed: int
    files_committed: int
    stragglers_deleted: int
    already_committed: bool = False
    removed: int = 0
    """Files listed as ``removed`` (replaced by this job)."""

    @property
    def details(self) -> str:
        return f"; {self.stragglers_deleted} files of other attempts deleted"


@dataclass(frozen=True, slots=True)
class _Loaded:
    task_id: str
    task_attempt_id: str
    files: list[tuple[str, int]]
    """(destination-relative path, size) of each committed file."""


class TransactionalCommitJobStage(Stage[TransactionalCommitJobArguments, TransactionalCommitJobResult]):
    """See the module."""

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: TransactionalCommitJobArguments) -> TransactionalCommitJobResult:
        transaction = TransactionPaths(self.paths)
        self._committer_name = arguments.committer_name
        # Whether the job committed, began committing, and its manifests (no listing: never set up): one round trip.
        committed = Outcome(lambda: self.info(transaction.committed))
        began = Outcome(lambda: read_commit_record(self))
        listing = Outcome(lambda: self.list_dir_if_present(self.paths.manifest_dir))
        run_together(self.context.pool, [committed, began, listing], max_in_flight=self.context.max_in_flight)
        if committed.get() is not None:
            return self._finish_committed(transaction, arguments)
        manifests = listing.get()
        if manifests is None:
            raise JobStateError(
                f"{self.to_url(self.paths.manifest_dir)}: job {self.paths.job_id} was never set up, or was aborted"
            )
        started = began.get()
        accepted = arguments.accepted_attempts
        if started is not None:
            check_accepted(self, started, accepted)
            accepted = started.accepted
        loaded = self._load(transaction, accepted, manifests)
        if started is None:
            # No renames to cut into units: one unit of one, the smallest size the record admits (with 0 every
            # reader took the record for a torn one, and a rerun committed whatever it was now told to).
            accepted_now = {m.task_id: m.task_attempt_id for m in loaded}
            write_commit_record(self, CommitRecord(self.paths.job_id, accepted_now, 1))
        added = {relative: size for manifest in loaded for relative, size in manifest.files}
        check_not_rolled_back(self, transaction.data_path(min(added)) if added else None)
        if self.config.validate_output:
            self._validate(transaction, added)
        stragglers, skipped = self._delete_stragglers(transaction, set(added))
        removed = self._removed(arguments.removed, set(added))
        record = TransactionRecord(tuple(sorted(added)), tuple(removed), self.paths.job_id)
        self.write_bytes(transaction.committed, record.to_json())  # the commit point
        write_directory_records(self, transaction, record)
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, len(added))
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, sum(added.values()))
        self.stats.set_counter(COMMITTER_TASKS_COMPLETED, len(loaded))
        success = self._summary(sorted(added))
        success.diagnostics.update(skipped_diagnostics(skipped))
        self._publish(success)
        arguments.outcome_recorded()
        self._cleanup(arguments)
        return TransactionalCommitJobResult(success, len(loaded), len(added), stragglers, removed=len(removed))

    # --- steps ----------------------------------------------------------------------------------------------------

    def _load(
        self, transaction: TransactionPaths, accepted: Mapping[str, str] | None, listing: list[FileStatus]
    ) -> list[_Loaded]:
        """One manifest per task: the accepted attempt's, or else the first saved (earliest modification time,
        ties to the smallest attempt id), as the upload protocol chooses. Each attempt saved its own
        (``manifests/$taskAttemptId-manifest.json``), so a late losing attempt never displaces the accepted one."""
        with self.stats.track(JOB_STAGE_LOAD_MANIFESTS):
            statuses = [s for s in listing if s.path.endswith(MANIFEST_SUFFIX)]
            if accepted is not None:
                by_attempt = {posixpath.basename(s.path).removesuffix(MANIFEST_SUFFIX): s for s in statuses}
                missing = sorted(
                    f"{task}: {attempt}" for task, attempt in accepted.items() if attempt not in by_attempt
                )
                if missing:
                    raise ManifestError(
                        f"{self.to_url(self.paths.manifest_dir)}: no manifest of accepted attempt(s) "
                        f"{', '.join(missing)}"
                    )
                statuses = [by_attempt[accepted[task]] for task in sorted(accepted)]
            loaded: list[tuple[_Loaded, FileStatus]] = []
            self.read_each(
                statuses,
                lambda status: status.path,
                OP_LOAD_MANIFEST,
                lambda status, data: loaded.append((self._parse(transaction, status, data, accepted), status)),
            )
        first: dict[str, _Loaded] = {}
        for manifest, _ in sorted(
            loaded,
            key=lambda pair: (
                pair[1].modified if pair[1].modified is not None else float("inf"),
                pair[0].task_attempt_id,
            ),
        ):
            first.setdefault(manifest.task_id, manifest)
        if accepted is not None and set(first) != set(accepted):
            raise ManifestError(f"{self.to_url(self.paths.manifest_dir)}: two accepted attempts of one task")
        seen: dict[str, str] = {}
        for manifest in first.values():
            for relative, _ in manifest.files:
                if relative in seen:
                    raise ManifestError(
                        f"{self.to_url(transaction.data_path(relative))}: claimed by tasks {seen[relative]} and "
                        f"{manifest.task_id}"
                    )
                seen[relative] = manifest.task_id
        return sorted(first.values(), key=lambda manifest: manifest.task_id)

    def _parse(
        self, transaction: TransactionPaths, status: FileStatus, data: bytes, accepted: Mapping[str, str] | None
    ) -> _Loaded:
        url = self.to_url(status.path)
        manifest = TaskManifest.from_json(data, url)
        check_manifest_ids(manifest.job_id, manifest.task_id, manifest.task_attempt_id, url)
        if manifest.job_id != self.paths.job_id:
            raise ManifestError(f"{url}: manifest of job {manifest.job_id!r}, not of job {self.paths.job_id!r}")
        if posixpath.basename(status.path) != manifest.task_attempt_id + MANIFEST_SUFFIX:
            raise ManifestError(f"{url}: field taskAttemptID {manifest.task_attempt_id!r} does not match the file name")
        if accepted is not None and accepted.get(manifest.task_id) != manifest.task_attempt_id:
            raise ManifestError(
                f"{url}: manifest of attempt {manifest.task_attempt_id}, but attempt "
                f"{accepted.get(manifest.task_id)} of task {manifest.task_id} was accepted"
            )
        self.stats.merge(manifest.iostatistics)
        tag = attempt_tag(manifest.task_attempt_id)
        tid = transaction.tid  # a hash of the job id: once a manifest, not once a file
        relatives = self._admit_at_once(manifest, tid, tag)
        if relatives is None:
            relatives = [self._admit(url, entry.source, entry.dest, tid, tag) for entry in manifest.files]
        files = [(relative, entry.size) for relative, entry in zip(relatives, manifest.files, strict=True)]
        return _Loaded(manifest.task_id, manifest.task_attempt_id, files)

    def _admit_at_once(self, manifest: TaskManifest, tid: str, tag: str) -> list[str] | None:
        """``_admit`` of every entry, decided per manifest on joined text and slices; ``None`` when any entry
        may be refused (its source differs, its URL is not a plain slice of the destination's, a path is not
        admitted, a name lacks the tid and tag), and the caller then admits entry by entry, naming the culprit.

        A name carries tid and tag exactly when its part before the first ``.`` ends in ``-tid-<tid>-<tag>``
        and it is not hidden: ``parse_data_file_name``'s pattern, whose tag has no ``i`` to start a second
        ``-tid-`` inside it."""
        dests = [entry.dest for entry in manifest.files]
        if dests != [entry.source for entry in manifest.files]:
            return None
        dest_url_prefix = self.to_url(self.paths.dest.rstrip("/") + "/")
        if "%" in "".join(dests) or not all(map(str.startswith, dests, repeat(dest_url_prefix))):
            return None
        cut = len(dest_url_prefix)
        relatives = [dest[cut:] for dest in dests]
        if not all_destination_relatives_admitted(relatives):
            return None
        suffix = f"{TID_SEPARATOR}{tid}-{tag}"
        names = [relative.rpartition("/")[2] for relative in relatives]
        if any(name.startswith(HIDDEN_PREFIXES) or not name.partition(".")[0].endswith(suffix) for name in names):
            return None
        return relatives

    def _admit(self, origin: str, source: str, dest: str, tid: str, tag: str) -> str:
        """The destination-relative path of one manifest entry, if it names a file of this attempt in place."""
        try:
            path = self.from_url(dest)
        except ValueError:
            raise ManifestError(f"{origin}: destination {dest} is not in this store") from None
        relative = relative_to(self.paths.dest, path)
        problem = "lies outside the destination" if relative is None else destination_relative_problem(relative)
        if relative is None or problem is not None:
            raise ManifestError(f"{origin}: destination {dest} {problem}")
        if source != dest:
            raise ManifestError(
                f"{origin}: source {source} differs from destination {dest}; files are written in place"
            )
        parsed = parse_data_file_name(relative.rpartition("/")[2])
        if parsed is None or parsed.tid != tid or parsed.tag != tag:
            raise ManifestError(
                f"{origin}: {dest} is not a file of this task attempt (its name must carry tid {tid} "
                f"and the attempt's tag {tag})"
            )
        return relative

    def _validate(self, transaction: TransactionPaths, added: dict[str, int]) -> None:
        """Every committed file is in place with the size its task recorded: before the commit point."""
        with self.stats.track(JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT):

            def check(relative: str) -> None:
                path = transaction.data_path(relative)
                status = self.info(path)
                if status is None or status.is_dir:
                    raise OutputValidationError(f"{self.to_url(path)}: committed by a task but not in the store")
                if status.size != added[relative]:
                    raise OutputValidationError(
                        f"{self.to_url(path)}: {status.size} bytes in the store, {added[relative]} at task commit"
                    )

            run_bounded(self.context.pool, sorted(added), check, max_in_flight=self.context.max_in_flight)

    def _delete_stragglers(self, transaction: TransactionPaths, committed: set[str]) -> tuple[int, tuple[str, ...]]:
        """Delete what the markers name beyond the committed files; returns how many files were there, and the
        markers not followed (see ``marker_named_relatives``, ``delete_named_files``)."""
        named = marker_named_relatives(self, transaction, admitted=committed)
        doomed = [transaction.data_path(relative) for relative in sorted(named.relatives - committed)]
        outcome = delete_named_files(self, doomed)
        remove_emptied_directories(self, outcome.followed)  # also those a killed earlier run emptied
        if outcome.deleted:
            log.info("%s: deleted %d files of attempts that were not committed", self.name, len(outcome.deleted))
        return len(outcome.deleted), named.skipped + outcome.skipped

    def _removed(self, paths: Sequence[str], added: set[str]) -> list[str]:
        removed = []
        for path in paths:
            relative = relative_to(self.paths.dest, path)
            problem = "lies outside the destination" if relative is None else destination_relative_problem(relative)
            if relative is None or problem is not None:
                raise ManifestError(f"{self.to_url(path)}: cannot be replaced: it {problem}")
            if relative not in added:
                removed.append(relative)
        return sorted(removed)

    def _summary(self, added: list[str]) -> SuccessData:
        success = SuccessData.create(self.paths.job_id, self.context.job_id_source, COMMITTER_COMMIT_JOB)
        success.committer = self._committer_name
        success.filenames = [self.to_url(posixpath.join(self.paths.dest, name)) for name in added[:MAX_FILENAMES]]
        success.iostatistics = self.stats.snapshot()
        return success

    def _publish(self, success: SuccessData) -> None:
        """``_SUCCESS`` (when asked) and ``commit-finished``, the record a rerun returns; after the commit point."""
        if self.config.mark_successful_jobs:
            self.write_bytes(self.paths.success_path, success.to_json())
        self.write_bytes(self.paths.commit_finished_path, success.to_json())

    def _finish_committed(
        self, transaction: TransactionPaths, arguments: TransactionalCommitJobArguments
    ) -> TransactionalCommitJobResult:
        """The commit point has passed (a rerun after a kill): finish ``_SUCCESS`` and cleanup."""
        success = committed_summary(self) or summary_in_trash(self)
        if success is None:
            record = TransactionRecord.from_json(
                self.read_bytes(transaction.committed), self.to_url(transaction.committed)
            )
            if record.job_id not in (None, self.paths.job_id):
                raise JobStateError(
                    f"{self.to_url(transaction.committed)}: committed by job {record.job_id}, not {self.paths.job_id}"
                )
            self._recount(transaction, record.added)
            success = self._summary(sorted(record.added))
            if self.info(self.paths.job_attempt_dir) is not None:
                # Killed between the commit point and commit-finished: the directories' records may be missing.
                write_directory_records(self, transaction, record)
                self._publish(success)
            # Else the job finished long ago and its state is gone: a later job's _SUCCESS may be in place now,
            # and must not be replaced by this one's.
        log.info("%s: job %s was already committed; finishing its cleanup", self.name, self.paths.job_id)
        arguments.outcome_recorded()
        self._cleanup(arguments)
        return TransactionalCommitJobResult(success, 0, len(success.filenames), 0, already_committed=True)

    def _recount(self, transaction: TransactionPaths, added: Sequence[str]) -> None:
        """The totals of a commit whose summary died with its process (killed between ``_committed_<tid>`` and
        ``_SUCCESS``): files and bytes from the committed files in the store, tasks from ``commit-started``."""
        sizes: list[int] = []

        def size(relative: str) -> int:
            status = self.info(transaction.data_path(relative))
            if status is None:
                log.warning("%s: committed file %s is missing", self.name, self.to_url(transaction.data_path(relative)))
                return 0
            return status.size

        run_bounded(
            self.context.pool, list(added), size, max_in_flight=self.context.max_in_flight, on_result=sizes.append
        )
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, len(added))
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, sum(sizes))
        started = read_commit_record(self)
        if started is not None:
            self.stats.set_counter(COMMITTER_TASKS_COMPLETED, len(started.accepted))

    def _cleanup(self, arguments: TransactionalCommitJobArguments) -> CleanupResult:
        return clean_up_job(
            self, suppress_errors=self.config.cleanup_failures_ignored, background=arguments.background_cleanup
        )
