"""The ``upload`` protocol's job state and records: where they live and what a record may name.

Layout under the job attempt directory ``$dest/_temporary/$jobId/$NN/``::

    protocol                                   "upload": the sign that this job is an upload job (status, CLI)
    markers/...                                the write markers (docs/markers.md), one per final key
    uploads/$name                              one record per multipart upload the job started, written as S3 creates
                                               it and before its first part: the ids abort may abort (``$name`` is
                                               the upload id in URL-safe base64, or ``h-<sha256>`` for a long one)
    pending/$taskAttemptId/$token.pending      one record per closed file of an attempt (S3A's ``.pending``)
    manifests/$taskAttemptId-manifest.json     one manifest per committed ATTEMPT (two attempts of one task may
                                               both commit; job commit chooses one per task)
    commit-started, commit-finished            the journal records every protocol shares

Every file here is written with ``put_if_absent`` (S3 has no rename) and is untrusted input when read back:
``PendingRecord.from_json`` and ``admit_upload`` are the one place that decides what a record or a manifest's
``pendingUploads`` may name (this job, this attempt, a key inside the destination that equals its file entry).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import posixpath
from dataclasses import dataclass

from ..._json import dump_json, load_json_document
from ...admission import destination_relative_problem
from ...errors import ManifestError
from ...paths import JobPaths
from ...store.pending_upload import PendingUpload

log = logging.getLogger(__name__)

PROTOCOL_FILE = "protocol"
UPLOAD_PROTOCOL = "upload"
STARTED_DIR = "uploads"
STARTED_TYPE = "manifest-committer/upload-started/1"
MAX_ENCODED_ID = 700
"""Longest upload id, base64-encoded, that names its record itself (S3 keys hold at most 1024 bytes)."""
PENDING_DIR = "pending"
PENDING_SUFFIX = ".pending"
ATTEMPT_MANIFEST_SUFFIX = "-manifest.json"
RECORD_TYPE = "manifest-committer/pending-upload/1"


@dataclass(frozen=True, slots=True)
class UploadPaths:
    """The upload protocol's paths of one job attempt, in the store's own (decoded) form."""

    job: JobPaths

    @property
    def protocol_file(self) -> str:
        return posixpath.join(self.job.job_attempt_dir, PROTOCOL_FILE)

    @property
    def started_dir(self) -> str:
        return posixpath.join(self.job.job_attempt_dir, STARTED_DIR)

    def started_record(self, upload_id: str) -> str:
        return posixpath.join(self.started_dir, started_record_name(upload_id))

    @property
    def pending_dir(self) -> str:
        return posixpath.join(self.job.job_attempt_dir, PENDING_DIR)

    def attempt_pending_dir(self, attempt_id: str) -> str:
        return posixpath.join(self.pending_dir, attempt_id)

    def record_path(self, attempt_id: str, token: str) -> str:
        return posixpath.join(self.attempt_pending_dir(attempt_id), token + PENDING_SUFFIX)

    def attempt_manifest(self, attempt_id: str) -> str:
        return posixpath.join(self.job.manifest_dir, attempt_id + ATTEMPT_MANIFEST_SUFFIX)

    def destination_path(self, relative: str) -> str:
        return posixpath.join(self.job.dest, relative)


def started_record_name(upload_id: str) -> str:
    """The name of the record of upload ``upload_id``: the id itself, URL-safe base64 without padding, so that one
    listing yields every id the job started; a very long id is named by its digest (its record then holds it)."""
    encoded = base64.urlsafe_b64encode(upload_id.encode("utf-8")).decode("ascii").rstrip("=")
    if len(encoded) <= MAX_ENCODED_ID:
        return encoded
    return "h-" + hashlib.sha256(upload_id.encode("utf-8")).hexdigest()


def upload_id_of_record(name: str) -> str | None:
    """The upload id a started record's name holds, or ``None`` for a digest name (or a name that is none)."""
    if name.startswith("h-") or not name or len(name) > MAX_ENCODED_ID:
        return None
    try:
        return base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def started_record(job_id: str, attempt_id: str, bucket: str, key: str, upload_id: str) -> bytes:
    """What a started record holds, for people and for ids too long to name their record."""
    return dump_json(
        {
            "type": STARTED_TYPE,
            "jobId": job_id,
            "taskAttemptID": attempt_id,
            "bucket": bucket,
            "key": key,
            "uploadId": upload_id,
        }
    )


