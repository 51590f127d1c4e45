"""ScanTaskDirectory: list a task attempt's output into file and directory entries (part of task commit)."""

from __future__ import annotations

import logging
import posixpath
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ...admission import (
    JobAdmission,
    all_destination_relatives_admitted,
    all_relatives_admitted,
    declared_output_problem,
)
from ...errors import JobStateError, ManifestError
from ...manifest import DirEntry, EntryStatus, FileEntry
from ...statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    TASK_STAGE_SCAN_DIRECTORY,
)
from ...store import FileStatus
from ...store.operations import rewritten_path
from ..base import Stage

log = logging.getLogger(__name__)

_PROBES_BEFORE_LISTING = 8
"""Declared outputs going into more new directories of one destination directory than this: one listing of it
answers what the destination holds there, instead of one probe per directory (a partitioned writer's task
commit made 10,000 probes, one by one, for 10,000 partitions)."""


@dataclass(frozen=True, slots=True)
class ScanArguments:
    task_attempt_id: str
    outputs: Mapping[str, str] | None = None
    """The writer's own account of its files: path relative to the attempt directory -> path relative to the
    destination. ``None``: every file of the attempt directory, at the same relative path."""


@dataclass(frozen=True, slots=True)
class ScanResult:
    files: list[FileEntry]
    directories: list[DirEntry]


