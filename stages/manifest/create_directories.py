"""CreateDirectories: make every destination directory the job's files go into."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...errors import OutputConflictError
from ...manifest import EntryStatus
from ...parallel import run_bounded, slices
from ...statistic_names import (
    JOB_STAGE_CREATE_TARGET_DIRS,
    OP_CREATE_DIRECTORIES,
    OP_DELETE_FILE_UNDER_DESTINATION,
    OP_MKDIR_RETURNED_FALSE,
    OP_PREPARE_DIR_ANCESTORS,
)
from ...store import FileStatus
from ..base import Stage
from ..journal import Journal, JournalRun
from .job_types import TargetDirectory

log = logging.getLogger(__name__)

T = TypeVar("T")

_PROBES_BEFORE_LISTING = 8
"""More directories to probe in one directory than this: one listing of it answers for them (as the task commit
of declared outputs does, ``scan_task_directory``)."""
_MAX_CALLS_PER_UNIT = 256
"""Most store calls in one unit of work on a store whose calls take microseconds."""


@dataclass(frozen=True, slots=True)
class CreateDirectoriesArguments:
    directories: list[TargetDirectory]
    journal: JournalRun | None = None
    """Records, before anything changes, the directories this stage is about to create (an abort removes those,
    if empty, and no others) and the files in the way it is about to delete. ``None``: record nothing."""
    movable: frozenset[str] = frozenset()
    """Leaves whose file may arrive with its source directory (``directory_moves``): those found missing are
    journaled as this job's, but not made; the rename stage moves a directory there."""
    before_changes: Callable[[], object] = lambda: None
    """Called once the probes are back, before the first change: where the caller's own write must precede the
    destination's first change (the job commit's ``commit-started`` record), it goes out with the probes."""


@dataclass(frozen=True, slots=True)
class CreateDirectoriesResult:
    created: frozenset[str]
    """Leaf directories this stage made (or found missing and made) in the store; not those that only their
    files bring into being."""
    clear: frozenset[str] = frozenset()
    """Directories the probe found missing on a store without real directories: nothing was in them, so a file
    of the job that goes directly into one finds nothing in its way, unless a writer outside the job puts it
    there meanwhile (which the store's conditional copy still refuses). The rename stage tells the store so
    (``RenameHint.dest_clear``) and spares a probe a file."""
    moved_in: frozenset[str] = frozenset()
    """Leaves of ``CreateDirectoriesArguments.movable`` that the probe found missing: journaled, not made, for
    the rename stage to move a source directory to."""