def started_record_id(data: bytes, origin: str, job_id: str) -> str:
    """The upload id of a started record named by a digest; ``ManifestError`` naming ``origin`` if it is not
    one of this job's."""
    document = load_json_document(data, origin)
    if not isinstance(document, dict) or document.get("type") != STARTED_TYPE:
        raise ManifestError(f"{origin}: not a started-upload record (field 'type' must be {STARTED_TYPE!r})")
    if document.get("jobId") != job_id:
        raise ManifestError(f"{origin}: field 'jobId' is {document.get('jobId')!r}, not {job_id!r}")
    upload_id = document.get("uploadId")
    if not isinstance(upload_id, str) or not upload_id:
        raise ManifestError(f"{origin}: field 'uploadId' must be a non-empty string")
    return upload_id


def relative_key(paths: JobPaths, upload: PendingUpload) -> str | None:
    """``upload``'s path relative to the destination, or ``None`` if it lies outside it or in its ``_temporary``."""
    prefix = paths.dest.rstrip("/") + "/"
    if not upload.path.startswith(prefix):
        return None
    relative = upload.path[len(prefix) :]
    return relative if destination_relative_problem(relative) is None else None


def admit_upload(paths: JobPaths, upload: PendingUpload, dest_path: str, origin: str, field: str) -> str:
    """The destination-relative path of a recorded upload, if it publishes exactly ``dest_path`` inside the
    destination; ``ManifestError`` naming ``origin`` and ``field`` otherwise."""
    relative = relative_key(paths, upload)
    if relative is None:
        raise ManifestError(
            f"{origin}: {field}: s3://{upload.path} lies outside the destination (or in its _temporary directory)"
        )
    if upload.path != dest_path:
        raise ManifestError(f"{origin}: {field}: s3://{upload.path} is not the key of its file entry ({dest_path})")
    return relative


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """One closed file of a task attempt, saved as ``pending/<attempt>/<token>.pending`` as the file closes, so a
    task commit or abort in another process (a fresh committer) finds it."""

    job_id: str
    task_attempt_id: str
    relative: str
    """The file's path relative to the destination (and to the attempt's ``work_path``)."""
    upload: PendingUpload

    def to_json(self) -> bytes:
        return dump_json(
            {
                "type": RECORD_TYPE,
                "jobId": self.job_id,
                "taskAttemptID": self.task_attempt_id,
                "relative": self.relative,
                "upload": self.upload.to_dict(),
            }
        )

    @classmethod
    def from_json(cls, data: bytes, origin: str, paths: JobPaths, attempt_id: str) -> PendingRecord:
        """Read a record of ``attempt_id`` of this job; ``ManifestError`` naming ``origin`` and the bad field."""
        document = load_json_document(data, origin)
        if not isinstance(document, dict) or document.get("type") != RECORD_TYPE:
            raise ManifestError(f"{origin}: not a pending-upload record (field 'type' must be {RECORD_TYPE!r})")
        if document.get("jobId") != paths.job_id:
            raise ManifestError(f"{origin}: field 'jobId' is {document.get('jobId')!r}, not {paths.job_id!r}")
        if document.get("taskAttemptID") != attempt_id:
            raise ManifestError(
                f"{origin}: field 'taskAttemptID' is {document.get('taskAttemptID')!r}, not {attempt_id!r}"
            )
        relative = document.get("relative")
        if not isinstance(relative, str) or destination_relative_problem(relative) is not None:
            raise ManifestError(f"{origin}: field 'relative' is not a path inside the destination: {relative!r}")
        upload = PendingUpload.from_dict(document.get("upload"), f"{origin}: upload")
        admit_upload(paths, upload, posixpath.join(paths.dest, relative), origin, "upload")
        return cls(paths.job_id, attempt_id, relative, upload)


__all__ = [
    "PROTOCOL_FILE",
    "STARTED_DIR",
    "UPLOAD_PROTOCOL",
    "PendingRecord",
    "UploadPaths",
    "admit_upload",
    "relative_key",
    "started_record",
    "started_record_id",
    "started_record_name",
    "upload_id_of_record",
]
