"""What ``status``, ``commit`` and ``abort`` need of the ``manifest`` protocol (``job_state.JobOperations``).

The default protocol: a job attempt under ``_temporary/<jobId>/<NN>`` that no other protocol recognises is
Hadoop's manifest committer's (jobs that Hadoop's own classes set up included).
"""

from __future__ import annotations

from collections.abc import Callable

from ...stages.reads import StateReads
from ...stages.success_aside import would_restore
from ...statistic_names import COMMIT_FILE_RENAME_RECOVERED, COMMITTER_FILES_ALREADY_COMMITTED
from ...success_data import SUCCESS_MARKER
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
    inspect_commit,
    inspect_manifests,
    listed,
    state_left,
    task_attempt_directories,
    unusable,
    was_committed,
)
from ..names import ProtocolName
from .committer import ManifestCommitter

_THIS = ProtocolName.MANIFEST


class ManifestOperations:
    """``JobOperations`` of the manifest protocol."""

    protocols: tuple[ProtocolName, ...] = (_THIS,)

    def recognises(self, reads: StateReads) -> ProtocolName:
        return _THIS

    def jobs_of_own_layout(self, reads: StateReads) -> list[JobStatus]:
        return []

    def inspect(self, reads: StateReads, protocol: ProtocolName) -> AttemptStatus:
        paths = reads.paths
        task_attempts = task_attempt_directories(reads)
        manifests = inspect_manifests(reads)
        commit = inspect_commit(reads, manifests)
        restores = would_restore(reads, paths.success_path, paths.job_dir) is not None
        would = _what_would_happen(task_attempts, manifests, commit, restores=restores)
        return describe_attempt(
            reads,
            _THIS,
            paths.job_attempt_dir,
            task_attempts=task_attempts,
            manifests=manifests,
            would=would,
            commit=commit,
        )

    def commit(
        self, committer: CommitterBase, before: AttemptStatus | None, progress: Callable[[int, int], None] | None
    ) -> CommitReport:
        success = committer.commit_job(progress=progress)
        counters = success.iostatistics.counters
        return commit_report(
            committer,
            success,
            before,
            already=was_committed(before),
            details=_details(
                counters.get(COMMITTER_FILES_ALREADY_COMMITTED, 0), counters.get(COMMIT_FILE_RENAME_RECOVERED, 0)
            ),
        )

    def abort(self, committer: CommitterBase, before: AttemptStatus, *, dry_run: bool) -> list[str]:
        assert isinstance(committer, ManifestCommitter)
        job = f"job {committer.job_id} (attempt {committer.paths.job_attempt:02d})"
        if dry_run:
            return _plan_lines(committer, job)
        result = committer.abort_job()
        cleanup = result.cleanup.outcome.value
        if result.cleanup.error is not None:
            cleanup += f" ({result.cleanup.error})"
        lines = [
            f"Aborted {job} of {committer.destination_url}",
            f"  Files reverted:       {result.files_reverted:,}",
            f"  Directories removed:  {result.directories_removed:,}",
            f"  Cleanup:              {cleanup}",
        ]
        if before.commit is not None and before.commit.finished:
            lines.insert(1, "  The job was committed: its output stays; only its state was deleted")
        return lines

    def judge_for_rollback(self, reads: StateReads, *, named: bool) -> RollbackVerdict:
        return NOT_ROLLED_BACK


OPERATIONS = ManifestOperations()


def _plan_lines(committer: ManifestCommitter, job: str) -> list[str]:
    plan = committer.plan_abort()
    lines = [f"Dry run: abort of {job} would (nothing was changed):"]
    if plan.committed:
        lines.append("  keep the output: the job is committed")
    elif not plan.commit_started:
        untouched = "revert no files" if plan.restore_success else "change nothing in the destination"
        lines.append(f"  {untouched}: no job commit had started")
    else:
        if plan.manifests_unusable is not None:
            lines.append(f"  not revert files: the manifests are unusable now ({plan.manifests_unusable})")
        lines.append(f"  delete {len(plan.files):,} files this job's commit moved into the destination:")
        lines += listed(plan.files)
        if plan.directories:
            lines.append(f"  remove {len(plan.directories):,} directories it created, if empty then:")
            lines += listed(plan.directories)
    if plan.restore_success:
        lines.append(f"  put back the earlier {SUCCESS_MARKER} that the job set aside")
    if plan.job_directory is not None:
        lines.append(f"  delete the job's state {plan.job_directory}")
    elif state_left(committer):
        lines.append("  keep the job's state (mapreduce.fileoutputcommitter.cleanup.skipped=true)")
    return lines


def _details(already: int, recovered: int) -> str:
    parts = []
    if already:
        parts.append(f"{already:,} already in place from an earlier run")
    if recovered:
        parts.append(f"{recovered:,} renames recovered after an error")
    return f" ({'; '.join(parts)})" if parts else ""


def _what_would_happen(
    task_attempts: list[str], manifests: list[ManifestStatus], commit: CommitProgress | None, *, restores: bool
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do; ``restores``: an abort would put back an earlier ``_SUCCESS``
    that the job set aside (``success_aside.would_restore``)."""
    state = f"delete the job's state ({len(task_attempts)} task attempt directories, {len(manifests)} manifests)"
    put_back = f"put back the earlier {SUCCESS_MARKER} that the job set aside, then " if restores else ""
    untouched = "; the destination is untouched" if not restores else ""
    if commit is not None and commit.finished:
        return (
            "finish the cleanup only: the commit point has passed and the output is in place",
            "keep the output (the job is committed) and delete the job's state under _temporary",
        )
    if commit is not None:
        doubt = f", {commit.units_in_doubt} units in doubt (settled from evidence)" if commit.units_in_doubt else ""
        return (
            f"resume the interrupted job commit of {len(commit.accepted)} task attempts: "
            f"{commit.files_renamed:,} of {commit.files:,} files renamed so far per the journal{doubt}",
            f"revert the {commit.files_renamed:,} files this commit renamed (and any in doubt it moved), remove the "
            f"directories it created, {put_back or 'then '}" + state + " (abort --dry-run lists them)",
        )
    problem = unusable(manifests)
    if problem is not None:
        return f"refuse, changing nothing in the destination: {problem}", put_back + state + untouched
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"commit {len(manifests)} task manifests: {files:,} files, {size:,} bytes",
        put_back + state + untouched,
    )
