"""Hadoop FileOutputCommitter's directory layout (the ``v1`` and ``v2`` protocols), and who holds it."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from ...manifest import TEMP_SUFFIX
from ...paths import TEMPORARY_DIR
from ...success_data import SUCCESS_MARKER
from ..names import ProtocolName

FILE_OUTPUT_JOB_OWNER = "_JOB"
FILE_OUTPUT_TASK_REPORTS = "_tasks"
FILE_OUTPUT_COMMIT_STARTED = "_COMMIT_STARTED.json"
FILE_OUTPUT_COMMIT_FINISHED = "_COMMIT_FINISHED.json"
FILE_OUTPUT_PREVIOUS_SUCCESS = "_PREVIOUS_SUCCESS"


@dataclass(frozen=True, slots=True)
class FileOutputPaths:
    """Hadoop FileOutputCommitter's layout (the ``v1`` and ``v2`` protocols), in the store's path form.

    ``$dest/_temporary/<appAttempt>/_temporary/<taskAttemptId>/``   a task attempt's work
    ``$dest/_temporary/<appAttempt>/<taskId>/``                     a task committed by v1
    ``$dest/_temporary/<appAttempt>/_JOB``                          the job holding this app attempt (ours)
    ``$dest/_temporary/<appAttempt>/_tasks/<taskId>.json``          what a committed task moved (ours)
    ``$dest/_temporary/<appAttempt>/_COMMIT_STARTED.json``          the job commit's plan, before any move (ours)
    ``$dest/_temporary/<appAttempt>/_COMMIT_FINISHED.json``         the summary, at the commit point (ours)
    ``$dest/_temporary/<appAttempt>/_PREVIOUS_SUCCESS``             the ``_SUCCESS`` the commit replaced (ours)

    ``appAttempt`` is the job attempt, unpadded, as Hadoop writes it (Spark always uses 0). Hadoop's layout has
    no job id in it, so two jobs into one destination share it; the two files marked "ours" (names that Hadoop's
    committed-task listing, which skips only ``_temporary``, would merge, but that no task id can take) let this
    project refuse the second job instead of mixing them.
    """

    dest: str
    app_attempt: int = 0

    @property
    def pending_dir(self) -> str:
        return posixpath.join(self.dest, TEMPORARY_DIR)

    @property
    def job_attempt_dir(self) -> str:
        return posixpath.join(self.pending_dir, str(self.app_attempt))

    @property
    def task_attempts_dir(self) -> str:
        return posixpath.join(self.job_attempt_dir, TEMPORARY_DIR)

    @property
    def owner_path(self) -> str:
        return posixpath.join(self.job_attempt_dir, FILE_OUTPUT_JOB_OWNER)

    @property
    def task_reports_dir(self) -> str:
        return posixpath.join(self.job_attempt_dir, FILE_OUTPUT_TASK_REPORTS)

    @property
    def success_path(self) -> str:
        return posixpath.join(self.dest, SUCCESS_MARKER)

    @property
    def temp_success_path(self) -> str:
        return posixpath.join(self.job_attempt_dir, SUCCESS_MARKER + TEMP_SUFFIX)

    @property
    def commit_started_path(self) -> str:
        """The job commit's plan (``stages/file_output/journal.py``), written before the destination changes."""
        return posixpath.join(self.job_attempt_dir, FILE_OUTPUT_COMMIT_STARTED)

    @property
    def commit_finished_path(self) -> str:
        """The job's summary once its output is complete: the commit point when ``_SUCCESS`` is not written."""
        return posixpath.join(self.job_attempt_dir, FILE_OUTPUT_COMMIT_FINISHED)

    @property
    def previous_success_path(self) -> str:
        """Where the job commit keeps the ``_SUCCESS`` it replaces, for an abort before the commit point."""
        return posixpath.join(self.job_attempt_dir, FILE_OUTPUT_PREVIOUS_SUCCESS)

    def task_attempt_dir(self, task_attempt_id: str) -> str:
        return posixpath.join(self.task_attempts_dir, task_attempt_id)

    def committed_task_dir(self, task_id: str) -> str:
        return posixpath.join(self.job_attempt_dir, task_id)

    def task_report_path(self, task_id: str) -> str:
        return posixpath.join(self.task_reports_dir, task_id + ".json")

    def temp_task_report_path(self, task_attempt_id: str) -> str:
        return posixpath.join(self.task_reports_dir, task_attempt_id + ".json" + TEMP_SUFFIX)


@dataclass(frozen=True, slots=True)
class LayoutHolder:
    """What ``_JOB`` says: the job holding ``_temporary/<appAttempt>``, and its protocol (``v1`` or ``v2``)."""

    job_id: str
    protocol: ProtocolName | None
    """``None`` where ``_JOB`` does not say (written before it did)."""

    def to_bytes(self) -> bytes:
        return f"{self.job_id}\n{self.protocol or ''}\n".encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LayoutHolder:
        """The holder in ``_JOB``: its first line is the job id, the second the protocol. Untrusted: a protocol
        that is not ``v1`` or ``v2`` is no protocol."""
        lines = data.decode("utf-8", errors="replace").splitlines()
        job_id = lines[0].strip() if lines else ""
        named = lines[1].strip() if len(lines) > 1 else ""
        protocol = ProtocolName(named) if named in (ProtocolName.V1, ProtocolName.V2) else None
        return cls(job_id, protocol)
