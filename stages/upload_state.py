"""What the upload protocol's job commit and aborts read back from the job's state, and how they abort uploads.

Shared by ``upload_commit_task``, ``upload_abort_task``, ``upload_commit_job`` and ``upload_abort_job``; every
store call goes through the stage gate. Records and manifests are untrusted (``uploads.py`` admits them).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ManifestError
from ..manifest import TaskManifest
from ..markers.layout import MarkerPaths
from ..parallel import run_bounded
from ..statistic_names import COMMITTER_COMMITS_ABORTED, OP_LOAD_FILE, OP_LOAD_MANIFEST
from ..store import FileStatus
from ..store.pending_upload import PendingUpload
from ..uploads import ATTEMPT_MANIFEST_SUFFIX, PENDING_SUFFIX, PendingRecord, UploadPaths, admit_upload
from .base import Stage

log = logging.getLogger(__name__)

Gate = Stage[Any, Any]


def list_if_present(gate: Gate, path: str) -> list[FileStatus]:
    """The children of ``path``; none if it does not exist (on S3, a prefix without objects)."""
    try:
        return gate.list_dir(path)
    except FileNotFoundError:
        return []


def read_attempt_records(gate: Gate, layout: UploadPaths, attempt_id: str) -> list[PendingRecord]:
    """Every ``.pending`` record of one attempt, admitted (``ManifestError`` naming the file and field)."""
    records = []
    for status in list_if_present(gate, layout.attempt_pending_dir(attempt_id)):
        if status.is_dir or not status.path.endswith(PENDING_SUFFIX):
            continue
        data = gate.read_bytes_if_present(status.path, OP_LOAD_FILE)
        if data is None:
            continue  # removed since the listing (the attempt replaced the file)
        records.append(PendingRecord.from_json(data, gate.to_url(status.path), gate.paths, attempt_id))
    return sorted(records, key=lambda record: (record.relative, record.upload.upload_id or ""))


def recorded_attempts(gate: Gate, layout: UploadPaths) -> list[str]:
    """The attempts with a ``pending/<attempt>/`` directory."""
    names = (posixpath.basename(status.path.rstrip("/")) for status in list_if_present(gate, layout.pending_dir))
    return sorted(name for name in names if name)


@dataclass(frozen=True, slots=True)
class AttemptManifest:
    """One committed attempt's manifest, admitted: its uploads by destination-relative path."""

    task_id: str
    task_attempt_id: str
    url: str
    modified: float | None
    uploads: tuple[tuple[str, PendingUpload], ...]


def manifest_statuses(gate: Gate) -> list[FileStatus]:
    return [
        status
        for status in list_if_present(gate, gate.paths.manifest_dir)
        if not status.is_dir and status.path.endswith(ATTEMPT_MANIFEST_SUFFIX)
    ]


def load_attempt_manifest(gate: Gate, status: FileStatus) -> AttemptManifest:
    """Read and admit one attempt's manifest: this job, named after its attempt, every file entry a key inside
    the destination whose pending upload publishes exactly that key with the entry's size."""
    from ..admission import check_manifest_ids

    url = gate.to_url(status.path)
    manifest = TaskManifest.from_json(gate.read_bytes(status.path, OP_LOAD_MANIFEST), url)
    check_manifest_ids(manifest.job_id, manifest.task_id, manifest.task_attempt_id, url)
    if manifest.job_id != gate.paths.job_id:
        raise ManifestError(f"{url}: field jobId is {manifest.job_id!r}, not {gate.paths.job_id!r}")
    if posixpath.basename(status.path) != manifest.task_attempt_id + ATTEMPT_MANIFEST_SUFFIX:
        raise ManifestError(f"{url}: field taskAttemptID {manifest.task_attempt_id!r} does not match the file name")
    if manifest.pending_uploads is None:
        raise ManifestError(f"{url}: field pendingUploads is missing: not a manifest of the upload protocol")
    uploads = []
    for index, (entry, upload) in enumerate(zip(manifest.files, manifest.pending_uploads, strict=True)):
        try:
            path = gate.from_url(entry.dest)
        except ValueError:
            raise ManifestError(f"{url}: files[{index}].d {entry.dest} is not in this store") from None
        if entry.source != entry.dest:
            raise ManifestError(f"{url}: files[{index}].s differs from files[{index}].d; uploads are not renamed")
        relative = admit_upload(gate.paths, upload, path, url, f"pendingUploads[{index}]")
        if upload.length != entry.size:
            raise ManifestError(
                f"{url}: pendingUploads[{index}].length {upload.length} differs from files[{index}].z {entry.size}"
            )
        uploads.append((relative, upload))
    gate.stats.merge(manifest.iostatistics)
    return AttemptManifest(manifest.task_id, manifest.task_attempt_id, url, status.modified, tuple(uploads))


def marker_keys(gate: Gate) -> set[str]:
    """Store paths of the keys this job attempt's markers name (each checked to lie inside the destination)."""
    markers = gate.read_markers(MarkerPaths(gate.paths))
    return {posixpath.join(gate.paths.dest, marker.data_file) for marker in markers.markers}


def abort_uploads(
    gate: Gate, recorded: Iterable[PendingUpload], keep: set[str], *, with_markers: bool = True
) -> list[str]:
    """Abort every incomplete upload of this job whose id is not in ``keep``: those ``recorded``, plus (with
    markers) every upload listed under the destination at a key a marker of this job names. Never an upload at
    a key no marker names, and never by clearing the bucket. Returns the URLs of the keys whose upload went."""
    targets: dict[tuple[str, str], None] = {}
    for upload in recorded:
        if upload.upload_id is not None and upload.upload_id not in keep:
            targets[(upload.path, upload.upload_id)] = None
    if with_markers:
        keys = marker_keys(gate)
        if keys:
            for listed in gate.list_uploads(gate.paths.dest.rstrip("/") + "/"):
                if listed.path in keys and listed.upload_id not in keep:
                    targets[(listed.path, listed.upload_id)] = None
    aborted: list[str] = []

    def abort(target: tuple[str, str]) -> str | None:
        path, upload_id = target
        return gate.to_url(path) if gate.abort_upload(path, upload_id) else None

    run_bounded(
        gate.context.pool,
        sorted(targets),
        abort,
        max_in_flight=gate.context.max_in_flight,
        on_result=lambda url: aborted.append(url) if url else None,
    )
    if aborted:
        gate.stats.increment(COMMITTER_COMMITS_ABORTED, len(aborted))
        log.info("%s: aborted %d incomplete uploads of job %s", gate.name, len(aborted), gate.paths.job_id)
    return sorted(aborted)


def every_recorded_upload(gate: Gate, layout: UploadPaths, *, strict: bool) -> list[PendingUpload]:
    """The uploads named by every attempt's records and manifests; ``strict=False`` skips (with a warning) a
    document that cannot be admitted: its uploads are still found through the markers."""
    found: list[PendingUpload] = []
    for attempt in recorded_attempts(gate, layout):
        try:
            found.extend(record.upload for record in read_attempt_records(gate, layout, attempt))
        except ManifestError as error:
            if strict:
                raise
            log.warning("Skipping the records of attempt %s: %s", attempt, error)
    for status in manifest_statuses(gate):
        try:
            found.extend(upload for _, upload in load_attempt_manifest(gate, status).uploads)
        except ManifestError as error:
            if strict:
                raise
            log.warning("Skipping manifest %s: %s", gate.to_url(status.path), error)
    return found
