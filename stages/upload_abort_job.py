"""UploadAbortJob: leave no incomplete upload of the job, revert what a partial job commit completed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..parallel import run_bounded
from ..statistic_names import JOB_STAGE_ABORT, OP_DELETE_FILE_UNDER_DESTINATION
from ..store.pending_upload import PendingUpload
from ..uploads import UploadPaths
from .base import Stage
from .cleanup import CleanupResult, clean_up_job
from .journal import committed_summary, read_commit_record
from .upload_commit_job import choose_attempts
from .upload_state import abort_uploads, every_recorded_upload, load_attempt_manifest, manifest_statuses

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UploadAbortJobArguments:
    pass


@dataclass(frozen=True, slots=True)
class UploadAbortJobResult:
    committed: bool
    """The job's commit point had passed: its output was kept."""
    deleted: tuple[str, ...]
    """URLs of the objects a partial job commit had completed, deleted again."""
    aborted: tuple[str, ...]
    """URLs of the keys whose incomplete uploads were aborted."""
    cleanup: CleanupResult | None

    @property
    def files_reverted(self) -> int:
        return len(self.deleted)


class UploadAbortJobStage(Stage[UploadAbortJobArguments, UploadAbortJobResult]):
    """Undo the job from its state alone (a fresh committer, the driver dead), then delete the state.

    Before the commit point (``_SUCCESS`` or ``commit-finished``): if a job commit began (``commit-started``),
    every object it may have completed is deleted when it is provably this job's (``S3Store.holds``: the
    writer's token and the multipart ETag), never otherwise. Then, committed or not, every incomplete upload of
    the job is aborted: those its records and manifests name, and every upload at a key its markers name.
    Repeatable: a second abort finds nothing and succeeds. An object that ``delete.target.files`` replaced is
    not restored (S3 keeps no copy of it).
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: UploadAbortJobArguments) -> UploadAbortJobResult:
        layout = UploadPaths(self.paths)
        committed = committed_summary(self) is not None
        deleted: list[str] = []
        if committed:
            log.info("%s: job %s is committed; keeping its output", self.name, self.paths.job_id)
        else:
            started = read_commit_record(self)
            if started is not None:
                deleted = self._revert(started.accepted)
        aborted = abort_uploads(self, every_recorded_upload(self, layout, strict=False), set())
        cleanup = clean_up_job(self, suppress_errors=False)
        log.info(
            "%s: job %s: %d completed objects deleted, %d incomplete uploads aborted",
            self.name,
            self.paths.job_id,
            len(deleted),
            len(aborted),
        )
        return UploadAbortJobResult(committed, tuple(deleted), tuple(aborted), cleanup)

    def _revert(self, accepted: dict[str, str]) -> list[str]:
        """Delete the objects of the accepted attempts that the interrupted commit completed."""
        manifests = [load_attempt_manifest(self, status) for status in manifest_statuses(self)]
        chosen = choose_attempts(manifests, accepted, self.to_url(self.paths.manifest_dir))
        uploads = [upload for manifest in chosen for _, upload in manifest.uploads]
        deleted: list[str] = []

        def revert(upload: PendingUpload) -> str | None:
            if self.holds(upload) is None:
                return None  # not completed, or another writer's object: never ours to delete
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
