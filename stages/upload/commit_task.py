"""UploadCommitTask: record the attempt's pending uploads in a manifest of its own, saved without rename."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...errors import CommitterError, JobStateError, ManifestError
from ...manifest import DirEntry, EntryStatus, FileEntry, TaskManifest
from ...protocols.upload.records import UploadPaths
from ...statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    COMMITTER_TASK_MANIFEST_FILE_SIZE,
    COMMITTER_TASKS_COMPLETED,
    OP_LOAD_MANIFEST,
    TASK_STAGE_COMMIT,
    TASK_STAGE_SAVE_TASK_MANIFEST,
)
from ...store.pending_upload import PendingUpload
from ..base import Stage
from ..journal import read_commit_record
from .state import read_attempt_records

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UploadCommitTaskArguments:
    task_id: str
    task_attempt_id: str
    uploads: Sequence[tuple[str, PendingUpload]] | None
    """(destination-relative path, pending upload) of the files the attempt closed in this process, or ``None``
    when it wrote elsewhere: its ``.pending`` records are then read."""
    outputs: Mapping[str, str] | None = None
    """The writer's declared files, task-side path -> destination-relative path (the same: nothing is renamed).
    ``None``: every file of the attempt."""


@dataclass(frozen=True, slots=True)
class UploadCommitTaskResult:
    manifest: TaskManifest
    manifest_path: str


class UploadCommitTaskStage(Stage[UploadCommitTaskArguments, UploadCommitTaskResult]):
    """Save ``manifests/$taskAttemptId-manifest.json`` naming each file (source = destination = its final key)
    with its pending upload in ``pendingUploads``, with ``put_if_absent``.

    Precondition: the job is set up (its ``protocol`` sign in place) and its commit has not begun. One manifest
    per attempt: two attempts of a task may both commit, and job commit chooses one. A retried save that finds
    the same document (statistics aside) succeeds; a different one is a ``ManifestError`` naming the path.
    Postcondition: the manifest is in place, or ``JobStateError`` if the job ended meanwhile (then it is gone).
    """

    name = TASK_STAGE_COMMIT

    def execute(self, arguments: UploadCommitTaskArguments) -> UploadCommitTaskResult:
        layout = UploadPaths(self.paths)
        attempt = arguments.task_attempt_id
        too_late = self._too_late(layout)
        if too_late is not None:
            raise self._error(arguments, too_late)
        uploads = arguments.uploads
        if uploads is None:
            uploads = [(record.relative, record.upload) for record in read_attempt_records(self, layout, attempt)]
        selected = self._selected(dict(uploads), arguments.outputs, attempt)
        files: list[FileEntry] = []
        pending: list[PendingUpload] = []
        directories: dict[str, int] = {}
        for relative, upload in selected:
            url = self.to_url(layout.destination_path(relative))
            files.append(FileEntry(url, url, upload.length, upload.expected_etag()))
            pending.append(upload)
            parent = posixpath.dirname(relative)
            while parent:
                directories[parent] = parent.count("/") + 1
                parent = posixpath.dirname(parent)
        self.stats.increment(COMMITTER_TASKS_COMPLETED)
        self.stats.add_sample(COMMITTER_TASK_FILE_COUNT, len(files))
        self.stats.add_sample(COMMITTER_TASK_FILE_SIZE, sum(entry.size for entry in files))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_COUNT, len(directories))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_DEPTH, max(directories.values(), default=0))
        manifest = TaskManifest(
            job_id=self.paths.job_id,
            job_attempt_number=self.paths.job_attempt,
            task_id=arguments.task_id,
            task_attempt_id=attempt,
            task_attempt_dir=self.to_url(self.paths.task_attempt_dir(attempt)),
            files=files,
            directories=[
                DirEntry(self.to_url(layout.destination_path(d)), EntryStatus.DIR, level)
                for d, level in sorted(directories.items())
            ],
            iostatistics=self.stats.snapshot(),
            pending_uploads=pending,
        )
        path = layout.attempt_manifest(attempt)
        self._save(manifest, path)
        too_late = self._too_late(layout)
        if too_late is not None:
            self.delete_file(path)
            raise self._error(arguments, too_late)
        return UploadCommitTaskResult(manifest, path)

    def _too_late(self, layout: UploadPaths) -> str | None:
        if self.info(layout.protocol_file) is None:
            return "was never set up, or was committed or aborted"
        if read_commit_record(self) is not None:
            return "has begun its job commit"
        return None

    def _error(self, arguments: UploadCommitTaskArguments, what: str) -> JobStateError:
        return JobStateError(
            f"{self.to_url(self.paths.job_attempt_dir)}: job {self.paths.job_id} {what}; task attempt "
            f"{arguments.task_attempt_id} of task {arguments.task_id} cannot commit"
        )

    def _save(self, manifest: TaskManifest, path: str) -> None:
        """``put_if_absent``; after a lost answer (or a second commit of the attempt) compare what is there."""
        data = manifest.to_json()
        with self.stats.track(TASK_STAGE_SAVE_TASK_MANIFEST):
            try:
                self.put_if_absent(path, data)
                self.stats.add_sample(COMMITTER_TASK_MANIFEST_FILE_SIZE, len(data))
                return
            except FileExistsError:
                pass
            url = self.to_url(path)
            found = TaskManifest.from_json(self.read_bytes(path, OP_LOAD_MANIFEST), url)
            if _comparable(found) != _comparable(manifest):
                raise ManifestError(
                    f"{url}: a different manifest of task attempt {manifest.task_attempt_id} is already saved; "
                    "an attempt commits once"
                )
            log.info("%s: the manifest of %s was saved already", self.name, manifest.task_attempt_id)

    def _selected(
        self, uploads: dict[str, PendingUpload], outputs: Mapping[str, str] | None, attempt: str
    ) -> list[tuple[str, PendingUpload]]:
        if outputs is None:
            return sorted(uploads.items())
        chosen = []
        for source, dest in sorted(outputs.items()):
            if source != dest:
                raise CommitterError(
                    f"task attempt {attempt}: declared output {source!r} -> {dest!r}: the upload protocol writes "
                    "each file to its final key and cannot rename it; open the file at its destination-relative path"
                )
            upload = uploads.get(source)
            if upload is None:
                raise CommitterError(f"task attempt {attempt}: declared output {source!r} was never written")
            chosen.append((source, upload))
        return chosen


def _comparable(manifest: TaskManifest) -> dict[str, object]:
    document = manifest.to_dict()
    document.pop("iostatistics")
    return document
