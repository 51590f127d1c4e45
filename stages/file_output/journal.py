"""The v1/v2 job commit's durable record: what decides, after a crash, which destination files are this job's.

Hadoop's FileOutputCommitter keeps no such record, so nothing can undo an interrupted v1 merge. Here the job
commit writes ``_temporary/<appAttempt>/_COMMIT_STARTED.json`` before it first changes the destination:

- ``accepted``: task id -> attempt id, the tasks the commit publishes (a rerun publishes exactly these);
- ``files``: every file of those tasks' committed directories (v1), as task id, path relative to the committed
  task directory (which is also its path relative to the destination) and size;
- ``createdDirectories``: the destination directories the merge will need that did not exist yet.

A row is this job's when its source has left the committed task directory and the destination holds a file of
its size (the store's rename never overwrites, so only this job's rename can have put it there), or, on a
copy-then-delete store, both are there with equal checksums (``journal.evidence``, shared with the manifest
protocol). A destination file whose source is still waiting, or any file the record does not name, is never
this job's, whatever its size. The record goes first when the job's state is deleted
(``FileOutputCleanupStage``), so no evidence outlives it: without the record, nothing in the destination is
this job's. A torn record (a kill while it was written) is no record: the commit had changed nothing yet.

Not undone: with ``delete.target.files``, a file the merge deleted to make way for this job's is gone (the
abort removes this job's file, not the one it replaced), as in the manifest protocol.

The commit point is this job's ``_SUCCESS`` in place, or ``_COMMIT_FINISHED.json`` (the same summary) with
``marksuccessfuljobs=false``; after it, abort keeps the output.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._json import dump_json, load_json_document
from ...admission import destination_relative_problem
from ...errors import ManifestError
from ...paths import check_id
from ...protocols.file_output.layout import FileOutputPaths
from ...success_data import SuccessData
from ..base import Stage
from ..journal import this_jobs_summary

log = logging.getLogger(__name__)

FILE_OUTPUT_RECORD_TYPE = "manifest-committer/file-output-commit-started/1"

Gate = Stage[Any, Any]


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """One file the job commit moves: ``committed_task_dir(task_id)/relative`` -> ``dest/relative``."""

    task_id: str
    relative: str
    size: int


@dataclass(frozen=True, slots=True)
class FileOutputCommitRecord:
    """The content of ``_COMMIT_STARTED.json``; see the module."""

    job_id: str
    accepted: dict[str, str]
    files: tuple[PlannedFile, ...] = ()
    created_directories: tuple[str, ...] = ()
    """Relative to the destination; abort removes them, deepest first, if empty."""

    def to_json(self) -> bytes:
        return dump_json(
            {
                "type": FILE_OUTPUT_RECORD_TYPE,
                "jobId": self.job_id,
                "accepted": self.accepted,
                "files": [{"t": f.task_id, "p": f.relative, "z": f.size} for f in self.files],
                "createdDirectories": list(self.created_directories),
            }
        )

    @classmethod
    def from_json(cls, data: bytes, origin: str) -> FileOutputCommitRecord:
        """Parse and check: ids, and relative paths that stay below the destination and outside ``_temporary``."""
        document = load_json_document(data, origin)
        if not isinstance(document, dict) or document.get("type") != FILE_OUTPUT_RECORD_TYPE:
            raise ManifestError(f"{origin}: not a v1/v2 commit-started record of this committer")
        job_id, accepted = document.get("jobId"), document.get("accepted")
        files, created = document.get("files"), document.get("createdDirectories")
        if (
            not isinstance(job_id, str)
            or not isinstance(accepted, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in accepted.items())
            or not isinstance(files, list)
            or not isinstance(created, list)
        ):
            raise ManifestError(f"{origin}: commit-started record with a missing or malformed field")
        for task_id, attempt_id in accepted.items():
            _check_id(origin, "task id", task_id)
            _check_id(origin, "task attempt id", attempt_id)
        planned = []
        for row in files:
            if not isinstance(row, dict):
                raise ManifestError(f"{origin}: malformed file row {row!r}")
            task_id, relative, size = row.get("t"), row.get("p"), row.get("z")
            if (
                not isinstance(task_id, str)
                or task_id not in accepted
                or not isinstance(relative, str)
                or not isinstance(size, int)
                or isinstance(size, bool)
                or size < 0
            ):
                raise ManifestError(f"{origin}: malformed file row {row!r}")
            _check_relative(origin, relative)
            planned.append(PlannedFile(task_id, relative, size))
        for directory in created:
            if not isinstance(directory, str):
                raise ManifestError(f"{origin}: malformed directory {directory!r}")
            _check_relative(origin, directory)
        return cls(job_id, dict(accepted), tuple(planned), tuple(created))


def _check_id(origin: str, what: str, value: str) -> None:
    try:
        check_id(what, value)
    except Exception as error:
        raise ManifestError(f"{origin}: {error}") from None


def _check_relative(origin: str, relative: str) -> None:
    problem = destination_relative_problem(relative)
    if problem is not None:
        raise ManifestError(f"{origin}: path {relative!r} {problem}")


def layout_of(gate: Gate) -> FileOutputPaths:
    return FileOutputPaths(gate.paths.dest, gate.paths.job_attempt)


def read_commit_record(gate: Gate) -> FileOutputCommitRecord | None:
    """This job's commit-started record, ``None`` if absent; ``ManifestError`` naming it if unreadable (every
    store's ``write_bytes`` replaces a file whole, so an unreadable record was damaged, not torn by a kill)."""
    path = layout_of(gate).commit_started_path
    data = gate.read_bytes_if_present(path)
    if data is None:
        return None
    origin = gate.to_url(path)
    record = FileOutputCommitRecord.from_json(data, origin)
    if record.job_id != gate.paths.job_id:
        raise ManifestError(f"{origin}: commit-started record of job {record.job_id!r}, not {gate.paths.job_id!r}")
    return record


def write_commit_record(gate: Gate, record: FileOutputCommitRecord) -> None:
    gate.write_bytes(layout_of(gate).commit_started_path, record.to_json())


def source_path(layout: FileOutputPaths, planned: PlannedFile) -> str:
    return posixpath.join(layout.committed_task_dir(planned.task_id), planned.relative)


def committed_summary(gate: Gate) -> SuccessData | None:
    """This job's summary if its commit point has passed: its ``_SUCCESS``, or ``_COMMIT_FINISHED.json``."""
    layout = layout_of(gate)
    for path in (layout.commit_finished_path, layout.success_path):
        data = gate.read_bytes_if_present(path)
        success = None if data is None else this_jobs_summary(gate, data, path)
        if success is not None:
            return success
    return None


def describe(accepted: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{task}: {attempt}" for task, attempt in sorted(accepted.items())) + "}"
