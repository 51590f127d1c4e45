"""MergePaths: Hadoop FileOutputCommitter's ``mergePaths``, move a directory tree's files into another tree.

The v1 task commit (attempt directory -> committed task directory), the v1 job commit (every committed task
directory -> destination) and the v2 task commit (attempt directory -> destination) are all this one move.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...admission import declared_output_problem
from ...errors import CommitterError, JobStateError, OutputConflictError
from ...statistic_names import JOB_STAGE_RENAME_FILES, TASK_STAGE_MERGE_FILES
from ...store import FileStatus
from ..base import Stage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MergeSource:
    """One task's tree to move: its files keep their paths relative to ``directory`` unless ``outputs`` says."""

    task_id: str
    directory: str
    outputs: Mapping[str, str] | None = None
    """A writer's declared files: path relative to ``directory`` -> path relative to the target; only they move."""


@dataclass(frozen=True, slots=True)
class MergePathsArguments:
    sources: Sequence[MergeSource]
    target: str
    finish_copies: bool = False
    """A journaled job commit (``stages/file_output/journal.py``): where a copy-then-delete rename of a crashed
    run copied but did not delete, the target holds the source's bytes (equal checksums): finish it by deleting
    the source, instead of calling the copy a conflict."""


@dataclass(frozen=True, slots=True)
class MovedFile:
    task_id: str
    source_relative: str
    target_relative: str
    size: int


@dataclass(slots=True)
class MergePathsResult:
    moved: list[MovedFile] = field(default_factory=list)
    directories: set[str] = field(default_factory=set)
    """Target directories (relative, ancestors included) of what moved, and empty ones made."""

    @property
    def bytes(self) -> int:
        return sum(file.size for file in self.moved)


