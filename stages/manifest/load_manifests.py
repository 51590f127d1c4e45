"""LoadManifests: read, validate and spill every task manifest before anything in the destination changes."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat

from ..._json import load_json_document
from ...admission import (
    JobAdmission,
    all_destination_relatives_admitted,
    all_relatives_admitted,
    check_manifest_ids,
)
from ...duplicates import DuplicateHashes
from ...entry_file import EntryFile, FilesToCommit, spill_prefix
from ...errors import DuplicateDestinationError, JobStateError, ManifestError
from ...iostatistics import IOStatisticsSnapshot
from ...manifest import MANIFEST_SUFFIX, EntryStatus, FileColumns, TaskManifest
from ...statistic_names import (
    COMMITTER_TASK_MANIFEST_FILE_SIZE,
    JOB_STAGE_LOAD_MANIFESTS,
    OP_LOAD_ALL_MANIFESTS,
    OP_LOAD_MANIFEST,
)
from ...store import FileStatus
from ..base import Stage
from .job_types import TargetDirectory

log = logging.getLogger(__name__)

_CANDIDATES_PER_SCAN = 10_000
"""Candidate hashes confirmed per rescan of the spill file: a bound on that set, not a limit on duplicates."""

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
    listing: list[FileStatus] | None = None
    """The manifest directory's entries, where the caller listed it (in one round trip with its own reads);
    ``None``: listed here."""


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
    files: FilesToCommit
    directories: list[TargetDirectory]
    iostatistics: IOStatisticsSnapshot
    size: int


class LoadManifestsStage(Stage[LoadManifestsArguments, LoadManifestsResult]):
    """Load ``manifests/*-manifest.json`` in parallel, streaming each file list to a local spill file.

    Every manifest is checked before the caller may touch the destination: right type and version, this job
    and attempt, named after its own task, sources inside its own task attempt directory, destinations inside
    the destination (no ``..``, other scheme or bucket, or ``_temporary``), and no destination claimed twice
    across all manifests (nor twice in one, nor one attempt as two tasks). Memory holds at most
    ``io.threads + writer.queue.capacity`` manifests, the directory set and one bounded run of destination hashes
    (``duplicates``); the hash check ends the stage. Postcondition: nothing in the store has changed.
    """

    name = JOB_STAGE_LOAD_MANIFESTS

    def execute(self, arguments: LoadManifestsArguments) -> LoadManifestsResult:
        manifest_dir = self.paths.manifest_dir
        listing = arguments.listing
        if listing is None:
            try:
                listing = self.list_dir(manifest_dir)
            except FileNotFoundError:
                raise JobStateError(
                    f"{self.to_url(manifest_dir)}: no manifest directory: job {self.paths.job_id} was never "
                    "set up, or was already committed or aborted"
                ) from None
        manifests = sorted((s for s in listing if s.path.rstrip("/").endswith(MANIFEST_SUFFIX)), key=lambda s: s.path)
        self._accepted = arguments.accepted_attempts
        self._admission = JobAdmission(self.paths)
        if self._accepted is not None:
            manifests = self._only_accepted(manifests, self._accepted)
        entry_file = EntryFile(arguments.spill_directory, self.paths.job_id)
        result = LoadManifestsResult(entry_file, [])
        directories: dict[str, TargetDirectory] = {}
        dest_hashes = DuplicateHashes(os.path.dirname(entry_file.path), prefix=spill_prefix(self.paths.job_id))
        manifest_of_attempt: dict[str, str] = {}

        def absorb(loaded: _LoadedManifest) -> None:
            other = manifest_of_attempt.setdefault(loaded.task_attempt_id, loaded.manifest_url)
            if other != loaded.manifest_url:
                raise ManifestError(
                    f"{loaded.manifest_url}: task attempt {loaded.task_attempt_id} also committed as another task "
                    f"({other}); nothing was committed"
                )
            dest_hashes.add_all(map(hash, loaded.files.dests))
            entry_file.append(loaded.task_attempt_id, loaded.files)
            for target in loaded.directories:
                known = directories.get(target.path)
                if known is None:
                    directories[target.path] = target
                elif known.status is not target.status or known.receives_files is not target.receives_files:
                    directories[target.path] = _merged(known, target)  # seen alike by every task so far: kept
            self.stats.merge(loaded.iostatistics)
            self.stats.add_sample(COMMITTER_TASK_MANIFEST_FILE_SIZE, loaded.size)
            result.task_ids.append(loaded.task_id)
            result.task_attempt_ids.append(loaded.task_attempt_id)
            result.manifest_bytes += loaded.size

        try:
            with self.stats.track(OP_LOAD_ALL_MANIFESTS):
                for status in manifests:
                    self._check_listed(status)
                self.read_each(
                    manifests,
                    lambda status: status.path,
                    OP_LOAD_MANIFEST,
                    lambda status, data: absorb(self._parse(status, data)),
                )
            self._no_destination_twice(entry_file, dest_hashes)
        except BaseException:
            entry_file.close()
            raise
        finally:
            dest_hashes.close()
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

    def _check_listed(self, status: FileStatus) -> None:
        if status.is_dir or status.size == 0:
            raise ManifestError(
                f"{self.to_url(status.path)}: not a valid manifest file: {'a directory' if status.is_dir else 'empty'}"
            )

    def _parse(self, status: FileStatus, data: bytes) -> _LoadedManifest:
        url = self.to_url(status.path)
        manifest, files = TaskManifest.from_dict_with_columns(load_json_document(data, url), url)
        self._check_identity(manifest, status.path, url)
        if self._accepted is not None and self._accepted[manifest.task_id] != manifest.task_attempt_id:
            raise ManifestError(
                f"{url}: manifest of task attempt {manifest.task_attempt_id}, but attempt "
                f"{self._accepted[manifest.task_id]} of task {manifest.task_id} was accepted"
            )
        to_commit, directories = self._targets(manifest, files, url)
        return _LoadedManifest(
            manifest.task_id,
            manifest.task_attempt_id,
            url,
            to_commit,
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
        check_manifest_ids(manifest.job_id, manifest.task_id, manifest.task_attempt_id, url)
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

    def _targets(
        self, manifest: TaskManifest, files: FileColumns, url: str
    ) -> tuple[FilesToCommit, list[TargetDirectory]]:
        """The files and directories of a manifest, every path admitted (``admission``); a manifest whose URLs
        all have the store's own form, with no escape, is admitted as a whole (``_targets_at_once``)."""
        at_once = self._targets_at_once(manifest, files)
        if at_once is not None:
            return at_once
        admission = self._admission
        source_prefix = admission.source_prefix(manifest.task_attempt_id)
        dest_prefix = admission.dest_prefix
        path_of = self._fast_path_of
        source_url_prefix = self.to_url(source_prefix)
        dest_url_prefix = self.to_url(dest_prefix)
        sources: list[str] = []
        dests: list[str] = []
        for source_url, dest_url in zip(files.sources, files.dests, strict=True):
            source = path_of(source_url, source_url_prefix, source_prefix, url, "source")
            dest = path_of(dest_url, dest_url_prefix, dest_prefix, url, "destination")
            problem = admission.source_problem(source, source_prefix, manifest.task_attempt_id)
            if problem is not None:
                raise ManifestError(f"{url}: source {source_url} {problem}")
            problem = admission.destination_problem(dest)
            if problem is not None:
                raise ManifestError(f"{url}: destination {dest_url} {problem}")
            sources.append(source)
            dests.append(dest)
        to_commit = FilesToCommit(sources, dests, files.sizes, files.etags, files.dests)
        file_parents = self._file_parents(dests)
        directories = []
        for directory in manifest.directories:
            path = path_of(directory.dir, dest_url_prefix, dest_prefix, url, "directory")
            problem = admission.destination_problem(path[:-1] if path.endswith("/") else path)
            if problem is not None:
                raise ManifestError(f"{url}: directory {directory.dir} {problem}")
            path = path.removesuffix("/")
            directories.append(TargetDirectory(path, directory.level, directory.status, path in file_parents))
        return to_commit, directories

    def _file_parents(self, dests: list[str]) -> set[str]:
        """The directories that hold a file, where the store has no directories of its own (none needed else)."""
        if self.capabilities.real_directories:
            return set()
        return {dest.rpartition("/")[0] for dest in dests}

    def _targets_at_once(
        self, manifest: TaskManifest, files: FileColumns
    ) -> tuple[FilesToCommit, list[TargetDirectory]] | None:
        """``_targets`` for the common manifest, decided per manifest rather than per path; ``None`` when any URL
        is not a plain slice of its prefix or any path is refused, and the caller then goes path by path (and
        names the culprit). The same rules, in comprehensions and a few scans of joined text: the load stage is
        pure Python under the GIL, and this was most of it."""
        admission = self._admission
        source_prefix = admission.source_prefix(manifest.task_attempt_id)
        dest_prefix = admission.dest_prefix
        source_url_prefix = self.to_url(source_prefix)
        dest_url_prefix = self.to_url(dest_prefix)
        sources, dests, directories = files.sources, files.dests, manifest.directories
        dirs = [directory.dir for directory in directories]
        if (
            "%" in "".join(sources)
            or "%" in "".join(dests)
            or "%" in "".join(dirs)
            or not all(map(str.startswith, sources, repeat(source_url_prefix)))
            or not all(map(str.startswith, dests, repeat(dest_url_prefix)))
            or not all(map(str.startswith, dirs, repeat(dest_url_prefix)))
        ):
            return None
        cut_source, cut_dest = len(source_url_prefix), len(dest_url_prefix)
        source_relatives = [source[cut_source:] for source in sources]
        dest_relatives = [dest[cut_dest:] for dest in dests]
        dir_relatives = [value[cut_dest:] for value in dirs]
        dir_relatives = [relative[:-1] if relative.endswith("/") else relative for relative in dir_relatives]
        if not (
            all_relatives_admitted(source_relatives)
            and all_destination_relatives_admitted(dest_relatives)
            and all_destination_relatives_admitted(dir_relatives)
        ):
            return None
        dest_paths = [dest_prefix + relative for relative in dest_relatives]
        to_commit = FilesToCommit(
            [source_prefix + relative for relative in source_relatives], dest_paths, files.sizes, files.etags, dests
        )
        file_parents = self._file_parents(dest_paths)
        targets = []
        for relative, directory in zip(dir_relatives, directories, strict=True):
            path = dest_prefix + relative
            targets.append(TargetDirectory(path, directory.level, directory.status, path in file_parents))
        return to_commit, targets

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

    def _no_destination_twice(self, entry_file: EntryFile, dest_hashes: DuplicateHashes) -> None:
        """Hashes seen twice are candidates; confirm each exactly against the spilled paths (one rescan per
        ``_CANDIDATES_PER_SCAN`` candidates, and usually no candidate at all)."""
        batch: set[int] = set()
        for candidate in dest_hashes.candidates():
            batch.add(candidate)
            if len(batch) >= _CANDIDATES_PER_SCAN:
                self._confirm_duplicates(entry_file, batch)
                batch = set()
        if batch:
            self._confirm_duplicates(entry_file, batch)

    def _confirm_duplicates(self, entry_file: EntryFile, candidates: set[int]) -> None:
        """Compare the destinations whose hash is a candidate; two equal ones fail the job commit."""
        claimed: dict[str, str] = {}
        for chunk in entry_file.chunks():
            for row in chunk.rows:
                dest = row.dest
                if hash(dest) not in candidates:
                    continue
                other = claimed.get(dest)
                if other is not None:
                    claimants = (
                        f"listed twice by task attempt {other}"
                        if other == chunk.task_attempt_id
                        else f"claimed by two tasks: {other} and {chunk.task_attempt_id}"
                    )
                    raise DuplicateDestinationError(f"{row.dest_url}: destination {claimants}; nothing was committed")
                claimed[dest] = chunk.task_attempt_id
