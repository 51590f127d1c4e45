"""UploadAbortTask: abort one attempt's uploads, by their ids, and forget its records and manifest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...protocols.upload.records import UploadPaths
from ...statistic_names import TASK_STAGE_ABORT_TASK
from ...store.pending_upload import PendingUpload
from ..base import Stage
from .state import list_if_present, read_attempt_records


@dataclass(frozen=True, slots=True)
class UploadAbortTaskArguments:
    task_attempt_id: str
    uploads: Sequence[PendingUpload] | None
    """The attempt's closed files in this process; ``None``: read its ``.pending`` records (another process)."""


class UploadAbortTaskStage(Stage[UploadAbortTaskArguments, int]):
    """Abort each upload of the attempt by its upload id (never every upload at the key: a speculative copy of
    the task writes the same key), then delete the attempt's records and its manifest, if it committed.

    Returns how many uploads were aborted. The attempt's markers stay: the job commit aborts every upload at a
    marked key that no accepted attempt owns, so an upload started after this abort goes too.
    """

    name = TASK_STAGE_ABORT_TASK

    def execute(self, arguments: UploadAbortTaskArguments) -> int:
        layout = UploadPaths(self.paths)
        attempt = arguments.task_attempt_id
        uploads = list(arguments.uploads) if arguments.uploads is not None else []
        uploads.extend(record.upload for record in read_attempt_records(self, layout, attempt))
        ids = sorted({(upload.path, upload.upload_id) for upload in uploads if upload.upload_id is not None})
        aborted = sum(self.abort_upload(path, upload_id) for path, upload_id in ids)
        for status in list_if_present(self, layout.attempt_pending_dir(attempt)):
            self.delete_file(status.path)
        self.delete_file(layout.attempt_manifest(attempt))
        return aborted
