"""LoadManifests: read, validate and spill every task manifest before anything in the destination changes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..entry_file import EntryFile, FileToCommit
from ..errors import DuplicateDestinationError, JobStateError, ManifestError
from ..iostatistics import IOStatisticsSnapshot
from ..manifest import MANIFEST_SUFFIX, EntryStatus, TaskManifest
from ..parallel import run_bounded
from ..paths import TEMPORARY_DIR
from ..statistic_names import (
    COMMITTER_TASK_MANIFEST_FILE_SIZE,
    JOB_STAGE_LOAD_MANIFESTS,
    OP_LOAD_ALL_MANIFESTS,
    OP_LOAD_MANIFEST,
)
from ..store import FileStatus
from ..urls import has_relative_segments
from .base import Stage
from .job_types import TargetDirectory

log = logging.getLogger(__name__)

# Which status wins when tasks saw a directory differently: a file in the way must be dealt with; a
# directory that any task found missing must be (idempotently) created; "dir" is only trusted if all agree.
_STATUS_PRECEDENCE = {
    EntryStatus.DIR: 0,
    EntryStatus.CREATED_DIR: 0,
    EntryStatus.UNKNOWN: 1,
    EntryStatus.NOT_FOUND: 1,
    EntryStatus.FILE: 2,
}


def _merged(known: TargetDirectory, seen: TargetDirectory) -> TargetDirectory:
    """One directory as two tasks saw it: the status that asks for more work, files if either task has some."""
    status = seen.status if _STATUS_PRECEDENCE[seen.status] > _STATUS_PRECEDENCE[known.status] else known.status
    return TargetDirectory(known.path, known.level, status, known.receives_files or seen.receives_files)


@dataclass(frozen=True, slots=True)
class LoadManifestsArguments:
    spill_directory: str | None = None
    """Local directory for the spill file; the system temp directory if ``None``."""
    accepted_attempts: Mapping[str, str] | None = None
    """Task id -> the one attempt id to commit (as an engine's commit coordinator accepted it); other manifests
    are ignored. ``None``: every manifest in the directory."""


@dataclass
class LoadManifestsResult:
    """Everything job commit needs from the manifests; the file list itself lives in ``entry_file``."""

    entry_file: EntryFile
    directories: list[TargetDirectory]
    task_ids: list[str] = field(default_factory=list)
    task_attempt_ids: list[str] = field(default_factory=list)
    manifest_bytes: int = 0

    @property
    def manifest_count(self) -> int:
        return len(self.task_ids)

    @property
    def file_count(self) -> int:
        return self.entry_file.file_count

    @property
    def total_size(self) -> int:
        return self.entry_file.total_size


@dataclass(frozen=True, slots=True)
class _LoadedManifest:
    task_id: str
    task_attempt_id: str
    manifest_url: str
    rows: list[FileToCommit]
    directories: list[TargetDirectory]
    iostatistics: IOStatisticsSnapshot
    size: int


class LoadManifestsStage(Stage[LoadManifestsArguments, LoadManifestsResult]):
    """Load ``manifests/*-manifest.json`` in parallel, streaming each file list to a local spill file.

    Every manifest is checked before the caller may touch the destination: right type and version, this job
    and attempt, named after its own task, sources inside its own task attempt directory, destinations inside
    the destination (no ``..``, other scheme or bucket, or ``_temporary``), and no destination claimed twice
    across all manifests. Memory holds at most ``io.threads + writer.queue.capacity`` manifests, one hash per
    file and the directory set. Postcondition: nothing in the store has changed.
    """

    name = JOB_STAGE_LOAD_MANIFESTS

    def execute(self, arguments: LoadManifestsArguments) -> LoadManifestsResult:
        manifest_dir = self.paths.manifest_dir
        try:
            listing = self.list_dir(manifest_dir)
        except FileNotFoundError:
            raise JobStateError(
                f"{self.to_url(manifest_dir)}: no manifest directory: job {self.paths.job_id} was never set "
                "up, or was already committed or aborted"
            ) from None
        manifests = sorted((s for s in listing if s.path.rstrip("/").endswith(MANIFEST_SUFFIX)), key=lambda s: s.path)
        self._accepted = arguments.accepted_attempts
        if self._accepted is not None:
            manifests = self._only_accepted(manifests, self._accepted)
        entry_file = EntryFile(arguments.spill_directory, self.paths.job_id)
        result = LoadManifestsResult(entry_file, [])
        directories: dict[str, TargetDirectory] = {}
        dest_hashes: set[int] = set()

        def absorb(loaded: _LoadedManifest) -> None:
            for row in loaded.rows:
                key = hash(row.dest)
                if key in dest_hashes:
                    self._confirm_duplicate(entry_file, loaded, row)
                dest_hashes.add(key)
            entry_file.append(loaded.task_attempt_id, loaded.rows)
            for target in loaded.directories:
                known = directories.get(target.path)
                directories[target.path] = target if known is None else _merged(known, target)
            self.stats.merge(loaded.iostatistics)
            self.stats.add_sample(COMMITTER_TASK_MANIFEST_FILE_SIZE, loaded.size)
            result.task_ids.append(loaded.task_id)
            result.task_attempt_ids.append(loaded.task_attempt_id)
            result.manifest_bytes += loaded.size

        # Where a read takes microseconds, loading is JSON parsing under the GIL: threads would only contend.
        pool = None if self.capabilities.microsecond_calls else self.context.pool
        try:
            with self.stats.track(OP_LOAD_ALL_MANIFESTS):
                run_bounded(
                    pool,
                    manifests,
                    self._load_one,
                    max_in_flight=self.context.max_in_flight,
                    on_result=absorb,
                )
        except BaseException:
            entry_file.close()
            raise
        result.directories = sorted(directories.values(), key=lambda d: (d.level, d.path))
        log.info(
            "%s: loaded %d manifests (%d bytes) listing %d files, %d bytes, %d directories",
            self.name,
            result.manifest_count,
            result.manifest_bytes,
            result.file_count,
            result.total_size,
            len(result.directories),
        )
        return result

    def _load_one(self, status: FileStatus) -> _LoadedManifest:
        url = self.to_url(status.path)
        if status.is_dir or status.size == 0:
            raise ManifestError(f"{url}: not a valid manifest file: {'a directory' if status.is_dir else 'empty'}")
        data = self.read_bytes(status.path, OP_LOAD_MANIFEST)
        manifest = TaskManifest.from_json(data, url)
        self._check_identity(manifest, status.path, url)
        if self._accepted is not None and self._accepted[manifest.task_id] != manifest.task_attempt_id:
            raise ManifestError(
                f"{url}: manifest of task attempt {manifest.task_attempt_id}, but attempt "
                f"{self._accepted[manifest.task_id]} of task {manifest.task_id} was accepted"
            )
        rows, directories = self._targets(manifest, url)
        return _LoadedManifest(
            manifest.task_id,
            manifest.task_attempt_id,
            url,
            rows,
            directories,
            manifest.iostatistics,
            len(data),
        )

    def _only_accepted(self, manifests: list[FileStatus], accepted: Mapping[str, str]) -> list[FileStatus]:
        """The manifests of the accepted tasks; a missing one fails the job before anything changes."""
        by_task = {
            status.path.rstrip("/").rsplit("/", 1)[-1].removesuffix(MANIFEST_SUFFIX): status for status in manifests
        }
        missing = sorted(task for task in accepted if task not in by_task)
        if missing:
            raise ManifestError(
                f"{self.to_url(self.paths.manifest_dir)}: no manifest of accepted task(s) {', '.join(missing)}"
            )
        ignored = len(manifests) - len(accepted)
        if ignored:
            log.info("%s: ignoring %d manifests of tasks or attempts not accepted", self.name, ignored)
        return sorted((by_task[task] for task in accepted), key=lambda status: status.path)

    def _check_identity(self, manifest: TaskManifest, path: str, url: str) -> None:
        paths = self.paths
        if manifest.job_id != paths.job_id:
            raise ManifestError(f"{url}: manifest of job {manifest.job_id!r}, not of this job {paths.job_id!r}")
        if manifest.job_attempt_number != paths.job_attempt:
            raise ManifestError(
                f"{url}: manifest of job attempt {manifest.job_attempt_number}, not of attempt {paths.job_attempt}"
            )
        if path.rstrip("/").rsplit("/", 1)[-1] != manifest.task_id + MANIFEST_SUFFIX:
            raise ManifestError(f"{url}: file name does not match the manifest's task id {manifest.task_id!r}")
        expected = paths.task_attempt_dir(manifest.task_attempt_id)
        if self._path_of(manifest.task_attempt_dir, url, "taskAttemptDir") != expected:
            raise ManifestError(
                f"{url}: taskAttemptDir {manifest.task_attempt_dir} is not the directory of task attempt "
                f"{manifest.task_attempt_id} in this job ({self.to_url(expected)})"
            )

    def _targets(self, manifest: TaskManifest, url: str) -> tuple[list[FileToCommit], list[TargetDirectory]]:
        source_prefix = self.paths.task_attempt_dir(manifest.task_attempt_id) + "/"
        dest_prefix = self.paths.dest.rstrip("/") + "/"
        temporary_prefix = dest_prefix + TEMPORARY_DIR + "/"
        path_of = self._fast_path_of
        source_url_prefix = self.to_url(source_prefix)
        dest_url_prefix = self.to_url(dest_prefix)
        rows: list[FileToCommit] = []
        for entry in manifest.files:
            source = path_of(entry.source, source_url_prefix, source_prefix, url, "source")
            dest = path_of(entry.dest, dest_url_prefix, dest_prefix, url, "destination")
            if not source.startswith(source_prefix) or has_relative_segments(source):
                raise ManifestError(
                    f"{url}: source {entry.source} lies outside the directory of task attempt "
                    f"{manifest.task_attempt_id}"
                )
            if not dest.startswith(dest_prefix) or dest.startswith(temporary_prefix) or has_relative_segments(dest):
                raise ManifestError(f"{url}: destination {entry.dest} lies outside the job's destination")
            rows.append(FileToCommit(source, dest, entry.size, entry.etag, entry.dest))
        implied = not self.capabilities.real_directories
        file_parents = {row.dest.rpartition("/")[0] for row in rows} if implied else set()
        directories = []
        for directory in manifest.directories:
            path = path_of(directory.dir, dest_url_prefix, dest_prefix, url, "directory").rstrip("/")
            if not path.startswith(dest_prefix) or path.startswith(temporary_prefix) or has_relative_segments(path):
                raise ManifestError(f"{url}: directory {directory.dir} lies outside the job's destination")
            directories.append(TargetDirectory(path, directory.level, directory.status, path in file_parents))
        return rows, directories

    def _fast_path_of(self, value: str, url_prefix: str, path_prefix: str, url: str, what: str) -> str:
        """``_path_of`` for a URL under a known prefix in this store's own form: a slice, no parsing.

        Without ``%`` decoding is the identity, so the path is the prefix's path plus the rest; anything else
        (Hadoop's ``file:/`` form, escapes) takes the general route.
        """
        if value.startswith(url_prefix) and "%" not in value:
            return path_prefix + value[len(url_prefix) :]
        return self._path_of(value, url, what)

    def _path_of(self, value: str, url: str, what: str) -> str:
        try:
            return self.from_url(value)
        except ValueError as error:
            raise ManifestError(f"{url}: {what} {value} is not in this job's store: {error}") from None

    def _confirm_duplicate(self, entry_file: EntryFile, loaded: _LoadedManifest, row: FileToCommit) -> None:
        """A hash matched: look the destination up exactly (rare, so a rescan of the spill file is fine)."""
        for chunk in entry_file.chunks():
            for other in chunk.rows:
                if other.dest == row.dest:
                    raise DuplicateDestinationError(
                        f"{row.dest_url}: destination claimed by two tasks: {chunk.task_attempt_id} and "
                        f"{loaded.task_attempt_id} ({loaded.manifest_url}); nothing was committed"
                    )
