"""What ``status``, ``commit`` and ``abort`` need of the ``v1`` and ``v2`` protocols (``job_state.JobOperations``).

Hadoop's layout has no job id in it: a v1/v2 job is ``_temporary/<appAttempt>/`` holding ``_JOB``, which names
the job and its protocol (``layout.LayoutHolder``); ``status`` finds these jobs itself (``jobs_of_own_layout``)
rather than under ``_temporary/<jobId>/<NN>``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from ...errors import CommitterError
from ...manifest import TaskManifest
from ...paths import TEMPORARY_DIR, TRASH_DIR, JobPaths, is_valid_id
from ...stages.file_output.journal import committed_summary, read_commit_record
from ...stages.reads import StateReads
from ...stages.success_aside import would_restore
from ..base import CommitterBase
from ..job_state import (
    NOT_ROLLED_BACK,
    AttemptStatus,
    CommitProgress,
    CommitReport,
    JobStatus,
    ManifestStatus,
    RollbackVerdict,
    commit_report,
    describe_attempt,
    was_committed,
)
from ..names import ProtocolName
from .committer import FileOutputCommitter
from .layout import FileOutputPaths, LayoutHolder


class FileOutputOperations:
    """``JobOperations`` of the v1 and v2 protocols."""

    protocols: tuple[ProtocolName, ...] = (ProtocolName.V1, ProtocolName.V2)

    def recognises(self, reads: StateReads) -> ProtocolName | None:
        return None  # never under _temporary/<jobId>/<NN>: see jobs_of_own_layout

    def jobs_of_own_layout(self, reads: StateReads) -> list[JobStatus]:
        """Each ``_temporary/<appAttempt>`` that a ``_JOB`` says a v1 or v2 job holds."""
        jobs = []
        pending = posixpath.join(reads.paths.dest, TEMPORARY_DIR)
        for name, is_dir in reads.names(pending):
            if not is_dir or not name.isdigit() or name == TRASH_DIR:
                continue
            layout = FileOutputPaths(reads.paths.dest, int(name))
            data = reads.try_read(layout.owner_path)
            if data is None:
                continue
            holder = LayoutHolder.from_bytes(data)
            if not is_valid_id(holder.job_id):
                continue
            # A _JOB written before it named the protocol: v1 and v2 commit and abort alike but for v1's merge.
            protocol = holder.protocol or ProtocolName.V1
            attempt = self.inspect(reads.at(JobPaths(reads.paths.dest, holder.job_id, int(name))), protocol)
            jobs.append(JobStatus(holder.job_id, [attempt]))
        return jobs

    def inspect(self, reads: StateReads, protocol: ProtocolName) -> AttemptStatus:
        layout = FileOutputPaths(reads.paths.dest, reads.paths.job_attempt)
        task_attempts = [name for name, is_dir in reads.names(layout.task_attempts_dir) if is_dir]
        reports = [
            _inspect_report(reads, posixpath.join(layout.task_reports_dir, name))
            for name, is_dir in reads.names(layout.task_reports_dir)
            if not is_dir and name.endswith(".json")
        ]
        commit = _inspect_commit(reads, reports)
        restores = would_restore(reads, layout.success_path, layout.previous_success_path) is not None
        would = _what_would_happen(protocol, task_attempts, reports, commit, restores=restores)
        return describe_attempt(
            reads,
            protocol,
            layout.job_attempt_dir,
            task_attempts=task_attempts,
            manifests=reports,
            would=would,
            commit=commit,
        )

    def commit(
        self, committer: CommitterBase, before: AttemptStatus | None, progress: Callable[[int, int], None] | None
    ) -> CommitReport:
        already = was_committed(before)
        success = committer.commit_job()
        return commit_report(committer, success, before, already=already)

    def abort(self, committer: CommitterBase, before: AttemptStatus, *, dry_run: bool) -> list[str]:
        assert isinstance(committer, FileOutputCommitter)
        job = f"job {committer.job_id} (attempt {committer.paths.job_attempt:02d}, {committer.protocol})"
        if dry_run:
            return [f"Dry run: abort of {job} would (nothing was changed):", f"  {before.would_abort}"]
        result = committer.abort_job()
        cleanup = result.cleanup.outcome.value
        lines = [
            f"Aborted {job} of {committer.destination_url}",
            f"  Files reverted:       {result.files_reverted:,}",
            f"  Cleanup:              {cleanup}",
        ]
        if result.committed:
            lines.insert(1, "  The job was committed: its output stays; only its state was deleted")
        return lines

    def judge_for_rollback(self, reads: StateReads, *, named: bool) -> RollbackVerdict:
        return NOT_ROLLED_BACK


OPERATIONS = FileOutputOperations()


def _inspect_report(reads: StateReads, path: str) -> ManifestStatus:
    """A committed task's report (``_tasks/<taskId>.json``, in the task manifest's format)."""
    url = reads.to_url(path)
    try:
        report = TaskManifest.from_json(reads.read_bytes(path), url)
    except (CommitterError, OSError, ValueError) as error:
        return ManifestStatus(url, error=str(error))
    return ManifestStatus(url, report.task_id, report.task_attempt_id, len(report.files), report.total_size)


def _inspect_commit(reads: StateReads, reports: list[ManifestStatus]) -> CommitProgress | None:
    """The job commit's plan (``_COMMIT_STARTED.json``) and whether the commit point passed."""
    finished = committed_summary(reads) is not None
    try:
        record = read_commit_record(reads)
    except CommitterError:
        record = None
    if record is None:
        return CommitProgress({}, 0, 0, 0, 0, 0, finished) if finished else None
    accepted = dict(record.accepted)
    files = sum(r.files for r in reports if r.task_id is not None and accepted.get(r.task_id) == r.task_attempt_id)
    return CommitProgress(accepted, files, 0, 0, 0, 1, finished)


def _what_would_happen(
    protocol: ProtocolName,
    task_attempts: list[str],
    reports: list[ManifestStatus],
    commit: CommitProgress | None,
    *,
    restores: bool,
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do; ``restores``: an abort would put back an earlier ``_SUCCESS``
    that the job set aside (``success_aside.would_restore``)."""
    state = f"delete the job's state ({len(task_attempts)} task attempt directories, {len(reports)} task reports)"
    put_back = "put back the earlier _SUCCESS that the job set aside, then " if restores else ""
    if commit is not None and commit.finished:
        return (
            "finish the cleanup only: the commit point has passed and the output is in place",
            "keep the output (the job is committed) and delete the job's state under _temporary",
        )
    kept = "; the files v2's task commits published stay (v2 cannot undo them)" if protocol is ProtocolName.V2 else ""
    if commit is not None:
        return (
            f"resume the interrupted job commit of {len(commit.accepted)} tasks ({commit.files:,} files), moving "
            "what its plan names and is not moved yet, then write _SUCCESS",
            f"delete the files this commit moved (per its plan and the store's evidence), {put_back or 'then '}"
            f"{state}{kept}",
        )
    files = sum(r.files for r in reports)
    size = sum(r.bytes for r in reports)
    merge = (
        f"merge {len(reports)} committed tasks into the destination ({files:,} files, {size:,} bytes), "
        if protocol is ProtocolName.V1
        else f"nothing to move ({len(reports)} committed tasks' {files:,} files, {size:,} bytes, are in place); "
    )
    return merge + "write _SUCCESS", f"{put_back}{state}; the destination is untouched by the job commit{kept}"