class ScanTaskDirectoryStage(Stage[ScanArguments, ScanResult]):
    """Depth-first listing of ``tasks/$taskAttemptId``; every file maps to the same relative path under dest.

    Hadoop's checksummed local filesystem writes ``.<name>.crc`` beside each file and hides it from listings;
    on a store with ``hidden_checksum_files`` (local disk) such side files are left out here too, and logged, so a
    task written by Hadoop commits what Hadoop would commit. On every other store they are ordinary files.
    Symbolic links are refused (``ManifestError`` naming the link), and so is a name whose destination a
    manifest may not name (``admission``), so task commit fails where job commit would.
    Each subdirectory (empty ones too) becomes a DirEntry with its depth and what the destination holds there
    now (probed only while the parent exists, as Hadoop does). Everything is committed, hidden files too.
    A writer that declares its ``outputs`` may keep its files anywhere in the attempt directory (flat, say):
    then exactly those files are listed, each at the destination path it names, with every directory above
    them; where many of those directories share a destination parent, one listing of the parent tells
    which exist. A job commit then empties one directory per task instead of one per task and partition, and the
    task side makes no directory per partition.
    Precondition: the attempt directory exists, else a ``JobStateError`` naming it.
    """

    name = TASK_STAGE_SCAN_DIRECTORY

    def execute(self, arguments: ScanArguments) -> ScanResult:
        if arguments.outputs is not None:
            return self._declared(arguments.task_attempt_id, arguments.outputs)
        root = self.paths.task_attempt_dir(arguments.task_attempt_id)
        files: list[FileEntry] = []
        directories: list[DirEntry] = []
        to_url = self.to_url
        max_depth = 0
        admission = JobAdmission(self.paths)
        skip_checksums = self.capabilities.hidden_checksum_files
        skipped = 0
        # (source dir, dest dir, depth, does the dest dir exist)
        stack: list[tuple[str, str, int, bool]] = [(root, self.paths.dest, 0, True)]
        while stack:
            source_dir, dest_dir, depth, dest_exists = stack.pop()
            try:
                children = self.list_dir(source_dir)
            except FileNotFoundError:
                if depth == 0:
                    raise self._missing_attempt_dir(arguments.task_attempt_id) from None
                raise JobStateError(
                    f"{to_url(source_dir)}: a directory of task attempt {arguments.task_attempt_id} that its parent "
                    "lists cannot be listed: deleted meanwhile, or a name the store's client rewrites (adlfs lists "
                    "'year=2024?' as 'year=2024': a directory name must not end in '?' or '#' on Azure)"
                ) from None
            subdirs: list[FileStatus] = []
            file_names = {_name(child) for child in children if not child.is_dir}
            for child in sorted(children, key=lambda c: c.path):
                name = _name(child)
                if child.is_link:
                    raise self._link_error(child, arguments.task_attempt_id)
                if child.is_dir:
                    subdirs.append(child)
                    continue
                if skip_checksums and _is_checksum_of_sibling(name, file_names):
                    log.debug("%s: skipped %s, a checksum file of the local filesystem", self.name, child.path)
                    skipped += 1
                    continue
                dest = posixpath.join(dest_dir, name)
                self._check_destination(admission, child, dest, arguments.task_attempt_id)
                files.append(FileEntry(to_url(child.path), to_url(dest), child.size, child.etag))
            for child in reversed(subdirs):
                name = _name(child)
                child_dest = posixpath.join(dest_dir, name)
                self._check_destination(admission, child, child_dest, arguments.task_attempt_id)
                status = self._dest_status(child_dest, dest_exists)
                directories.append(DirEntry(to_url(child_dest), status, depth + 1))
                max_depth = max(max_depth, depth + 1)
                stack.append((child.path, child_dest, depth + 1, status != EntryStatus.NOT_FOUND))
        if skipped:
            log.info(
                "%s: task attempt %s: skipped %d .NAME.crc checksum files of the local filesystem (not committed, "
                "as Hadoop's local filesystem hides them)",
                self.name,
                arguments.task_attempt_id,
                skipped,
            )
        return self._result(files, directories, max_depth)

    def _check_destination(self, admission: JobAdmission, child: FileStatus, dest: str, task_attempt_id: str) -> None:
        """A listed name must map to a destination a manifest may name (not into ``_temporary``, say)."""
        problem = admission.destination_problem(dest)
        if problem is not None:
            raise ManifestError(
                f"{self.to_url(child.path)}: output of task attempt {task_attempt_id} cannot be committed: "
                f"its destination {self.to_url(dest)} {problem}"
            )

    def _link_error(self, child: FileStatus, task_attempt_id: str) -> ManifestError:
        return ManifestError(
            f"{self.to_url(child.path)}: symbolic link in the output of task attempt {task_attempt_id}: "
            "links are not committed (the committed file would point wherever the link points, possibly outside "
            "the destination); write the file itself instead"
        )

    def _result(self, files: list[FileEntry], directories: list[DirEntry], max_depth: int) -> ScanResult:
        directories.sort(key=lambda entry: (entry.level, entry.dir))
        self.stats.add_sample(COMMITTER_TASK_FILE_COUNT, len(files))
        self.stats.add_sample(COMMITTER_TASK_FILE_SIZE, sum(entry.size for entry in files))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_COUNT, len(directories))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_DEPTH, max_depth)
        return ScanResult(files, directories)

    def _dest_status(self, dest_dir: str, parent_exists: bool) -> EntryStatus:
        """What the destination holds at ``dest_dir`` now; not probed below a parent that is missing."""
        if not parent_exists:
            return EntryStatus.NOT_FOUND
        found = self.info(dest_dir)
        if found is None:
            return EntryStatus.NOT_FOUND
        return EntryStatus.DIR if found.is_dir else EntryStatus.FILE

    def _children(self, dest_dir: str) -> dict[str, FileStatus]:
        """What one listing of a destination directory shows, by name; empty when it does not exist."""
        try:
            return {_name(child): child for child in self.list_dir(dest_dir)}
        except FileNotFoundError:
            return {}

    def _missing_attempt_dir(self, task_attempt_id: str) -> JobStateError:
        root = self.to_url(self.paths.task_attempt_dir(task_attempt_id))
        return JobStateError(
            f"{root}: task attempt {task_attempt_id} has no working directory "
            "(never set up, already aborted, or cleaned up)"
        )

    def _kept_as_named(
        self, task_attempt_id: str, source: str, source_prefix: str, dest: str, dest_prefix: str
    ) -> None:
        """``ManifestError`` for a declared output the store would keep, or rename to, under another name
        (``StoreCapabilities.kept_name``): the manifest would name another file than the store holds."""
        kept_name = self.capabilities.kept_name
        for path, prefix in ((source, source_prefix), (dest, dest_prefix)):
            kept = rewritten_path(kept_name, path, prefix.rstrip("/"))
            if kept is not None:
                raise ManifestError(
                    f"{self.to_url(path)}: declared output of task attempt {task_attempt_id}: this store keeps it as "
                    f"{kept!r} (its client reads a path as a URL: the manifest would name another file than it holds)"
                )

    def _declared(self, task_attempt_id: str, outputs: Mapping[str, str]) -> ScanResult:
        """Entries for the files the writer declared; each parent directory is listed once for their sizes."""
        root = self.paths.task_attempt_dir(task_attempt_id)
        to_url = self.to_url
        listings: dict[str, dict[str, FileStatus]] = {}

        def children_of(directory: str) -> dict[str, FileStatus]:
            if directory not in listings:
                try:
                    children = self.list_dir(directory)
                except FileNotFoundError:
                    if directory == root:
                        raise self._missing_attempt_dir(task_attempt_id) from None
                    children = []
                # A plain directory's status is never asked again (a file is looked up, or a link refused): not
                # keeping them keeps a status a partition out of the objects that live through the stage.
                listings[directory] = {_name(child): child for child in children if child.is_link or not child.is_dir}
            return listings[directory]

        checked_dirs: set[str] = {""}

        def no_link_above(source_dir: str) -> None:
            """A directory above a declared file that is a link would lead the rename outside the attempt."""
            if source_dir in checked_dirs:
                return
            above, _, segment = source_dir.rpartition("/")
            no_link_above(above)
            status = children_of(f"{root}/{above}" if above else root).get(segment)
            if status is not None and status.is_link:
                raise self._link_error(status, task_attempt_id)
            checked_dirs.add(source_dir)

        children_of(root)
        # Declared paths are relative and checked (declared_output_problem): a join is a concatenation. All are
        # checked at once on their text first; path by path only to name one at fault.
        admitted = all_relatives_admitted(list(outputs)) and all_destination_relatives_admitted(list(outputs.values()))
        admission = JobAdmission(self.paths)
        root_prefix, dest_prefix = admission.source_prefix(task_attempt_id), admission.dest_prefix
        files: list[FileEntry] = []
        dest_dirs: set[str] = set()
        claimed: dict[str, str] = {}
        # Where a probe tells links apart, a file alone in its directory is probed rather than the directory
        # listed: a writer of one file a partition would otherwise list a directory a file.
        probe = self.info_fast if self.capabilities.microsecond_calls else self.info
        declared_in = Counter(
            source.rpartition("/")[0] for source in (outputs if self.capabilities.symbolic_links else ())
        )
        for source_relative, dest_relative in sorted(outputs.items(), key=lambda item: item[1]):
            problem = None if admitted else declared_output_problem(source_relative, dest_relative)
            if problem is not None:
                raise ManifestError(f"task attempt {task_attempt_id}: declared {problem}")
            if dest_relative in claimed:
                raise ManifestError(
                    f"task attempt {task_attempt_id}: outputs {claimed[dest_relative]!r} and {source_relative!r} "
                    f"both go to {dest_relative!r}"
                )
            claimed[dest_relative] = source_relative
            source = root_prefix + source_relative
            self._kept_as_named(task_attempt_id, source, root_prefix, dest_prefix + dest_relative, dest_prefix)
            source_dir = source_relative.rpartition("/")[0]
            no_link_above(source_dir)
            parent, _, name = source.rpartition("/")
            listed = probe(source) if declared_in.get(source_dir) == 1 else children_of(parent).get(name)
            if listed is not None and listed.is_link:
                raise self._link_error(listed, task_attempt_id)
            if listed is None or listed.is_dir:
                raise JobStateError(f"{to_url(source)}: output of task attempt {task_attempt_id} does not exist")
            dest = dest_prefix + dest_relative
            files.append(FileEntry(to_url(source), to_url(dest), listed.size, listed.etag))
            dest_parent = dest_relative.rpartition("/")[0]
            if dest_parent and dest_parent not in dest_dirs:  # else it came with its ancestors, for an earlier file
                segments = dest_parent.split("/")
                dest_dirs.update("/".join(segments[:depth]) for depth in range(1, len(segments) + 1))
        directories: list[DirEntry] = []
        existing: dict[str, bool] = {"": True}
        siblings: dict[str, int] = {}
        for relative in dest_dirs:
            parent = relative.rpartition("/")[0]
            siblings[parent] = siblings.get(parent, 0) + 1
        listed_parents: dict[str, dict[str, FileStatus]] = {}
        for relative in sorted(dest_dirs, key=lambda d: (d.count("/"), d)):
            dest_dir = dest_prefix + relative
            parent, _, name = relative.rpartition("/")
            if not existing[parent]:
                status = EntryStatus.NOT_FOUND
            elif siblings[parent] > _PROBES_BEFORE_LISTING:
                if parent not in listed_parents:
                    listed_parents[parent] = self._children(posixpath.join(self.paths.dest, parent))
                found = listed_parents[parent].get(name)
                status = (
                    EntryStatus.NOT_FOUND if found is None else EntryStatus.DIR if found.is_dir else EntryStatus.FILE
                )
            else:
                status = self._dest_status(dest_dir, True)
            existing[relative] = status != EntryStatus.NOT_FOUND
            directories.append(DirEntry(to_url(dest_dir), status, relative.count("/") + 1))
        max_depth = max((entry.level for entry in directories), default=0)
        return self._result(files, directories, max_depth)


def _name(status: FileStatus) -> str:
    return status.path.rstrip("/").rsplit("/", 1)[-1]


def _is_checksum_of_sibling(name: str, file_names: set[str]) -> bool:
    """``.part-0.crc`` beside ``part-0``: a checksum side file of Hadoop's ChecksumFileSystem."""
    return name.startswith(".") and name.endswith(".crc") and name[1:-4] in file_names
