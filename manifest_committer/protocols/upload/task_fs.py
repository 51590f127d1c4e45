"""A task attempt's filesystem under the ``upload`` protocol: each file is a multipart upload to its final key.

A task writes as under every protocol, ``task.fs.open(task.work_path + "/year=2024/part-0.parquet", "wb")``.
The file goes to ``<dest>/year=2024/part-0.parquet`` as a multipart upload (``store/pending_upload.py``) that
stays incomplete, hence invisible, until the job commit completes it. Before the upload starts, a write marker
names the key (the same machinery as the transactional protocol), so job commit and rollback find every upload
this attempt may have started without listing the bucket's uploads blindly. When the file closes, its
``PendingUpload`` is saved as a ``.pending`` record in the job's state (``protocols/upload/records.py``), so that a task
commit or abort from a fresh committer in another process finds it, and kept in the in-process ``AttemptUploads`` too.

Names are refused as under the transactional protocol (``direct_write_fs``): outside ``work_path``, hidden
``_``/``.`` names, ``.``/``..`` segments, appends, copies and renames. A file cannot be read back before job
commit (its bytes are parts of an incomplete upload); ``info`` and ``ls`` answer from the registry.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from typing import Any

from ...errors import CommitterError
from ...store.pending_upload import PendingUpload, PendingUploadWriter
from ..direct_write_fs import WRITE_MODES, AttemptFiles, AttemptRegister, DirectWriteFileSystem

log = logging.getLogger(__name__)

AttemptUploads = AttemptRegister[PendingUpload]
"""The closed files of one task attempt in this process: task-side relative path -> ``PendingUpload``."""


class RecordingWriter(PendingUploadWriter):
    """A ``PendingUploadWriter`` that hands its ``PendingUpload`` to ``on_close`` once the file is closed."""

    def __init__(
        self,
        fs: Any,
        path: str,
        on_close: Callable[[PendingUpload], None],
        *,
        block_size: int | None = None,
        on_started: Callable[[str, str, str], None] | None = None,
    ) -> None:
        super().__init__(fs, path, block_size=block_size, on_started=on_started)
        self._on_close = on_close

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        self._on_close(self.pending)

    def __del__(self) -> None:
        """A writer dropped unclosed is no finished file: nothing is recorded (``IOBase`` would close it). Its
        upload stays incomplete; the job's marker names the key, so job commit and abort find it."""


class UploadWriteFileSystem(DirectWriteFileSystem):
    """The ``task.fs`` of one upload task attempt; see the module.

    ``save_record(relative, pending)`` persists a closed file's record; ``discard(relative, pending)`` aborts an
    upload the attempt replaced or removed and deletes its record; ``record_started(bucket, key, upload_id)``
    records an upload as S3 creates it, before its first part (the ids a job's abort may abort).
    """

    protocol = "mc-upload-write"
    protocol_name = "upload"

    def __init__(
        self,
        target: Any,
        *,
        work_path: str,
        destination: str,
        record_marker: Callable[[str], object],
        uploads: AttemptUploads,
        save_record: Callable[[str, PendingUpload], None],
        discard: Callable[[str, PendingUpload], None],
        record_started: Callable[[str, str, str], None] | None = None,
        separator_aliases: str = "",
        kept_name: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(
            target,
            work_path=work_path,
            destination=destination,
            final_name=lambda name: name,
            record_marker=record_marker,
            files=AttemptFiles(),
            make_parents=False,
            separator_aliases=separator_aliases,
            kept_name=kept_name,
        )
        self.uploads = uploads
        self.save_record = save_record
        self.discard = discard
        self.record_started = record_started

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Any = None,
        autocommit: bool = True,
        cache_options: Any = None,
        **kwargs: Any,
    ) -> Any:
        relative = self.relative(path)
        if not WRITE_MODES & set(mode):
            raise CommitterError(
                f"{path}: an upload task cannot read its files back before job commit (they are incomplete uploads)"
            )
        if "a" in mode or "+" in mode:
            raise CommitterError(f"{path}: an upload task creates new files only (mode {mode!r})")
        earlier = self.uploads.pop(relative)
        if earlier is not None:  # the attempt writes this file again: its first upload must never be completed
            self.discard(relative, earlier)
        self.record_marker(relative)  # durable before the upload starts: abort and rollback must find it
        self.files.add(relative, relative)

        def closed(pending: PendingUpload) -> None:
            try:
                self.save_record(relative, pending)
            except BaseException:
                log.warning("Aborting the upload of %s: its record could not be saved", path)
                try:
                    self.discard(relative, pending)
                except Exception as error:  # the marker still names the key: job commit or abort finds it
                    log.warning("Could not abort the upload of %s: %s", path, error)
                raise
            self.uploads.add(relative, pending)

        return RecordingWriter(
            self.target,
            posixpath.join(self.destination, relative),
            closed,
            block_size=block_size,
            on_started=self.record_started,
        )

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        relative = "" if path == self.work_path else self.relative(path)
        if relative:
            upload = self.uploads.get(relative)
            if upload is not None:
                return {"name": path, "size": upload.length, "type": "file"}
            if self.files.get(relative) is not None:
                return {"name": path, "size": 0, "type": "file"}  # still open
        if relative == "" or self._directory_listing(relative):
            return {"name": path, "size": 0, "type": "directory"}
        raise FileNotFoundError(path)

    def _rm(self, path: str) -> None:
        relative = self.relative(path)
        upload = self.uploads.pop(relative)
        if upload is None:
            raise FileNotFoundError(path)
        self.discard(relative, upload)
        self.files.remove(relative)
