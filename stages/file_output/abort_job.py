"""FileOutputAbortJob: Hadoop FileOutputCommitter's job abort (v1, v2), made to restore the destination for v1
(docs/safety.md)."""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

from ...entry_file import FileToCommit
from ...statistic_names import JOB_STAGE_ABORT
from ..journal import Evidence, evidence
from ..success_aside import restore
from .base import FileOutputStage
from .cleanup import FileOutputCleanupArguments, FileOutputCleanupResult, FileOutputCleanupStage
from .journal import FileOutputCommitRecord, committed_summary, read_commit_record, source_path

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileOutputAbortJobArguments:
    pass


@dataclass(frozen=True, slots=True)
class FileOutputAbortJobResult:
    cleanup: FileOutputCleanupResult
    files_reverted: int = 0
    """Files an interrupted v1 job commit had moved into the destination, now deleted."""
    committed: bool = False
    """The commit point had passed: the output stays."""


class FileOutputAbortJobStage(FileOutputStage[FileOutputAbortJobArguments, FileOutputAbortJobResult]):
    """Undo an interrupted job commit, unless its commit point passed, then delete ``_temporary/<appAttempt>``.

    Before the commit point (this job's ``_SUCCESS``, or ``_COMMIT_FINISHED.json``), the files the commit's
    record names and the store shows it moved (``stages/file_output/journal.py``) are deleted, the
    ``_SUCCESS`` that setup or the commit set aside is put back (unless one is in place or set aside since:
    ``success_aside``), and the directories it created are removed if empty: the
    destination is as before the job, except for v2's committed tasks' files, which its task commits had
    published before any job commit (v2's known flaw, kept). After the commit point the output stays. A foreign
    file is never touched, whatever its size. Only the job that holds the layout acts. Cleanup errors are
    logged, not raised. Repeatable: the record is deleted only after every revert, and first of the state.
    """

    name = JOB_STAGE_ABORT

    def execute(self, arguments: FileOutputAbortJobArguments) -> FileOutputAbortJobResult:
        holder = self.job_holding_the_layout()
        if holder is not None and holder != self.paths.job_id:
            log.warning(
                "%s: %s is held by job %s; job %s has nothing there to abort",
                self.name,
                self.to_url(self.layout.job_attempt_dir),
                holder,
                self.paths.job_id,
            )
        reverted = 0
        committed = False
        if holder == self.paths.job_id:
            committed = committed_summary(self) is not None
            if committed:
                log.info("%s: job %s passed its commit point; its output stays", self.name, self.paths.job_id)
            else:
                record = read_commit_record(self)
                if record is not None:
                    reverted = self._revert_files(record)
                restore(self, self.layout.success_path, self.layout.previous_success_path)
                if record is not None:
                    self._remove_created_directories(record)
        cleanup = FileOutputCleanupStage(self.context).apply(FileOutputCleanupArguments(suppress_errors=True))
        self.context.active_stage = self.name
        return FileOutputAbortJobResult(cleanup, reverted, committed)

    def _revert_files(self, record: FileOutputCommitRecord) -> int:
        """Delete each planned file the store shows this job moved (or copied, on a copy-then-delete store)."""
        layout = self.layout
        reverted = 0
        for planned in record.files:
            dest = posixpath.join(self.paths.dest, planned.relative)
            row = FileToCommit(source_path(layout, planned), dest, planned.size, None, self.to_url(dest))
            if evidence(self, row) is Evidence.NONE:
                continue
            log.debug("%s: deleting %s, moved by job %s", self.name, row.dest_url, self.paths.job_id)
            if self.delete_file(dest):
                reverted += 1
        if reverted:
            log.info(
                "%s: deleted %d files job %s had moved into the destination", self.name, reverted, self.paths.job_id
            )
        return reverted

    def _remove_created_directories(self, record: FileOutputCommitRecord) -> None:
        for relative in sorted(record.created_directories, key=lambda d: (-d.count("/"), d)):
            self.remove_empty_dir(posixpath.join(self.paths.dest, relative))
