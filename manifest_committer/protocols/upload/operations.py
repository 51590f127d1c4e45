"""What ``status``, ``commit`` and ``abort`` need of the ``upload`` protocol (``job_state.JobOperations``).

A job attempt is an upload job when its ``protocol`` sign says so (written first, at ``setup_job``). Its state
is described from its records, and its incomplete uploads are found exactly as its abort finds them
(``stages/upload/state.find_job_uploads``), so ``status`` and ``abort`` cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import CommitterError
from ...stages.reads import StateReads
from ...stages.upload.state import find_job_uploads, job_marker_keys, list_if_present, recorded_attempts
from ...statistic_names import COMMITTER_FILES_COMMITTED
from ..base import CommitterBase
from ..job_state import (
    AttemptStatus,
    CommitProgress,
    CommitReport,
    JobStatus,
    ManifestStatus,
    MarkerStatus,
    RollbackVerdict,
    UploadStatus,
    commit_report,
    describe_attempt,
    driver_warning,
    inspect_commit,
    inspect_manifests,
    inspect_markers,
    judge_by_markers,
    listed,
    unusable,
    was_committed,
)
from ..names import ProtocolName
from .committer import UploadCommitter
from .records import PENDING_SUFFIX, UploadPaths

_THIS = ProtocolName.UPLOAD


class UploadOperations:
    """``JobOperations`` of the upload protocol."""

    protocols: tuple[ProtocolName, ...] = (_THIS,)

    def recognises(self, reads: StateReads) -> ProtocolName | None:
        return _THIS if reads.info(UploadPaths(reads.paths).protocol_file) is not None else None

    def jobs_of_own_layout(self, reads: StateReads) -> list[JobStatus]:
        return []

    def inspect(self, reads: StateReads, protocol: ProtocolName) -> AttemptStatus:
        paths = reads.paths
        task_attempts = recorded_attempts(reads, UploadPaths(paths))
        manifests = inspect_manifests(reads)
        markers = inspect_markers(reads)
        commit = inspect_commit(reads, manifests)
        uploads = _inspect_uploads(reads, task_attempts)
        would = _what_would_happen(manifests, markers, commit, uploads)
        return describe_attempt(
            reads,
            _THIS,
            paths.job_attempt_dir,
            task_attempts=task_attempts,
            manifests=manifests,
            would=would,
            markers=markers,
            commit=commit,
            uploads=uploads,
        )

    def commit(
        self, committer: CommitterBase, before: AttemptStatus | None, progress: Callable[[int, int], None] | None
    ) -> CommitReport:
        """Complete the chosen attempts' uploads (``If-None-Match: *``, no data copied), write ``_SUCCESS``, abort
        the job's other incomplete uploads. The report counts the job's incomplete uploads before and after,
        from the same finding as ``status`` and ``abort``. Each file is one call: no progress is reported."""
        already = was_committed(before)
        warning = driver_warning(before.markers if before is not None else None)
        reads = StateReads.over(committer.store, committer.config, committer.paths)
        keys = job_marker_keys(reads)  # read before the commit deletes the markers
        incomplete_before = _incomplete_at(reads, keys)
        success = committer.commit_job()
        incomplete_after = _incomplete_at(reads, keys)
        lines = [f"  Warning:    {warning}"] if warning else []
        files = success.iostatistics.counters.get(COMMITTER_FILES_COMMITTED, 0)
        if not already:
            lines.append(f"  Uploads:    {files:,} completed with If-None-Match: * (no object data copied)")
        lines.append(
            f"  Incomplete: {incomplete_before:,} uploads of the job before, {incomplete_after:,} after"
            + (" (left at keys another job in flight marks too)" if incomplete_after else "")
        )
        return commit_report(committer, success, before, already=already, lines=lines)

    def abort(self, committer: CommitterBase, before: AttemptStatus, *, dry_run: bool) -> list[str]:
        """Abort from the job's state alone (``abort_job``), or list what that would do (``plan_abort``: the same
        stage, every change left out)."""
        assert isinstance(committer, UploadCommitter)
        job = f"job {committer.job_id} (attempt {committer.paths.job_attempt:02d}, upload)"
        warning = driver_warning(before.markers)
        result = committer.plan_abort() if dry_run else committer.abort_job()
        state = committer.store.to_url(committer.paths.job_dir)
        if dry_run:
            lines = [f"Dry run: abort of {job} would (nothing was changed):"]
            verb_delete, verb_abort = "delete", "abort"
        else:
            lines = [f"Aborted {job} of {committer.destination_url}"]
            verb_delete, verb_abort = "deleted", "aborted"
        if warning:
            lines.append(f"  warning: {warning}")
        if result.committed:
            lines.append(
                "  keep the output: the job is committed" if dry_run else "  The job was committed: its output stays"
            )
        else:
            lines.append(f"  {verb_delete} {len(result.deleted):,} objects its interrupted commit had completed:")
            lines += listed(result.deleted)
        lines.append(f"  {verb_abort} {len(result.aborted):,} incomplete uploads of the job, at:")
        lines += listed(result.aborted)
        if result.left:
            lines.append(
                f"  left {len(result.left):,} incomplete uploads at keys another job in flight marks too (no record "
                "of this job names them):"
            )
            lines += listed(result.left)
        if dry_run:
            lines.append(f"  delete the job's state {state}")
        else:
            cleanup = "not run" if result.cleanup is None else result.cleanup.outcome.value
            if result.cleanup is not None and result.cleanup.error is not None:
                cleanup += f" ({result.cleanup.error})"
            lines.append(f"  Cleanup: {cleanup}")
        return lines

    def judge_for_rollback(self, reads: StateReads, *, named: bool) -> RollbackVerdict:
        """Every upload job (its uploads are found through its records and markers), committed once its
        ``commit-finished`` record is in place (its abort then keeps the output and aborts leftover uploads)."""
        return judge_by_markers(reads, reads.paths.commit_finished_path, named=named)


OPERATIONS = UploadOperations()


def _incomplete_at(reads: StateReads, keys: set[str]) -> int:
    """How many incomplete uploads S3 lists at ``keys`` (one paginated listing of the destination)."""
    if not keys:
        return 0
    prefix = reads.paths.dest.rstrip("/") + "/"
    return sum(1 for upload in reads.list_uploads(prefix) if upload.path in keys)


def _inspect_uploads(reads: StateReads, attempts: list[str]) -> UploadStatus:
    """The attempt's records (one listing per task attempt) and the job's incomplete uploads (as abort finds
    them: the same function, so status and abort cannot disagree)."""
    layout = UploadPaths(reads.paths)
    records = sum(
        1
        for attempt in attempts
        for status in list_if_present(reads, layout.attempt_pending_dir(attempt))
        if not status.is_dir and status.path.endswith(PENDING_SUFFIX)
    )
    try:
        found = find_job_uploads(reads, set())
    except (CommitterError, OSError) as error:
        return UploadStatus(records, error=str(error))
    return UploadStatus(records, len(found.targets), len(found.left))


def _what_would_happen(
    manifests: list[ManifestStatus],
    markers: MarkerStatus | None,
    commit: CommitProgress | None,
    uploads: UploadStatus,
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do with ``UploadCommitter``."""
    if uploads.error is not None:
        pending = "every incomplete upload of the job (unknown now: " + uploads.error + ")"
    else:
        pending = f"the job's {uploads.incomplete:,} incomplete uploads"
    left = ""
    if uploads.left:
        left = f"; {uploads.left:,} more at keys another job in flight also marks are left to that job"
    alive = ""
    if markers is not None and markers.driver_alive:
        alive = f"; its driver looks alive ({markers.liveness}): the job may still be running"
    state = "delete the job's state under _temporary"
    if commit is not None and commit.finished:
        return (
            f"finish the cleanup only: the commit point has passed; abort {pending}{left}, {state}",
            f"keep the output (the job is committed), abort {pending}{left}, {state}",
        )
    if commit is not None:
        return (
            f"resume the interrupted job commit of {len(commit.accepted)} task attempts ({commit.files:,} files): "
            "complete the rest of their uploads with If-None-Match: * (no data copied), write _SUCCESS, abort the "
            f"job's other incomplete uploads{left}, {state}{alive}",
            "delete the objects the interrupted commit completed (each proved this job's by its token and ETag; "
            f"abort --dry-run lists them), abort {pending}{left}, {state}{alive}",
        )
    abort = f"abort {pending}{left}, {state}; the destination is untouched (nothing was visible){alive}"
    problem = unusable(manifests)
    if problem is not None:
        return f"refuse, changing nothing in the destination: {problem}", abort
    tasks = len({m.task_id for m in manifests})
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"complete the uploads of {len(manifests)} task manifests of {tasks} tasks (one attempt per task; "
        f"{files:,} files, {size:,} bytes in all manifests) with If-None-Match: *, no data copied, write _SUCCESS, "
        f"then abort the job's other incomplete uploads{left}{alive}",
        abort,
    )
