"""The ``upload`` protocol (S3): tasks write multipart uploads to the final keys; job commit completes them.

S3A's "magic" committer's idea with S3's conditional writes (docs/protocols.md). A task's ``task.fs`` records a write
marker for each key, then streams the file into a multipart upload of that key and leaves it incomplete, so
nothing is visible (``protocols/upload/task_fs.py``); each closed file's upload is recorded in ``pending/``. Task commit
saves one manifest per attempt holding the uploads (``pendingUploads``), with ``put_if_absent``. Job commit
chooses one attempt per task, completes the chosen uploads with ``If-None-Match: *`` in parallel, writes
``_SUCCESS`` (the commit point), then aborts every other incomplete upload of the job (found through the
records and the markers) and deletes the job's state (``stages/upload/commit_job.py``). Abort and rollback work
from the state alone, in any process, after the driver died (``stages/upload/abort_job.py``).

Job state layout: ``protocols/upload/records.py``. The driver's side of the markers (server or heartbeat) is
``JobMarkers``'s, as for the transactional protocol.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import ManifestError, UnsupportedStoreError
from ...stages.upload.abort_job import UploadAbortJobArguments, UploadAbortJobResult, UploadAbortJobStage
from ...stages.upload.abort_task import UploadAbortTaskArguments, UploadAbortTaskStage
from ...stages.upload.commit_job import UploadCommitJobArguments, UploadCommitJobResult, UploadCommitJobStage
from ...stages.upload.commit_task import UploadCommitTaskArguments, UploadCommitTaskStage
from ...stages.upload.setup_job import UploadSetupJobArguments, UploadSetupJobStage
from ...store import OpenedStore
from ...store.pending_upload import PendingUpload
from ...store.registry import store_bindings
from ...store.s3 import UploadStore
from ..base import TaskAttempt
from ..marker_protocol import MarkerProtocolCommitter
from ..names import ProtocolName
from .records import PendingRecord, UploadPaths, started_record
from .task_fs import UploadWriteFileSystem


class UploadCommitter(MarkerProtocolCommitter[PendingUpload, UploadCommitJobResult, UploadAbortJobResult]):
    """The ``upload`` protocol on the shared seam; see the module. S3 (``s3://``, ``s3a://``) only. Its register
    maps each file the attempt closed (task-side relative path) to its pending upload."""

    protocol = ProtocolName.UPLOAD
    committer_name = "upload"
    setup_job_stage = UploadSetupJobStage
    commit_task_stage = UploadCommitTaskStage
    abort_task_stage = UploadAbortTaskStage
    commit_job_stage = UploadCommitJobStage
    abort_job_stage = UploadAbortJobStage
    job_commit_makes_batches = True

    def _init_protocol(self) -> None:
        super()._init_protocol()
        self.layout = UploadPaths(self.paths)

    @classmethod
    def _open_store(cls, destination: str, storage_options: dict[str, Any]) -> OpenedStore:
        """A store whose binding declares ``pending_uploads`` (S3), refused otherwise before it is opened."""
        binding = store_bindings().binding_for(destination)
        if binding.opener is not None and (binding.capabilities is None or not binding.capabilities.pending_uploads):
            raise UnsupportedStoreError(
                f"{destination}: the upload protocol needs S3 (s3:// or s3a://), or a store whose binding declares "
                f"pending_uploads, and the {binding.name} store has none: it publishes files by completing S3 "
                "multipart uploads; use protocol 'manifest' (or 'auto') on other stores"
            )
        return binding.open(destination, storage_options)

    def job_is_live(self) -> bool:
        """Set up (its ``protocol`` sign in place) and not yet committed."""
        return (
            self._store.info(self.layout.protocol_file) is not None
            and self._store.info(self.paths.commit_finished_path) is None
        )

    def job_state_directories(self) -> list[str]:
        return [self.paths.job_attempt_dir, self.paths.job_dir]

    # --- job ------------------------------------------------------------------------------------------------------

    def _setup_job_arguments(self) -> UploadSetupJobArguments:
        """Write the job's ``protocol`` sign; the driver's side of the markers starts after it."""
        return UploadSetupJobArguments()

    def _commit_job_arguments(
        self, accepted_attempts: Mapping[str, str] | None, progress: Callable[[int, int], None] | None
    ) -> UploadCommitJobArguments:
        """Complete the chosen attempts' uploads, write ``_SUCCESS``, abort every other upload of the job.

        Without ``accepted_attempts``, each task's attempt whose manifest was saved first (earliest modification
        time, ties to the smallest attempt id) is chosen. Repeatable after a kill at any point; after the commit
        point a rerun only finishes the cleanup. Each file is one call, so ``progress`` is not called.
        """
        return UploadCommitJobArguments(self.committer_name, accepted_attempts, self._outcome_recorded)

    def _abort_job_arguments(self, *, dry_run: bool = False) -> UploadAbortJobArguments:
        """Abort every incomplete upload of the job and delete its state; before the commit point, also delete
        the objects an interrupted commit completed (proved this job's). A second call does nothing."""
        return UploadAbortJobArguments(dry_run=dry_run)

    # --- tasks ----------------------------------------------------------------------------------------------------

    def _task_fs(self, attempt_id: str, work_path: str) -> Any:
        """``fs`` writes pending uploads to the final keys (``upload/task_fs.py``), each behind its marker."""
        return UploadWriteFileSystem(
            self._store.data_fs,
            work_path=work_path,
            destination=self.paths.dest,
            record_marker=self._markers.client(attempt_id).create,
            uploads=self._register(attempt_id),
            save_record=functools.partial(self._save_record, attempt_id),
            discard=functools.partial(self._discard, attempt_id),
            record_started=functools.partial(self._record_started, attempt_id),
            separator_aliases=self._store.capabilities.separator_aliases,
            kept_name=self._store.capabilities.kept_name,
        )

    def _uploads_store(self) -> UploadStore:
        store = self._store
        if not isinstance(store, UploadStore):  # pragma: no cover - _open_store gives an S3Store
            raise UnsupportedStoreError(f"{self.destination_url}: not an S3 store")
        return store

    def _save_record(self, attempt_id: str, relative: str, pending: PendingUpload) -> None:
        """Save a closed file's ``.pending`` record (``put_if_absent``; after a lost answer, the same bytes)."""
        record = PendingRecord(self.job_id, attempt_id, relative, pending)
        path = self.layout.record_path(attempt_id, pending.token or pending.key)
        data = record.to_json()
        store, retry = self._uploads_store(), self._task_context(attempt_id).store_retry
        try:
            retry.call(lambda: store.put_if_absent(path, data), f"save {path}")
        except FileExistsError:
            found = retry.call(lambda: self._store.read_bytes(path), f"read {path}")
            if found != data:
                raise ManifestError(f"{self._store.to_url(path)}: a different record is already saved") from None

    def _record_started(self, attempt_id: str, bucket: str, key: str, upload_id: str) -> None:
        """Record an upload the attempt started, as S3 created it: a job aborts only the uploads it recorded."""
        path = self.layout.started_record(upload_id)
        data = started_record(self.job_id, attempt_id, bucket, key, upload_id)
        retry = self._task_context(attempt_id).store_retry
        retry.call(lambda: self._store.write_bytes(path, data), f"save {path}")

    def _discard(self, attempt_id: str, relative: str, pending: PendingUpload) -> None:
        """Abort an upload the attempt replaced or removed, and delete its record."""
        store, retry = self._uploads_store(), self._task_context(attempt_id).store_retry
        if pending.upload_id is not None:
            upload_id = pending.upload_id
            retry.call(lambda: store.abort_upload(pending.path, upload_id), f"abort {pending.path}")
        path = self.layout.record_path(attempt_id, pending.token or pending.key)
        retry.call(lambda: self._store.delete_file(path), f"delete {path}")

    def _commit_task_arguments(self, task: TaskAttempt, outputs: Mapping[str, str] | None) -> UploadCommitTaskArguments:
        """Save the attempt's manifest with its pending uploads; nothing becomes visible until job commit.

        ``outputs`` selects files (paths relative to ``work_path``, each mapped to itself: nothing is renamed).
        An attempt that wrote through another committer object (another process) is found through its records.
        """
        return UploadCommitTaskArguments(task.task_id, task.attempt_id, self._registered(task.attempt_id), outputs)

    def _abort_task_arguments(self, task: TaskAttempt) -> UploadAbortTaskArguments:
        """Abort the attempt's uploads (by id: never another attempt's at the same key); forget its manifest."""
        uploads = self._forget(task.attempt_id)
        closed = [upload for _, upload in uploads.clear()] if uploads is not None else None
        return UploadAbortTaskArguments(task.attempt_id, closed)
