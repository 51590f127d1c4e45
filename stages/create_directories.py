"""CreateDirectories: make every destination directory the job's files go into."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import OutputConflictError
from ..manifest import EntryStatus
from ..parallel import run_bounded
from ..statistic_names import (
    JOB_STAGE_CREATE_TARGET_DIRS,
    OP_CREATE_DIRECTORIES,
    OP_DELETE_FILE_UNDER_DESTINATION,
    OP_MKDIR_RETURNED_FALSE,
    OP_PREPARE_DIR_ANCESTORS,
)
from .base import Stage
from .job_types import TargetDirectory

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CreateDirectoriesArguments:
    directories: list[TargetDirectory]


@dataclass(frozen=True, slots=True)
class CreateDirectoriesResult:
    created: frozenset[str]
    """Leaf directories this stage made (or found missing and made) in the store; not those that only their
    files bring into being."""


class CreateDirectoriesStage(Stage[CreateDirectoriesArguments, CreateDirectoriesResult]):
    """Delete files where directories must go, then ``mkdirs`` every leaf directory in parallel.

    As in Hadoop, a file that a task saw at a directory's place is deleted, and a leaf whose ``mkdirs`` meets a
    file (at the leaf or an ancestor below the destination) has that file deleted and is made again.
    Directories that every task saw as existing are trusted; the rename stage recreates one that vanished.
    On a store without real directories, nothing keeps a file from sitting at a directory's place or above it,
    so every directory is probed for one; and a leaf that a file goes into gets no marker object: its first
    file brings it into being, and a marker would only cost a call and show up as an odd empty "file" to
    readers such as gcsfs's ``find``.
    Postcondition: every leaf directory exists, or will once its files are renamed into it.
    """

    name = JOB_STAGE_CREATE_TARGET_DIRS

    def execute(self, arguments: CreateDirectoriesArguments) -> CreateDirectoriesResult:
        directories = sorted(arguments.directories, key=lambda d: (d.level, d.path))
        parents = {posixpath.dirname(d.path) for d in directories}
        leaves = [d for d in directories if d.path not in parents and d.status != EntryStatus.DIR]
        files_in_the_way = [d.path for d in directories if d.status == EntryStatus.FILE]
        if not self.capabilities.real_directories:
            # Nothing here stops a file at a directory's place (or above it): probe every directory once.
            files_in_the_way = self._with_ancestors(d.path for d in directories)
            leaves = [d for d in leaves if not d.receives_files]
        pool, in_flight = self.context.pool, self.context.max_in_flight

        if files_in_the_way:
            with self.stats.track(OP_PREPARE_DIR_ANCESTORS):
                run_bounded(pool, files_in_the_way, self._delete_file_in_the_way, max_in_flight=in_flight)

        created: list[str] = []
        with self.stats.track(OP_CREATE_DIRECTORIES):
            run_bounded(pool, leaves, self._create_leaf, max_in_flight=in_flight, on_result=created.append)
        log.info("%s: %d directories, %d leaves created", self.name, len(directories), len(created))
        return CreateDirectoriesResult(frozenset(created))

    def _with_ancestors(self, paths: Iterable[str]) -> list[str]:
        """``paths`` and every directory between each of them and the destination, once each."""
        below_dest = self.paths.dest.rstrip("/") + "/"
        every: set[str] = set()
        for path in paths:
            current = path
            while current.startswith(below_dest) and current not in every:
                every.add(current)
                current = posixpath.dirname(current)
        return sorted(every)

    def _delete_file_in_the_way(self, path: str) -> None:
        status = self.info(path)
        if status is not None and not status.is_dir:
            log.info("Deleting file %s where the job needs a directory", self.to_url(path))
            self.delete_file(path)

    def _create_leaf(self, leaf: TargetDirectory) -> str:
        try:
            self.mkdirs(leaf.path)
            return leaf.path
        except FileExistsError:
            self.stats.increment(OP_MKDIR_RETURNED_FALSE)
        blocker = self._file_in_the_way(leaf.path)
        if blocker is None:
            raise OutputConflictError(f"{self.to_url(leaf.path)}: cannot create directory")
        with self.stats.track(OP_DELETE_FILE_UNDER_DESTINATION):
            log.info("Deleting file %s where the job needs a directory", self.to_url(blocker))
            self.delete_file(blocker)
        self.mkdirs(leaf.path)
        return leaf.path

    def _file_in_the_way(self, path: str) -> str | None:
        """The highest file on the way from the destination down to ``path``, if below the destination."""
        dest = self.paths.dest.rstrip("/")
        relative = path[len(dest) + 1 :].split("/")
        current = dest
        for name in relative:
            current = f"{current}/{name}"
            status = self.info(current)
            if status is None:
                return None
            if not status.is_dir:
                return current
        return None