class MergePathsStage(Stage[MergePathsArguments, MergePathsResult]):
    """Move every file of each source tree to the same relative path under the target, one rename per file.

    As Hadoop's ``mergePaths``, by a tree walk, but every move is the store's no-overwrite ``rename_file``: a
    file or directory already at a target path is an ``OutputConflictError`` naming it (Hadoop deletes it), unless
    ``delete.target.files`` asks to replace it. No directory is renamed whole: the store offers no directory
    rename, and on object stores Hadoop's is file by file too. A missing source is no output (Hadoop's "no
    output found"). Symbolic links are refused. Repeatable: a file moved by an interrupted run is no longer in
    its source, so a rerun moves the rest. Postcondition: every source file is at its target path.
    """

    name = TASK_STAGE_MERGE_FILES

    def execute(self, arguments: MergePathsArguments) -> MergePathsResult:
        result = MergePathsResult()
        for source in arguments.sources:
            if source.outputs is None:
                self._merge_tree(source, arguments.target, result, arguments.finish_copies)
            else:
                self._merge_declared(source, arguments.target, result)
        log.info(
            "%s: moved %d files (%d bytes) into %s",
            self.name,
            len(result.moved),
            result.bytes,
            self.to_url(arguments.target),
        )
        return result

    def _merge_tree(
        self, source: MergeSource, target: str, result: MergePathsResult, finish_copies: bool = False
    ) -> None:
        real_directories = self.capabilities.real_directories
        stack: list[tuple[str, str]] = [(source.directory, "")]
        while stack:
            directory, relative = stack.pop()
            try:
                children = self.list_dir(directory)
            except FileNotFoundError:
                if relative:
                    raise
                log.info("%s: task %s has no output in %s", self.name, source.task_id, self.to_url(directory))
                return
            if real_directories or not children:
                self._make_directory(posixpath.join(target, relative) if relative else target, source.task_id)
            if relative:
                result.directories.add(relative)
            for child in sorted(children, key=lambda status: status.path):
                name = child.path.rstrip("/").rsplit("/", 1)[-1]
                child_relative = posixpath.join(relative, name) if relative else name
                if name in ("", ".", ".."):  # a store that keeps such segments (Azure, of a task's '..\\x')
                    raise CommitterError(
                        f"{self.to_url(child.path)}: the output of task {source.task_id} has a {name!r} path "
                        "segment, which would lead out of its directory; not committed"
                    )
                self._refuse_link(child, source.task_id)
                if child.is_dir:
                    stack.append((child.path, child_relative))
                else:
                    self._move(child.path, posixpath.join(target, child_relative), source.task_id, finish_copies)
                    result.moved.append(MovedFile(source.task_id, child_relative, child_relative, child.size))

    def _merge_declared(self, source: MergeSource, target: str, result: MergePathsResult) -> None:
        assert source.outputs is not None
        made: set[str] = set()
        for source_relative, target_relative in sorted(source.outputs.items(), key=lambda item: item[1]):
            problem = declared_output_problem(source_relative, target_relative)
            if problem is not None:
                raise CommitterError(f"task {source.task_id}: declared {problem}")
            path = posixpath.join(source.directory, source_relative)
            status = self.info(path)
            if status is None or status.is_dir:
                raise JobStateError(f"{self.to_url(path)}: declared output of task {source.task_id} does not exist")
            self._refuse_link(status, source.task_id)
            destination = posixpath.join(target, target_relative)
            parent = posixpath.dirname(destination)
            if self.capabilities.real_directories and parent not in made:
                self._make_directory(parent, source.task_id)
                made.add(parent)
            self._move(path, destination, source.task_id)
            result.moved.append(MovedFile(source.task_id, source_relative, target_relative, status.size))
            segments = target_relative.split("/")[:-1]
            result.directories.update("/".join(segments[:depth]) for depth in range(1, len(segments) + 1))

    def _refuse_link(self, status: FileStatus, task_id: str) -> None:
        if status.is_link:
            raise CommitterError(
                f"{self.to_url(status.path)}: symbolic link in the output of task {task_id}: links are not "
                "committed; write the file itself instead"
            )

    def _make_directory(self, path: str, task_id: str) -> None:
        try:
            self.mkdirs(path)
            return
        except FileExistsError:
            if not self.config.delete_target_files:
                raise OutputConflictError(
                    f"{self.to_url(path)}: a file is where task {task_id} needs a directory; not replaced "
                    "(mapreduce.manifest.committer.delete.target.files=true replaces it)"
                ) from None
        log.info("Deleting file %s where task %s needs a directory", self.to_url(path), task_id)
        self.delete_file(path)
        self.mkdirs(path)

    def _move(self, source: str, destination: str, task_id: str, finish_copies: bool = False) -> None:
        try:
            self.rename_file(source, destination)
            return
        except FileExistsError:
            found = self.info(destination)
            if finish_copies and self._is_unfinished_copy(source, found):
                log.info("Finishing the interrupted rename of %s (task %s)", self.to_url(destination), task_id)
                self.delete_file(source)
                return
            if not self.config.delete_target_files:
                what = "a directory" if found is not None and found.is_dir else "a file"
                raise OutputConflictError(
                    f"{self.to_url(destination)}: {what} is already there; task {task_id} does not overwrite it "
                    "(mapreduce.manifest.committer.delete.target.files=true replaces it)"
                ) from None
        if found is not None and found.is_dir:
            self.delete_dir(destination)
        else:
            self.delete_file(destination)
        self.rename_file(source, destination)

    def _is_unfinished_copy(self, source: str, found: FileStatus | None) -> bool:
        if self.capabilities.atomic_rename or found is None or found.is_dir:
            return False
        status = self.info(source)
        return (
            status is not None and not status.is_dir and status.size == found.size and self.same_content(status, found)
        )


class JobMergePathsStage(MergePathsStage):
    """The v1 job commit's merge of every committed task directory, timed as Hadoop's rename stage."""

    name = JOB_STAGE_RENAME_FILES
