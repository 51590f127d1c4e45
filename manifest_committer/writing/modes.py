"""Save modes, and the replacement of old output once a new job has committed.

Overwrite never deletes before the job commit: the files present before it are listed first, the job commits,
and only then are those listed files deleted. A failed job therefore leaves the old content in place; a reader
during the short window after the commit may see old and new files together. Dynamic partition overwrite does
the same, restricted to the partition directories the job wrote. Under the transactional protocol nothing is
deleted: the commit record lists the old files as ``removed``, which readers honour at once (no window).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..paths import TEMPORARY_DIR
from ..protocols.base import ReplacingCommit
from ..success_data import SUCCESS_MARKER

if TYPE_CHECKING:
    from ..protocols.base import CommitterBase

log = logging.getLogger(__name__)


class SaveMode(enum.Enum):
    """Spark's save modes, by the names ``DataFrameWriter.mode`` accepts."""

    ERROR_IF_EXISTS = "errorifexists"
    IGNORE = "ignore"
    APPEND = "append"
    OVERWRITE = "overwrite"

    @classmethod
    def parse(cls, text: str) -> SaveMode:
        """Spark's spellings: ``error``/``errorifexists``/``default``, ``ignore``, ``append``, ``overwrite``."""
        key = text.strip().lower().replace("_", "")
        if key in ("error", "errorifexists", "default"):
            return cls.ERROR_IF_EXISTS
        for mode in cls:
            if mode.value == key:
                return mode
        raise ConfigError(f"save mode {text!r} is not one of errorifexists, ignore, append, overwrite")


class PartitionOverwriteMode(enum.Enum):
    """``spark.sql.sources.partitionOverwriteMode``: replace everything, or only the partitions written."""

    STATIC = "static"
    DYNAMIC = "dynamic"

    @classmethod
    def parse(cls, text: str) -> PartitionOverwriteMode:
        key = text.strip().lower()
        for mode in cls:
            if mode.value == key:
                return mode
        raise ConfigError(f"partitionOverwriteMode {text!r} is not one of static, dynamic")


def _is_job_state(relative: str) -> bool:
    """Paths below the destination that are not data: the committer's working tree and the marker."""
    first = relative.split("/", 1)[0]
    return first == TEMPORARY_DIR or relative == SUCCESS_MARKER


def destination_has_data(fs: Any, destination: str) -> bool:
    """Whether the destination exists and holds anything but a ``_temporary`` tree (Spark's "path exists")."""
    if not fs.exists(destination):
        return False
    if not fs.isdir(destination):
        return True
    for entry in fs.ls(destination, detail=False):
        if posixpath.basename(str(entry).rstrip("/")) != TEMPORARY_DIR:
            return True
    return False


@dataclass(frozen=True, slots=True)
class OldOutput:
    """Files and directories that existed before a job commit and must go once it has succeeded."""

    files: tuple[str, ...]
    directories: tuple[str, ...]


def list_old_output(fs: Any, destination: str, partition_dirs: Iterable[str] | None) -> OldOutput:
    """What overwrite replaces: every data file (``partition_dirs is None``) or those in the given partitions.

    ``_temporary`` (where concurrent jobs keep their state) and ``_SUCCESS`` (rewritten by the commit) are
    never part of it.
    """
    root = destination.rstrip("/")
    roots = [root] if partition_dirs is None else [posixpath.join(root, d) for d in sorted(set(partition_dirs)) if d]
    files: list[str] = []
    directories: list[str] = []
    for base in roots:
        if not fs.exists(base):
            continue
        for name, detail in fs.find(base, withdirs=True, detail=True).items():
            path = str(name).rstrip("/")
            relative = posixpath.relpath(path, root)
            if relative == "." or _is_job_state(relative):
                continue
            (directories if detail.get("type") == "directory" else files).append(path)
    return OldOutput(tuple(sorted(files)), tuple(sorted(directories)))


def commit_replacing(
    committer: CommitterBase, old: OldOutput | None, accepted_attempts: Mapping[str, str] | None
) -> ReplacingCommit:
    """Commit the job; with ``old`` (overwrite), replace that output as the protocol does; returns the summary and
    the number of old files replaced.

    The replaced files go through ``commit_job_replacing`` (deleted under the store retry policy after the commit
    by the rename-based protocols: a transient error that stopped the deletes would leave old and new rows
    mixed; listed as ``removed`` by the transactional one). Directories the deletes emptied are then removed,
    best effort: an empty directory left behind is harmless.
    """
    if old is None:
        return ReplacingCommit(committer.commit_job(accepted_attempts), 0)
    committed = committer.commit_job_replacing(old.files, accepted_attempts)
    if len(old.files) > committed.replaced:
        log.debug("%d old output files were already gone", len(old.files) - committed.replaced)
    fs = committer.store.fs
    for directory in sorted(old.directories, key=lambda d: d.count("/"), reverse=True):
        with contextlib.suppress(FileNotFoundError, OSError):
            if not fs.ls(directory, detail=False):
                fs.rmdir(directory)
    return committed
