"""UploadAbortJob: leave no incomplete upload of the job, revert what a partial job commit completed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...parallel import run_bounded
from ...statistic_names import JOB_STAGE_ABORT, OP_DELETE_FILE_UNDER_DESTINATION
from ...store.pending_upload import PendingUpload
from ..base import Stage
from ..cleanup import CleanupResult, clean_up_job
from ..journal import committed_summary, read_commit_record
from ..marker_reads import skipped_diagnostics
from .commit_job import choose_attempts
from .state import abort_each, find_job_uploads, load_attempt_manifest, manifest_statuses

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UploadAbortJobArguments:
    dry_run: bool = False
    """Decide everything an abort would do, change nothing (``UploadCommitter.plan_abort``)."""


@dataclass(frozen=True, slots=True)
class UploadAbortJobResult:
    committed: bool
    """The job's commit point had passed: its output was kept."""
    deleted: tuple[str, ...]
    """URLs of the objects a partial job commit had completed, deleted again (dry run: that would be)."""
    aborted: tuple[str, ...]
    """URLs of the keys whose incomplete uploads were aborted (dry run: that would be; one per upload)."""
    cleanup: CleanupResult | None
    """``None`` in a dry run."""
    left: tuple[str, ...] = ()
    """URLs of incomplete uploads left alone: at a key a marker of this job names, but not an upload this job
    recorded starting, so possibly another writer's (``stages/upload/state.find_job_uploads``)."""
    skipped: tuple[str, ...] = ()
    """Marker entries that were not markers of this job (crafted or damaged), each naming where and why."""

    @property
    def diagnostics(self) -> dict[str, str]:
        return skipped_diagnostics(self.skipped)

    @property
    def files_reverted(self) -> int:
        return len(self.deleted)


class UploadAbortJobStage(Stage[UploadAbortJobArguments, UploadAbortJobResult]):
    """Undo the job from its state alone (a fresh committer, the driver dead), then delete the state.

    Before the commit point (``_SUCCESS`` or ``commit-finished``): if a job commit began (``commit-started``),
    every object it may have completed is deleted when it is provably this job's (``S3Store.holds``: the
    writer's token and the multipart ETag), never otherwise. Then, committed or not, every incomplete upload of
    the job is aborted: every upload whose id the job recorded as it started it (``uploads/``), found by one
    listing of the destination's uploads, never another writer's, even at a key a (crafted) marker of this job
    names: such an upload is left and reported (``find_job_uploads``). Repeatable: a
    second abort finds nothing and succeeds. An object that ``delete.target.files`` replaced is not restored
    (S3 keeps no copy of it). A dry run makes the same decisions through the same calls, minus every change.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: UploadAbortJobArguments) -> UploadAbortJobResult:
        dry_run = arguments.dry_run
        committed = committed_summary(self) is not None
        deleted: list[str] = []
        if committed:
            log.info("%s: job %s is committed; keeping its output", self.name, self.paths.job_id)
        else:
            started = read_commit_record(self)
            if started is not None:
                deleted = self._revert(started.accepted, dry_run=dry_run)
        found = find_job_uploads(self, set())
        aborted = self._abort(found.targets, dry_run=dry_run)
        left = tuple(self.to_url(path) for path, _ in found.left)
        cleanup = None if dry_run else clean_up_job(self, suppress_errors=False)
        log.info(
            "%s: job %s: %d completed objects %sdeleted, %d incomplete uploads %saborted, %d left",
            self.name,
            self.paths.job_id,
            len(deleted),
            "would be " if dry_run else "",
            len(aborted),
            "would be " if dry_run else "",
            len(left),
        )
        return UploadAbortJobResult(committed, tuple(deleted), tuple(aborted), cleanup, left, found.skipped)

    def _abort(self, targets: tuple[tuple[str, str], ...], *, dry_run: bool) -> list[str]:
        if dry_run:
            return sorted(self.to_url(path) for path, _ in targets)
        return abort_each(self, targets)

    def _revert(self, accepted: dict[str, str], *, dry_run: bool) -> list[str]:
        """Delete the objects of the accepted attempts that the interrupted commit completed (dry run: list them)."""
        manifests = [load_attempt_manifest(self, status) for status in manifest_statuses(self)]
        chosen = choose_attempts(manifests, accepted, self.to_url(self.paths.manifest_dir))
        uploads = [upload for manifest in chosen for _, upload in manifest.uploads]
        deleted: list[str] = []

        def revert(upload: PendingUpload) -> str | None:
            if self.holds(upload) is None:
                return None  # not completed, or another writer's object: never ours to delete
            if dry_run:
                return self.to_url(upload.path)
            found = self.call(
                OP_DELETE_FILE_UNDER_DESTINATION, lambda: self.delete_file(upload.path, retry=False), upload.path
            )
            return self.to_url(upload.path) if found else None

        run_bounded(
            self.context.pool,
            uploads,
            revert,
            max_in_flight=self.context.max_in_flight,
            on_result=lambda url: deleted.append(url) if url else None,
        )
        return sorted(deleted)
