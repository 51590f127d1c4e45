"""An earlier job's ``_SUCCESS``, set aside while a job runs, and put back if the job is aborted before its
commit point.

A job's setup takes the ``_SUCCESS`` it finds out of the destination (so that it is never taken for this job's,
as Hadoop deletes it) by renaming it into the job attempt's directory (``aside``: ``previous-_SUCCESS``, or
``_PREVIOUS_SUCCESS`` in the v1/v2 layout); its job commit does the same with a ``_SUCCESS`` another job wrote
since (``SaveSuccessStage``), in place of the older copy it kept. The store's rename never overwrites and moves
the bytes as they are, so the ``_SUCCESS`` last in the destination is at every moment there or in one job's
directory (on a store whose rename copies then deletes, a kill in between leaves it in both: the one in the
destination stays).

An abort before the commit point puts its copy back, by a rename that fails if a ``_SUCCESS`` is there by then,
and only when its copy is the newest of every copy set aside under ``_temporary``: a copy is taken out of the
destination only when it is the one there, so the newest copy (by the store's modification time, ties by path)
is the ``_SUCCESS`` that was last in the destination, and an older one is never put back over what came after
it. A copy that is not put back goes with the job's directory.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from ..paths import PREVIOUS_SUCCESS, TEMPORARY_DIR, TRASH_DIR
from ..protocols.file_output.layout import FILE_OUTPUT_PREVIOUS_SUCCESS
from ..store import FileStatus
from .base import Stage

log = logging.getLogger(__name__)

Gate = Stage[Any, Any]


def set_aside(gate: Gate, success: str, aside: str) -> bool:
    """Move the ``_SUCCESS`` at ``success`` to ``aside`` if there is one; whether one was moved.

    Precondition: nothing is at ``aside`` (a new job attempt directory). A ``_SUCCESS`` another job takes first,
    or that is gone by the rename, is no longer this job's to keep: nothing is moved then."""
    if gate.info(success) is None:
        return False
    try:
        gate.rename_file(success, aside)
    except FileNotFoundError:
        return False
    log.info("Set the earlier %s aside as %s", gate.to_url(success), gate.to_url(aside))
    return True


def would_restore(gate: Gate, success: str, owned: str) -> str | None:
    """The copy ``restore`` would put back now, if any (read only: the dry run and ``status``)."""
    return _restorable(gate, success, owned)


def restore(gate: Gate, success: str, owned: str) -> bool:
    """Put the job's copy back at ``success`` if no ``_SUCCESS`` is there and it is the newest copy set aside;
    whether it was put back. ``owned``: the job's copy, or the directory holding the copies of all its attempts
    (an earlier attempt's setup may have taken it). Repeatable: once back, the copy is gone from the job."""
    path = _restorable(gate, success, owned)
    if path is None:
        return False
    try:
        gate.rename_file(path, success)
    except FileExistsError:
        log.warning("Not putting back %s: %s was written meanwhile", gate.to_url(path), gate.to_url(success))
        return False
    except FileNotFoundError:
        return False  # another abort of the job put it back meanwhile
    log.info("Put back the earlier %s from %s", gate.to_url(success), gate.to_url(path))
    return True


def _restorable(gate: Gate, success: str, owned: str) -> str | None:
    """The newest copy set aside, if it is the job's (at or below ``owned``) and nothing is at ``success``."""
    copies = _copies_set_aside(gate)
    if not any(_within(path, owned) for _, path in copies):
        return None
    if gate.info(success) is not None:
        log.info("Not putting back the copy in %s: %s is in place", gate.to_url(owned), gate.to_url(success))
        return None
    newest = max(copies, key=lambda copy: _order(*copy))[1]
    if not _within(newest, owned):
        log.info("Not putting back the copy in %s: %s was set aside after it", gate.to_url(owned), gate.to_url(newest))
        return None
    return newest


def _within(path: str, owned: str) -> bool:
    return path == owned or path.startswith(owned.rstrip("/") + "/")


def _order(status: FileStatus, path: str) -> tuple[float, str]:
    return (status.modified or 0.0, path)


def _copies_set_aside(gate: Gate) -> list[tuple[FileStatus, str]]:
    """Every copy of a ``_SUCCESS`` set aside under the destination's ``_temporary``, by any job: in a job attempt
    directory ``_temporary/<jobId>/<NN>/`` or a v1/v2 one, ``_temporary/<appAttempt>/``."""
    temporary = posixpath.join(gate.paths.dest, TEMPORARY_DIR)
    found: list[tuple[FileStatus, str]] = []
    for entry in gate.list_dir_if_present(temporary) or []:
        name = posixpath.basename(entry.path.rstrip("/"))
        if not entry.is_dir or name == TRASH_DIR:
            continue
        top = posixpath.join(temporary, name)
        for status in gate.list_dir_if_present(top) or []:
            child = posixpath.basename(status.path.rstrip("/"))
            if not status.is_dir and child == FILE_OUTPUT_PREVIOUS_SUCCESS:
                found.append((status, posixpath.join(top, child)))
            elif status.is_dir and len(child) == 2 and child.isdigit():
                path = posixpath.join(top, child, PREVIOUS_SUCCESS)
                kept = gate.info(path)
                if kept is not None and not kept.is_dir:
                    found.append((kept, path))
    return found
