"""UploadCommitJob: complete every accepted attempt's pending uploads, never overwriting; no data is copied.

Steps: (1) a job whose summary is in place (``_SUCCESS``, or ``commit-finished``) is committed: abort what is
left and clean up, return its summary; (2) load every attempt's manifest and choose one attempt per task:
``accepted_attempts`` when given (the others are ignored), otherwise the attempt whose manifest was saved first
(earliest modification time, ties to the smallest attempt id); refuse a destination claimed by two chosen tasks;
(3) write ``commit-started`` (the chosen attempts: a rerun finishes with them); (4) complete every chosen upload
in parallel with ``If-None-Match: *`` (an object already at a key is an ``OutputConflictError``, unless
``delete.target.files``: then it is deleted first); (5) validate, when configured; (6) ``_SUCCESS`` and
``commit-finished``: the commit point; (7) abort every upload still incomplete at a key the markers of any attempt
of the job name (the chosen ones are complete, so these are the other attempts'; every upload has its marker; an
upload at a key another job in flight also marks goes only if this job's records name it), then delete the job's
state.

A kill before (6) leaves completed objects that a rerun recognises as its own (``S3Store.holds``: the writer's
token and the multipart ETag) and an abort deletes; a kill after it leaves a committed job that a rerun finishes.

What may be in the way at (4), besides an object at the key: a directory there (objects below ``key/``), which
S3 would keep beside the file, a tree that s3fs, S3A and Spark's listing see as broken: a conflict too, or
deleted first under ``delete.target.files``, found by one listing per parent directory (not one per file); and a
key one chosen task writes as a file and another as a directory (``a`` and ``a/b``), refused at (2).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import JobStateError, ManifestError, OutputConflictError, OutputValidationError
from ...iostatistics import DurationAccumulator
from ...parallel import Outcome, run_bounded, slices
from ...protocols.upload.records import UploadPaths
from ...statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_COMMITS_COMPLETED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    OP_COMPLETE_UPLOAD,
    STORE_IO_RETRY,
)
from ...store import FileStatus
from ...store.pending_upload import PendingUpload
from ...success_data import SuccessData
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job
from ..journal import CommitRecord, check_accepted, check_not_rolled_back, read_job_records, write_commit_record
from ..marker_reads import skipped_diagnostics
from .state import (
    AttemptManifest,
    JobUploads,
    abort_each,
    find_job_uploads,
    list_if_present,
    load_attempt_manifest,
    manifest_statuses,
)

log = logging.getLogger(__name__)

MAX_FILENAMES = 100
BATCHES_IN_FLIGHT = 4
"""Batches of completions a job commit has in flight at once, each of a quarter of ``io.threads`` uploads."""


@dataclass(frozen=True, slots=True)
class UploadCommitJobArguments:
    committer_name: str
    accepted_attempts: Mapping[str, str] | None = None
    outcome_recorded: Callable[[], None] = lambda: None
    """Called once ``commit-finished`` (the commit point) is in place, before the other attempts' uploads are
    aborted and the state deleted: where the committer stops renewing the job's lease, which held while the
    commit ran."""


@dataclass(frozen=True, slots=True)
class UploadCommitJobResult:
    success: SuccessData
    tasks_committed: int
    files_committed: int
    uploads_aborted: int
    already_committed: bool = False

    @property
    def details(self) -> str:
        return f"; {self.uploads_aborted} other uploads aborted"


def choose_attempts(
    manifests: list[AttemptManifest], accepted: Mapping[str, str] | None, where: str
) -> list[AttemptManifest]:
    """One manifest per task: the accepted attempt's, or else the first saved (earliest modification time, ties
    to the smallest attempt id). ``ManifestError`` for an accepted attempt without a manifest."""
    if accepted is not None:
        by_attempt = {(m.task_id, m.task_attempt_id): m for m in manifests}
        missing = sorted(
            f"{task}: {attempt}" for task, attempt in accepted.items() if (task, attempt) not in by_attempt
        )
        if missing:
            raise ManifestError(f"{where}: no manifest of accepted attempt(s) {', '.join(missing)}")
        return [by_attempt[(task, accepted[task])] for task in sorted(accepted)]
    first: dict[str, AttemptManifest] = {}
    for manifest in sorted(
        manifests, key=lambda m: (m.modified if m.modified is not None else float("inf"), m.task_attempt_id)
    ):
        first.setdefault(manifest.task_id, manifest)
    return [first[task] for task in sorted(first)]


def left_diagnostics(gate: Stage[Any, Any], found: JobUploads) -> dict[str, str]:
    """The summary's diagnostics of markers skipped and of uploads left (at a marked key, never recorded)."""
    diagnostics = skipped_diagnostics(found.skipped)
    if found.left:
        diagnostics["uploads.left"] = str(len(found.left))
        diagnostics["uploads.left.detail"] = "\n".join(
            f"{gate.to_url(path)} (upload id {upload_id})" for path, upload_id in found.left[:10]
        )
    return diagnostics


