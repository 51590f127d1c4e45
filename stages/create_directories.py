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
from ..store import FileStatus
from .base import Stage
from .job_types import TargetDirectory
from .journal import Journal, JournalRun

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CreateDirectoriesArguments:
    directories: list[TargetDirectory]
    journal: JournalRun | None = None
    """Records, before anything changes, the directories this stage is about to create (an abort removes those,
    if empty, and no others) and the files in the way it is about to delete. ``None``: record nothing."""


@dataclass(frozen=True, slots=True)
class CreateDirectoriesResult:
    created: frozenset[str]
    """Leaf directories this stage made (or found missing and made) in the store; not those that only their
    files bring into being."""


class CreateDirectoriesStage(Stage[CreateDirectoriesArguments, CreateDirectoriesResult]):
    """Probe the directories the job needs, refuse files in their way, then ``mkdirs`` every leaf in parallel.

    A user's file where a directory must go (``out/year=2024`` a file, a task writing ``year=2024/a.csv``) is
    an ``OutputConflictError`` naming it, raised before anything in the destination changes, unless
    ``delete.target.files`` is set: that key means "replace", and the file is deleted for good (an abort
    cannot bring it back). Hadoop deletes such files whatever the key says.
    Every directory a task did not see as existing, and its ancestors, is probed once; those missing are
    journaled before they are made, so an abort removes exactly the directories this job created.
    Directories that every task saw as existing are trusted; the rename stage recreates one that vanished.
    On a store without real directories, nothing keeps a file from sitting at a directory's place or above it,
    so every directory is probed; and a leaf that a file goes into gets no marker object: its first file
    brings it into being, and a marker would only cost a call and show up as an odd empty "file" to readers
    such as gcsfs's ``find``.
    Postcondition: every leaf directory exists, or will once its files are renamed into it.
    """

    name = JOB_STAGE_CREATE_TARGET_DIRS

    def execute(self, arguments: CreateDirectoriesArguments) -> CreateDirectoriesResult:
        directories = sorted(arguments.directories, key=lambda d: (d.level, d.path))
        parents = {posixpath.dirname(d.path) for d in directories}
        leaves = [d for d in directories if d.path not in parents and d.status != EntryStatus.DIR]
        if self.capabilities.real_directories:
            to_probe = self._with_ancestors(d.path for d in directories if d.status != EntryStatus.DIR)
        else:
            # Nothing here stops a file at a directory's place (or above it): probe every directory once.
            to_probe = self._with_ancestors(d.path for d in directories)
            leaves = [d for d in leaves if not d.receives_files]
        pool, in_flight = self.context.pool, self.context.max_in_flight

        found: dict[str, FileStatus | None] = {}
        run_bounded(pool, to_probe, self._probe, max_in_flight=in_flight, on_result=lambda r: found.update([r]))
        missing = sorted(path for path, status in found.items() if status is None)
        files_in_the_way = sorted(path for path, status in found.items() if status is not None and not status.is_dir)
        if files_in_the_way and not self.config.delete_target_files:
            raise self._conflict(files_in_the_way)
        if arguments.journal is not None and (missing or files_in_the_way):
            Journal(self, arguments.journal).record_directories(missing + files_in_the_way, files_in_the_way)

        if files_in_the_way:
            with self.stats.track(OP_PREPARE_DIR_ANCESTORS):
                run_bounded(pool, files_in_the_way, self._delete_file_in_the_way, max_in_flight=in_flight)

        created: list[str] = []
        with self.stats.track(OP_CREATE_DIRECTORIES):
            run_bounded(pool, leaves, self._create_leaf, max_in_flight=in_flight, on_result=created.append)
        log.info("%s: %d directories, %d leaves created", self.name, len(directories), len(created))
        return CreateDirectoriesResult(frozenset(created))

    def _probe(self, path: str) -> tuple[str, FileStatus | None]:
        return path, self.info(path)

    def _conflict(self, files: list[str]) -> OutputConflictError:
        shown = ", ".join(self.to_url(path) for path in files[:5]) + (", ..." if len(files) > 5 else "")
        return OutputConflictError(
            f"{shown}: {len(files)} file(s) where the job's output needs a directory; nothing was changed (set "
            "mapreduce.manifest.committer.delete.target.files=true to replace them)"
        )

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
        log.info("Deleting file %s where the job needs a directory (delete.target.files)", self.to_url(path))
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
        if not self.config.delete_target_files:
            raise self._conflict([blocker])  # appeared after the probe
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