class CreateDirectoriesStage(Stage[CreateDirectoriesArguments, CreateDirectoriesResult]):
    """Probe the directories the job needs, refuse files in their way, then ``mkdirs`` every leaf in parallel.

    A user's file where a directory must go (``out/year=2024`` a file, a task writing ``year=2024/a.csv``) is
    an ``OutputConflictError`` naming it, raised before anything in the destination changes, unless
    ``delete.target.files`` is set: that key means "replace", and the file is deleted for good (an abort
    cannot bring it back). Hadoop deletes such files whatever the key says.
    Every directory a task did not see as existing, and its ancestors, is probed once (or seen in one listing
    of its parent, where many share it); those missing are journaled before they are made, so an abort removes
    exactly the directories this job created, and only those are made.
    Directories that every task saw as existing are trusted; the rename stage recreates one that vanished.
    On a store without real directories, nothing keeps a file from sitting at a directory's place or above it,
    so every directory is probed; and a leaf that a file goes into gets no marker object: its first file
    brings it into being, and a marker would only cost a call and show up as an odd empty "file" to readers
    such as gcsfs's ``find``.
    Postcondition: every leaf directory exists, or will once its files are renamed (or its source directory
    moved) into it.
    """

    name = JOB_STAGE_CREATE_TARGET_DIRS

    def execute(self, arguments: CreateDirectoriesArguments) -> CreateDirectoriesResult:
        directories = sorted(arguments.directories, key=lambda d: (d.level, d.path))
        parents = {d.path.rpartition("/")[0] for d in directories}
        leaves = [d for d in directories if d.path not in parents and d.status != EntryStatus.DIR]
        if self.capabilities.real_directories:
            to_probe = self._with_ancestors(d.path for d in directories if d.status != EntryStatus.DIR)
        else:
            # Nothing here stops a file at a directory's place (or above it): probe every directory once.
            to_probe = self._with_ancestors(d.path for d in directories)
            leaves = [d for d in leaves if not d.receives_files]
        pool, in_flight = self.context.pool, self.context.max_in_flight

        found = self._statuses(to_probe)
        arguments.before_changes()
        missing = sorted(path for path, status in found.items() if status is None)
        files_in_the_way = sorted(path for path, status in found.items() if status is not None and not status.is_dir)
        if files_in_the_way and not self.config.delete_target_files:
            raise self._conflict(files_in_the_way)
        if arguments.journal is not None and (missing or files_in_the_way):
            Journal(self, arguments.journal).record_directories(missing + files_in_the_way, files_in_the_way)

        if files_in_the_way:
            with self.stats.track(OP_PREPARE_DIR_ANCESTORS):
                run_bounded(pool, files_in_the_way, self._delete_file_in_the_way, max_in_flight=in_flight)

        # A leaf the probe found as a directory is there already: a mkdirs would only cost a call (and it is
        # not this job's: it is not journaled, so it must not count as created either).
        moved_in = frozenset(path for path in arguments.movable if path in found and found[path] is None)
        to_create = [leaf for leaf in leaves if not _is_directory(found.get(leaf.path)) and leaf.path not in moved_in]
        # A directory moved in needs its parent, which no mkdirs of a leaf below it makes now.
        to_create += [
            TargetDirectory(parent, parent.count("/"), EntryStatus.NOT_FOUND)
            for parent in sorted({path.rpartition("/")[0] for path in moved_in})
            if parent in found and found[parent] is None
        ]
        created: list[str] = []
        with self.stats.track(OP_CREATE_DIRECTORIES):
            run_bounded(
                pool,
                self._units(to_create),
                self._create_unit,
                max_in_flight=in_flight,
                on_result=created.extend,
            )
        log.info(
            "%s: %d directories, %d probed, %d leaves created, %d left to be moved in",
            self.name,
            len(directories),
            len(found),
            len(created),
            len(moved_in),
        )
        clear = frozenset() if self.capabilities.real_directories else frozenset(missing)
        return CreateDirectoriesResult(frozenset(created), clear, moved_in)

    def _units(self, items: Sequence[T]) -> list[Sequence[T]]:
        """``items`` cut into units of work for the pool. Where a store call takes microseconds, one pool task
        per call cost more than the call (a future, a queue hand-off and a thread switch under the GIL: most
        of a many-partition job commit on local disk), so each unit holds a share of a worker's
        calls; where calls are slow, one call per unit keeps every thread of the pool busy."""
        if not self.capabilities.microsecond_calls:
            return slices(items, 1)
        return slices(items, max(1, min(_MAX_CALLS_PER_UNIT, len(items) // (4 * self.context.max_in_flight) + 1)))

    def _statuses(self, paths: list[str]) -> dict[str, FileStatus | None]:
        """What the store holds at each of ``paths``: ``None`` where nothing is.

        On a store with real directories, a directory with more than ``_PROBES_BEFORE_LISTING`` of the paths as
        children is listed once instead (a partitioned job's thousands of new partitions are one listing of the
        destination, not thousands of probes). A child the listing shows as a symbolic link is probed, so a
        link to a directory counts as a directory, as a probe sees it. Elsewhere a listing can show a file and
        a directory of one name, so every path is probed.
        """
        pool, in_flight = self.context.pool, self.context.max_in_flight
        to_probe = paths
        listed: list[tuple[str, list[str]]] = []
        if self.capabilities.real_directories:
            children: dict[str, list[str]] = {}
            for path in paths:
                children.setdefault(path.rpartition("/")[0], []).append(path)
            listed = [(parent, names) for parent, names in children.items() if len(names) > _PROBES_BEFORE_LISTING]
            if listed:
                answered = {path for _, names in listed for path in names}
                to_probe = [path for path in paths if path not in answered]
        found: dict[str, FileStatus | None] = {}

        def listing(item: tuple[str, list[str]]) -> tuple[list[str], dict[str, FileStatus]]:
            return item[1], self._children(item[0])

        def take(result: tuple[list[str], dict[str, FileStatus]]) -> None:
            wanted, shown = result
            for path in wanted:
                status = shown.get(path.rpartition("/")[2])
                if status is not None and status.is_link:
                    to_probe.append(path)
                else:
                    found[path] = status

        def record(probed: list[tuple[str, FileStatus | None]]) -> None:
            found.update(probed)

        run_bounded(pool, listed, listing, max_in_flight=in_flight, on_result=take)
        run_bounded(pool, self._units(to_probe), self._probe_unit, max_in_flight=in_flight, on_result=record)
        return found

    def _children(self, directory: str) -> dict[str, FileStatus]:
        """One listing of ``directory``, by name; empty when it is missing or not a directory (its own probe or
        listing reports what is there)."""
        try:
            return {child.path.rstrip("/").rpartition("/")[2]: child for child in self.list_dir(directory)}
        except (FileNotFoundError, NotADirectoryError):
            return {}

    def _probe_unit(self, paths: Sequence[str]) -> list[tuple[str, FileStatus | None]]:
        return [(path, self.info(path)) for path in paths]

    def _create_unit(self, leaves: Sequence[TargetDirectory]) -> list[str]:
        return [self._create_leaf(leaf) for leaf in leaves]

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
                current = current.rpartition("/")[0]
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


def _is_directory(status: FileStatus | None) -> bool:
    return status is not None and status.is_dir