class UploadCommitJobStage(Stage[UploadCommitJobArguments, UploadCommitJobResult]):
    """See the module."""

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: UploadCommitJobArguments) -> UploadCommitJobResult:
        layout = UploadPaths(self.paths)
        self._committer_name = arguments.committer_name
        # Whether the job committed, was set up, began committing, and its manifests: one round trip.
        set_up = Outcome(lambda: self.info(layout.protocol_file))
        manifests = Outcome(lambda: manifest_statuses(self))
        records = read_job_records(self, set_up, manifests)
        if records.finished is not None:
            arguments.outcome_recorded()
            return self._finish_committed(layout, records.finished)
        if set_up.get() is None:
            raise JobStateError(
                f"{self.to_url(self.paths.job_attempt_dir)}: upload job {self.paths.job_id} was never set up, or "
                "was aborted"
            )
        started = records.started
        accepted = arguments.accepted_attempts
        if started is not None:
            check_accepted(self, started, accepted)
            accepted = started.accepted
        chosen = self._load(accepted, manifests.get())
        if started is None:
            write_commit_record(
                self, CommitRecord(self.paths.job_id, {m.task_id: m.task_attempt_id for m in chosen}, 1)
            )
        check_not_rolled_back(self, layout.protocol_file)
        uploads = [(relative, upload) for manifest in chosen for relative, upload in manifest.uploads]
        self._complete(uploads)
        if self.config.validate_output:
            self._validate(uploads)
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, len(uploads))
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, sum(upload.length for _, upload in uploads))
        self.stats.set_counter(COMMITTER_TASKS_COMPLETED, len(chosen))
        others = find_job_uploads(self, {upload.upload_id for _, upload in uploads if upload.upload_id})
        success = self._summary(sorted(relative for relative, _ in uploads))
        success.diagnostics.update(left_diagnostics(self, others))
        if self.config.mark_successful_jobs:
            self.write_bytes(self.paths.success_path, success.to_json())
        self.write_bytes(self.paths.commit_finished_path, success.to_json())  # the commit point
        arguments.outcome_recorded()
        aborted = len(abort_each(self, others.targets))
        self._cleanup()
        return UploadCommitJobResult(success, len(chosen), len(uploads), aborted)

    # --- steps ----------------------------------------------------------------------------------------------------

    def _load(self, accepted: Mapping[str, str] | None, statuses: list[FileStatus]) -> list[AttemptManifest]:
        with self.stats.track(JOB_STAGE_LOAD_MANIFESTS):
            loaded: list[AttemptManifest] = []

            def load(status: FileStatus) -> AttemptManifest | None:
                try:
                    return load_attempt_manifest(self, status)
                except ManifestError:
                    if accepted is None or self._accepts(accepted, status.path):
                        raise
                    log.warning("Ignoring the manifest %s of an attempt not accepted", self.to_url(status.path))
                    return None

            run_bounded(
                self.context.pool,
                statuses,
                load,
                max_in_flight=self.context.max_in_flight,
                on_result=lambda manifest: loaded.append(manifest) if manifest is not None else None,
            )
        chosen = choose_attempts(loaded, accepted, self.to_url(self.paths.manifest_dir))
        seen: dict[str, str] = {}
        for manifest in chosen:
            for relative, _ in manifest.uploads:
                if relative in seen:
                    raise ManifestError(
                        f"{self.to_url(UploadPaths(self.paths).destination_path(relative))}: claimed by tasks "
                        f"{seen[relative]} and {manifest.task_id}"
                    )
                seen[relative] = manifest.task_id
        self._refuse_files_under_files(seen)
        return chosen

    def _refuse_files_under_files(self, claims: Mapping[str, str]) -> None:
        """``ManifestError`` where one chosen file's path is a directory of another's (``a`` and ``a/b``): S3 would
        hold both, and a rerun would find its own ``a/`` in the way of ``a``."""
        for relative in sorted(claims):
            parent = posixpath.dirname(relative)
            while parent:
                if parent in claims:
                    raise ManifestError(
                        f"{self.to_url(UploadPaths(self.paths).destination_path(parent))}: a file of task "
                        f"{claims[parent]} and a directory of task {claims[relative]} (which writes {relative})"
                    )
                parent = posixpath.dirname(parent)

    @staticmethod
    def _accepts(accepted: Mapping[str, str], path: str) -> bool:
        """Whether the manifest at ``path`` is named after an accepted attempt."""
        name = path.rsplit("/", 1)[-1]
        return any(name == attempt + "-manifest.json" for attempt in accepted.values())

    def _complete(self, uploads: list[tuple[str, PendingUpload]]) -> None:
        """Complete every upload on the job pool; each completion is retried inside its unit of work.

        Each unit of work is a batch: its first requests go out together (``complete_uploads``: on the S3
        client's event loop, one hand-over for the batch), and only an upload whose request failed, or with a
        directory in its way, takes the one-by-one path, which settles it from evidence.
        """

        in_the_way = self._directories_at(upload.path for _, upload in uploads)

        def complete(item: tuple[str, PendingUpload]) -> None:
            _, upload = item
            if upload.path in in_the_way:
                if not self.config.delete_target_files:
                    raise OutputConflictError(
                        f"s3://{upload.path}: a directory (objects below the key) is where this job's file goes; "
                        "nothing was written (set mapreduce.manifest.committer.delete.target.files=true to replace it)"
                    )
                log.info("%s: deleting the directory s3://%s, which this job's file replaces", self.name, upload.path)
                self.delete_dir(upload.path)
            try:
                self.complete_upload(upload)
            except FileExistsError as error:
                if not self.config.delete_target_files:
                    raise OutputConflictError(
                        f"s3://{upload.path}: an object that is not this job's is already at the key; nothing "
                        "was overwritten (set mapreduce.manifest.committer.delete.target.files=true to replace it)"
                    ) from error
                log.info("%s: deleting s3://%s, which this job replaces", self.name, upload.path)
                self.delete_file(upload.path)
                self.complete_upload(upload)
            self.stats.increment(COMMITTER_COMMITS_COMPLETED)

        def complete_batch(batch: Sequence[tuple[str, PendingUpload]]) -> None:
            together = [upload for _, upload in batch if upload.path not in in_the_way]
            durations = DurationAccumulator(OP_COMPLETE_UPLOAD)
            try:
                outcomes = self.complete_uploads_fast(together, durations.record)
            finally:
                self.stats.add_accumulator(durations)
            settled = {
                upload.path for upload, outcome in zip(together, outcomes, strict=True) if isinstance(outcome, str)
            }
            self.stats.increment(COMMITTER_COMMITS_COMPLETED, len(settled))
            retried = sum(1 for outcome in outcomes if isinstance(outcome, Exception) and self.is_transient(outcome))
            if retried:  # the one-by-one path's retry policy counts only the retries after these
                self.stats.increment(STORE_IO_RETRY, retried)
            for item in batch:
                if item[1].path not in settled:
                    complete(item)

        # A batch's completions go out together, so io.threads bounds batches x their size: a quarter of the
        # threads' worth a batch, four batches at a time, never more calls in flight than io.threads.
        size = max(1, min(self.config.rename_batch_size, self.config.io_threads // BATCHES_IN_FLIGHT))
        in_flight = max(1, self.config.io_threads // size)
        run_bounded(self.context.pool, slices(uploads, size), complete_batch, max_in_flight=in_flight)

    def _directories_at(self, keys: Iterable[str]) -> set[str]:
        """The ``keys`` where a directory is (objects below ``key/``): one listing per parent directory, on the
        job pool, rather than one per file. This job's own completed objects (a rerun) are files, never in it."""
        wanted = set(keys)
        found: set[str] = set()
        run_bounded(
            self.context.pool,
            sorted({posixpath.dirname(key) for key in wanted}),
            lambda parent: [status.path for status in list_if_present(self, parent) if status.is_dir],
            max_in_flight=self.context.max_in_flight,
            on_result=lambda directories: found.update(wanted.intersection(directories)),
        )
        return found

    def _validate(self, uploads: list[tuple[str, PendingUpload]]) -> None:
        """Every completed object is in place with its recorded length, and is provably this job's."""
        with self.stats.track(JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT):

            def check(item: tuple[str, PendingUpload]) -> None:
                _, upload = item
                status = self.info(upload.path)
                if status is None or status.is_dir:
                    raise OutputValidationError(f"s3://{upload.path}: completed by the job but not in the store")
                if status.size != upload.length:
                    raise OutputValidationError(
                        f"s3://{upload.path}: {status.size} bytes in the store, {upload.length} at task commit"
                    )
                if self.holds(upload) is None:
                    raise OutputValidationError(f"s3://{upload.path}: the object at the key is not this upload's")

            run_bounded(self.context.pool, uploads, check, max_in_flight=self.context.max_in_flight)

    def _abort_others(self, keep: set[str]) -> int:
        """Abort every upload of this job still incomplete, bar ``keep``: those whose ids it recorded as it started
        them (``find_job_uploads``), never another writer's."""
        return len(abort_each(self, find_job_uploads(self, keep).targets))

    def _summary(self, committed: list[str]) -> SuccessData:
        success = SuccessData.create(self.paths.job_id, self.context.job_id_source, COMMITTER_COMMIT_JOB)
        success.committer = self._committer_name
        layout = UploadPaths(self.paths)
        success.filenames = [self.to_url(layout.destination_path(name)) for name in committed[:MAX_FILENAMES]]
        success.iostatistics = self.stats.snapshot()
        return success

    def _finish_committed(self, layout: UploadPaths, success: SuccessData) -> UploadCommitJobResult:
        """The commit point has passed (a rerun after a kill): abort what is left, clean up, return the summary."""
        aborted = 0
        if self.info(layout.protocol_file) is not None:
            # Every chosen upload is completed (S3 lists it no more; aborting its id does nothing): whatever is
            # still incomplete is another attempt's.
            aborted = self._abort_others(set())
        log.info("%s: job %s was already committed; finishing its cleanup", self.name, self.paths.job_id)
        self._cleanup()
        return UploadCommitJobResult(success, 0, len(success.filenames), aborted, already_committed=True)

    def _cleanup(self) -> CleanupResult:
        return clean_up_job(self, suppress_errors=self.config.cleanup_failures_ignored)
