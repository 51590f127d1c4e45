"""What the upload protocol's job commit and aborts read back from the job's state, and how they abort uploads.

Shared by ``upload_commit_task``, ``upload_abort_task``, ``upload_commit_job`` and ``upload_abort_job``; every
store call goes through the stage gate. Records and manifests are untrusted (``protocols/upload/records.py`` admits
them).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import ManifestError
from ...manifest import TaskManifest
from ...markers.layout import MarkerPaths
from ...parallel import run_bounded
from ...paths import JobPaths
from ...protocols.upload.records import (
    ATTEMPT_MANIFEST_SUFFIX,
    PENDING_SUFFIX,
    PendingRecord,
    UploadPaths,
    admit_upload,
    started_record_id,
    upload_id_of_record,
)
from ...statistic_names import COMMITTER_COMMITS_ABORTED, OP_LOAD_FILE, OP_LOAD_MANIFEST
from ...store import FileStatus
from ...store.pending_upload import PendingUpload
from ..base import Stage
from ..marker_reads import read_job_markers

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
    from ...admission import check_manifest_ids

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
    markers = read_job_markers(gate, MarkerPaths(gate.paths))
    return {posixpath.join(gate.paths.dest, marker.data_file) for marker in markers.markers}


def job_attempt_numbers(gate: Gate, job_id: str) -> list[int]:
    """The job attempts (``NN`` directories) of ``job_id`` under the destination's ``_temporary``."""
    job_dir = JobPaths(gate.paths.dest, job_id).job_dir
    names = (posixpath.basename(status.path.rstrip("/")) for status in list_if_present(gate, job_dir) if status.is_dir)
    return sorted(int(name) for name in names if len(name) == 2 and name.isdigit())


def job_marker_keys(gate: Gate, job_id: str | None = None) -> set[str]:
    """Store paths of the keys the markers of EVERY attempt of ``job_id`` (default: this job) name."""
    return job_markers(gate, job_id)[0]


def job_markers(gate: Gate, job_id: str | None = None) -> tuple[set[str], tuple[str, ...]]:
    """Store paths of the keys the markers of EVERY attempt of ``job_id`` (default: this job) name, and the
    marker entries skipped as not markers of this job (``MarkerSet.skipped``).

    Every attempt, not only this one: the job's cleanup deletes the whole job directory, so an earlier job
    attempt's uploads would otherwise lose the only record that finds them."""
    job = job_id or gate.paths.job_id
    attempts = set(job_attempt_numbers(gate, job))
    if job == gate.paths.job_id:
        attempts.add(gate.paths.job_attempt)
    keys: set[str] = set()
    skipped: list[str] = []
    for attempt in sorted(attempts):
        found = read_job_markers(gate, MarkerPaths(JobPaths(gate.paths.dest, job, attempt)))
        keys |= found.data_files
        skipped.extend(found.skipped)
    return keys, tuple(skipped)


def recorded_upload_ids(gate: Gate) -> set[str]:
    """Every upload id this job recorded as it started an upload (``uploads/`` of each of its job attempts): one
    listing per job attempt; only a record named by a digest (a very long id) is read."""
    attempts = set(job_attempt_numbers(gate, gate.paths.job_id)) | {gate.paths.job_attempt}
    ids: set[str] = set()
    by_digest: list[str] = []
    for attempt in sorted(attempts):
        layout = UploadPaths(JobPaths(gate.paths.dest, gate.paths.job_id, attempt))
        for status in list_if_present(gate, layout.started_dir):
            if status.is_dir:
                continue
            upload_id = upload_id_of_record(posixpath.basename(status.path))
            if upload_id is None:
                by_digest.append(status.path)
            else:
                ids.add(upload_id)

    def read(path: str) -> str | None:
        data = gate.read_bytes_if_present(path, OP_LOAD_FILE)
        if data is None:
            return None
        try:
            return started_record_id(data, gate.to_url(path), gate.paths.job_id)
        except ManifestError as error:
            log.warning("%s: skipping a record that cannot be admitted: %s", gate.name, error)
            return None

    run_bounded(
        gate.context.pool,
        by_digest,
        read,
        max_in_flight=gate.context.max_in_flight,
        on_result=lambda upload_id: ids.add(upload_id) if upload_id else None,
    )
    return ids


@dataclass(frozen=True, slots=True)
class JobUploads:
    """The incomplete uploads of a job, as the abort of its leftovers decides them (``find_job_uploads``)."""

    targets: tuple[tuple[str, str], ...]
    """(store path, upload id) of each incomplete upload to abort: one this job recorded starting."""
    left: tuple[tuple[str, str], ...]
    """Incomplete uploads at a key a marker of this job names, whose id this job never recorded: another
    writer's (a crafted marker), or one a task started and was killed before recording: left alone, reported."""
    skipped: tuple[str, ...] = ()
    """Marker entries that were not markers of this job (``MarkerSet.skipped``)."""


def find_job_uploads(gate: Gate, keep: set[str]) -> JobUploads:
    """Every incomplete upload of this job whose id is not in ``keep``, by the ids it recorded as it started
    them (``recorded_upload_ids``), found by ONE paginated listing of the destination's uploads. The job's markers
    and records are read only if that listing shows an upload other than those in ``keep`` (so markers that are
    not this job's are reported only then: with no upload left, no marker is followed).

    Exact: an upload is aborted only if this job recorded its id, so never another writer's, even at a key this
    job also writes or a crafted marker names, and never by clearing the bucket. An upload at a key a marker of
    the job names that the job never recorded is left and reported (``left``)."""
    listed = [
        (upload.path, upload.upload_id)
        for upload in gate.list_uploads(gate.paths.dest.rstrip("/") + "/")
        if upload.upload_id not in keep
    ]
    if not listed:  # the usual end of a job commit: its markers and records (one a file) need not be read
        return JobUploads((), ())
    keys, skipped = job_markers(gate)
    ours = recorded_upload_ids(gate) - keep
    targets = sorted({(path, upload_id) for path, upload_id in listed if upload_id in ours})
    left = sorted({(path, upload_id) for path, upload_id in listed if upload_id not in ours and path in keys})
    if left:
        log.warning(
            "%s: leaving %d incomplete uploads at keys job %s marks, whose ids it never recorded (another writer's, "
            "or an upload whose task was killed as it started it), e.g. %s",
            gate.name,
            len(left),
            gate.paths.job_id,
            gate.to_url(left[0][0]),
        )
    return JobUploads(tuple(targets), tuple(left), skipped)


def abort_each(gate: Gate, targets: Iterable[tuple[str, str]]) -> list[str]:
    """Abort each (store path, upload id) in parallel on the job pool; the URLs of the keys whose upload was
    still there to abort."""
    aborted: list[str] = []

    def abort(target: tuple[str, str]) -> str | None:
        path, upload_id = target
        return gate.to_url(path) if gate.abort_upload(path, upload_id) else None

    run_bounded(
        gate.context.pool,
        targets,
        abort,
        max_in_flight=gate.context.max_in_flight,
        on_result=lambda url: aborted.append(url) if url else None,
    )
    if aborted:
        gate.stats.increment(COMMITTER_COMMITS_ABORTED, len(aborted))
        log.info("%s: aborted %d incomplete uploads of job %s", gate.name, len(aborted), gate.paths.job_id)
    return sorted(aborted)
