"""The ``upload`` protocol (S3): tasks write multipart uploads to the final keys; job commit completes them.

S3A's "magic" committer's idea with S3's conditional writes (CONTRACT §6). A task's ``task.fs`` records a write
marker for each key, then streams the file into a multipart upload of that key and leaves it incomplete, so
nothing is visible (``protocols/upload/task_fs.py``); each closed file's upload is recorded in ``pending/``. Task commit
saves one manifest per attempt holding the uploads (``pendingUploads``), with ``put_if_absent``. Job commit
chooses one attempt per task, completes the chosen uploads with ``If-None-Match: *`` in parallel, writes
``_SUCCESS`` (the commit point), then aborts every other incomplete upload of the job (found through the
records and the markers) and deletes the job's state (``stages/upload/commit_job.py``). Abort and rollback work
from the state alone, in any process, after the driver died (``stages/upload/abort_job.py``).

Job state layout: ``protocols/upload/records.py``. The driver's side of the markers (server or heartbeat) is ``JobMarkers``'s,
as for the transactional protocol.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from typing import Any

from ...errors import ManifestError, UnsupportedStoreError
from ...iostatistics import StatisticsStore
from ...manifest import TaskManifest
from ...paths import check_id
from ...stages.upload.abort_job import UploadAbortJobArguments, UploadAbortJobResult, UploadAbortJobStage
from ...stages.upload.abort_task import UploadAbortTaskArguments, UploadAbortTaskStage
from ...stages.upload.commit_job import UploadCommitJobArguments, UploadCommitJobStage
from ...stages.upload.commit_task import UploadCommitTaskArguments, UploadCommitTaskStage
from ...stages.upload.setup_job import UploadSetupJobArguments, UploadSetupJobStage
from ...statistic_names import JOB_STAGE_ABORT
from ...store import StoreOperations
from ...store.factory import S3_PROTOCOLS, _protocol_of
from ...store.pending_upload import PendingUpload
from ...store.s3 import UploadStore, open_s3_store
from ...success_data import SuccessData
from ..base import TaskAttempt
from ..marker_protocol import MarkerProtocolCommitter
from .records import PendingRecord, UploadPaths
from .task_fs import UploadWriteFileSystem

log = logging.getLogger(__name__)


class UploadCommitter(MarkerProtocolCommitter[PendingUpload]):
    """The ``upload`` protocol on the shared seam; see the module. S3 (``s3://``, ``s3a://``) only. Its register
    maps each file the attempt closed (task-side relative path) to its pending upload."""

    protocol = "upload"
    committer_name = "upload"

    def _init_protocol(self) -> None:
        super()._init_protocol()
        self.layout = UploadPaths(self.paths)

    @classmethod
    def _open_store(cls, destination: str, storage_options: dict[str, Any]) -> tuple[StoreOperations, str]:
        if _protocol_of(destination) not in S3_PROTOCOLS:
            raise UnsupportedStoreError(
                f"{destination}: the upload protocol needs S3 (s3:// or s3a://): it publishes files by completing "
                "S3 multipart uploads; use protocol 'manifest' (or 'auto') on other stores"
            )
        return open_s3_store(destination, storage_options)

    def job_is_live(self) -> bool:
        """Set up (its ``protocol`` sign in place) and not yet committed."""
        return (
            self._store.info(self.layout.protocol_file) is not None
            and self._store.info(self.paths.commit_finished_path) is None
        )

    def job_state_directories(self) -> list[str]:
        return [self.paths.job_attempt_dir, self.paths.job_dir]

    # --- job ------------------------------------------------------------------------------------------------------

    def setup_job(self) -> None:
        """Write the job's ``protocol`` sign, then start the driver's side of the markers."""
        UploadSetupJobStage(self._context(self._job_stats)).apply(UploadSetupJobArguments())
        self._markers.start()

    def commit_job(self, accepted_attempts: Mapping[str, str] | None = None) -> SuccessData:
        """Complete the chosen attempts' uploads, write ``_SUCCESS``, abort every other upload of the job.

        ``accepted_attempts`` (task id -> attempt id) commits exactly those attempts; without it, each task's
        attempt whose manifest was saved first (earliest modification time, ties to the smallest attempt id).
        Repeatable after a kill at any point; after the commit point a rerun only finishes the cleanup.
        """
        start = time.perf_counter()
        self._markers.stop()
        arguments = UploadCommitJobArguments(self.committer_name, accepted_attempts)
        result, context = self._run_job_call(
            lambda context: UploadCommitJobStage(context).apply(arguments), overwrite_report=True
        )
        if not result.already_committed:
            report = SuccessData.from_json(result.success.to_json())
            report.iostatistics = context.stats.snapshot()
            self._save_report(report, overwrite=True)
        log.info(
            "Job %s (upload) completed %d uploads of %d tasks into %s in %.3f s; %d other uploads aborted",
            self.job_id,
            result.files_committed,
            result.tasks_committed,
            self.destination_url,
            time.perf_counter() - start,
            result.uploads_aborted,
        )
        return result.success

    def abort_job(self) -> UploadAbortJobResult:
        """Abort every incomplete upload of the job and delete its state; before the commit point, also delete
        the objects an interrupted commit completed (proved this job's). A second call does nothing."""
        self._markers.stop()
        result, context = self._run_job_call(
            lambda context: UploadAbortJobStage(context).apply(UploadAbortJobArguments()), overwrite_report=False
        )
        self._save_abort_report(context, JOB_STAGE_ABORT)
        return result

    def plan_abort(self) -> UploadAbortJobResult:
        """What ``abort_job`` would do now, decided by the same stage with every change left out (a dry run): the
        objects of a partial commit it would delete, the incomplete uploads it would abort. Writes nothing, not
        even a failure report."""
        with self._job_pool() as pool:
            return UploadAbortJobStage(self._context(StatisticsStore(), pool)).apply(
                UploadAbortJobArguments(dry_run=True)
            )

    # --- tasks ----------------------------------------------------------------------------------------------------

    def task_attempt(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """The attempt's ``TaskAttempt``: ``fs`` writes pending uploads to the final keys (``upload_write_fs``)."""
        check_id("task id", task_id)
        check_id("task attempt id", attempt_id)
        work_path = self.task_work_path(attempt_id)
        uploads = self._register(attempt_id)
        fs = UploadWriteFileSystem(
            self._store.data_fs,
            work_path=work_path,
            destination=self.paths.dest,
            record_marker=self._markers.client(attempt_id).create,
            uploads=uploads,
            save_record=functools.partial(self._save_record, attempt_id),
            discard=functools.partial(self._discard, attempt_id),
        )
        return TaskAttempt(task_id, attempt_id, work_path, fs, self._store.to_url(work_path))

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

    def _discard(self, attempt_id: str, relative: str, pending: PendingUpload) -> None:
        """Abort an upload the attempt replaced or removed, and delete its record."""
        store, retry = self._uploads_store(), self._task_context(attempt_id).store_retry
        if pending.upload_id is not None:
            upload_id = pending.upload_id
            retry.call(lambda: store.abort_upload(pending.path, upload_id), f"abort {pending.path}")
        path = self.layout.record_path(attempt_id, pending.token or pending.key)
        retry.call(lambda: self._store.delete_file(path), f"delete {path}")

    def commit_task(self, task: TaskAttempt, outputs: Mapping[str, str] | None = None) -> TaskManifest:
        """Save the attempt's manifest with its pending uploads; nothing becomes visible until job commit.

        ``outputs`` selects files (paths relative to ``work_path``, each mapped to itself: nothing is renamed).
        An attempt that wrote through another committer object (another process) is found through its records.
        """
        uploads = self._registered(task.attempt_id)
        try:
            result = UploadCommitTaskStage(self._task_context(task.attempt_id)).apply(
                UploadCommitTaskArguments(task.task_id, task.attempt_id, uploads, outputs)
            )
        except BaseException:
            log.error("Commit of task attempt %s of job %s (upload) failed", task.attempt_id, self.job_id)
            raise
        return result.manifest

    def abort_task(self, task: TaskAttempt) -> None:
        """Abort the attempt's uploads (by id: never another attempt's at the same key); forget its manifest."""
        uploads = self._forget(task.attempt_id)
        closed = [upload for _, upload in uploads.clear()] if uploads is not None else None
        UploadAbortTaskStage(self._task_context(task.attempt_id)).apply(
            UploadAbortTaskArguments(task.attempt_id, closed)
        )
