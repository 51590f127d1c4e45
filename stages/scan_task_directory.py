"""ScanTaskDirectory: list a task attempt's output into file and directory entries (part of task commit)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import JobStateError
from ..manifest import DirEntry, EntryStatus, FileEntry
from ..statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    OP_LIST_STATUS,
    TASK_STAGE_SCAN_DIRECTORY,
)
from ..store import FileStatus
from .base import Stage


@dataclass(frozen=True, slots=True)
class ScanArguments:
    task_attempt_id: str


@dataclass(frozen=True, slots=True)
class ScanResult:
    files: list[FileEntry]
    directories: list[DirEntry]


class ScanTaskDirectoryStage(Stage[ScanArguments, ScanResult]):
    """Depth-first listing of ``tasks/$taskAttemptId``; every file maps to the same relative path under dest.

    Hadoop's checksummed local filesystem writes ``.<name>.crc`` beside each file and hides it from listings;
    such side files are left out here too, so a task written by Hadoop commits what Hadoop would commit.
    Each subdirectory (empty ones too) becomes a DirEntry with its depth and what the destination holds there
    now (probed only while the parent exists, as Hadoop does). Everything is committed, hidden files too.
    Precondition: the attempt directory exists, else a ``JobStateError`` naming it.
    """

    name = TASK_STAGE_SCAN_DIRECTORY

    def execute(self, arguments: ScanArguments) -> ScanResult:
        root = self.paths.task_attempt_dir(arguments.task_attempt_id)
        files: list[FileEntry] = []
        directories: list[DirEntry] = []
        to_url = self.store.to_url
        max_depth = 0
        # (source dir, dest dir, depth, does the dest dir exist)
        stack: list[tuple[str, str, int, bool]] = [(root, self.paths.dest, 0, True)]
        while stack:
            source_dir, dest_dir, depth, dest_exists = stack.pop()
            try:
                children = self.call(OP_LIST_STATUS, lambda d=source_dir: self.store.list_dir(d))  # type: ignore[misc]
            except FileNotFoundError:
                if depth == 0:
                    raise JobStateError(
                        f"{to_url(root)}: task attempt {arguments.task_attempt_id} has no working directory "
                        "(never set up, already aborted, or cleaned up)"
                    ) from None
                raise
            subdirs: list[FileStatus] = []
            file_names = {_name(child) for child in children if not child.is_dir}
            for child in sorted(children, key=lambda c: c.path):
                name = _name(child)
                if child.is_dir:
                    subdirs.append(child)
                    continue
                if _is_checksum_of_sibling(name, file_names):
                    continue
                dest = self.store.join(dest_dir, name)
                files.append(FileEntry(to_url(child.path), to_url(dest), child.size, child.etag))
            for child in reversed(subdirs):
                name = _name(child)
                child_dest = self.store.join(dest_dir, name)
                status = EntryStatus.NOT_FOUND
                if dest_exists:
                    found = self.info(child_dest)
                    if found is not None:
                        status = EntryStatus.DIR if found.is_dir else EntryStatus.FILE
                directories.append(DirEntry(to_url(child_dest), status, depth + 1))
                max_depth = max(max_depth, depth + 1)
                stack.append((child.path, child_dest, depth + 1, status != EntryStatus.NOT_FOUND))
        directories.sort(key=lambda entry: (entry.level, entry.dir))
        self.stats.add_sample(COMMITTER_TASK_FILE_COUNT, len(files))
        self.stats.add_sample(COMMITTER_TASK_FILE_SIZE, sum(entry.size for entry in files))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_COUNT, len(directories))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_DEPTH, max_depth)
        return ScanResult(files, directories)


def _name(status: FileStatus) -> str:
    return status.path.rstrip("/").rsplit("/", 1)[-1]


def _is_checksum_of_sibling(name: str, file_names: set[str]) -> bool:
    """``.part-0.crc`` beside ``part-0``: a checksum side file of Hadoop's ChecksumFileSystem."""
    return name.startswith(".") and name.endswith(".crc") and name[1:-4] in file_names
