"""What ``status``, ``commit`` and ``abort`` need of the ``transactional`` protocol (``job_state.JobOperations``).

A job attempt is transactional when it has write markers, or its transaction's ``_started_<tid>`` or
``_committed_<tid>`` is in the destination.
"""

from __future__ import annotations

from collections.abc import Callable

from ...markers import MarkerPaths
from ...stages.reads import StateReads
from ..base import CommitterBase
from ..job_state import (
    NOT_ROLLED_BACK,
    AttemptStatus,
    CommitReport,
    JobStatus,
    ManifestStatus,
    MarkerStatus,
    RollbackVerdict,
    TransactionStatus,
    commit_report,
    describe_attempt,
    driver_warning,
    inspect_commit,
    inspect_manifests,
    inspect_markers,
    judge_by_markers,
    listed,
    task_attempt_directories,
    unusable,
)
from ..names import ProtocolName
from .committer import TransactionalCommitter
from .records import TransactionPaths

_THIS = ProtocolName.TRANSACTIONAL


class TransactionalOperations:
    """``JobOperations`` of the transactional protocol."""

    protocols: tuple[ProtocolName, ...] = (_THIS,)

    def recognises(self, reads: StateReads) -> ProtocolName | None:
        transaction = _inspect_transaction(reads)
        has_markers = reads.info(MarkerPaths(reads.paths).markers_dir) is not None
        return _THIS if has_markers or transaction.started or transaction.committed else None

    def jobs_of_own_layout(self, reads: StateReads) -> list[JobStatus]:
        return []

    def inspect(self, reads: StateReads, protocol: ProtocolName) -> AttemptStatus:
        paths = reads.paths
        task_attempts = task_attempt_directories(reads)
        manifests = inspect_manifests(reads)
        markers = inspect_markers(reads)
        transaction = _inspect_transaction(reads)
        would = _what_would_happen(task_attempts, manifests, markers, transaction)
        return describe_attempt(
            reads,
            _THIS,
            paths.job_attempt_dir,
            task_attempts=task_attempts,
            manifests=manifests,
            would=would,
            markers=markers,
            commit=inspect_commit(reads, manifests),
            transaction=transaction,
        )

    def commit(
        self, committer: CommitterBase, before: AttemptStatus | None, progress: Callable[[int, int], None] | None
    ) -> CommitReport:
        """``_committed_<tid>`` is the commit point; the files of attempts not committed (found through the
        markers) are deleted first. Nothing is renamed, so no progress is reported."""
        already = before is None or (before.transaction is not None and before.transaction.committed)
        warning = driver_warning(before.markers if before is not None else None)
        success = committer.commit_job()
        lines = [f"  Warning:    {warning}"] if warning else []
        if not already:
            record = committer.store.to_url(TransactionPaths(committer.paths).committed)
            markers = before.markers if before is not None else None
            readable = markers is not None and markers.error is None
            named = f" ({markers.markers:,} write markers read)" if markers is not None and readable else ""
            lines += [
                f"  Record:     {record} written: the commit point (no file moved)",
                f"  Others:     files of attempts not committed, named by the write markers, deleted{named}",
            ]
        return commit_report(committer, success, before, already=already, lines=lines)

    def abort(self, committer: CommitterBase, before: AttemptStatus, *, dry_run: bool) -> list[str]:
        """Abort from the markers alone (``abort_job``), or list what that would delete (``plan_abort``, the same
        stage in dry-run mode)."""
        assert isinstance(committer, TransactionalCommitter)
        job = f"job {committer.job_id} (attempt {committer.paths.job_attempt:02d}, transactional)"
        warning = driver_warning(before.markers)
        transaction = TransactionPaths(committer.paths)
        store = committer.store
        if dry_run:
            plan = committer.plan_abort()
            lines = [f"Dry run: abort of {job} would (nothing was changed):"]
            if warning:
                lines.append(f"  warning: {warning}")
            if plan.committed:
                lines.append(
                    f"  keep the output: the job is committed ({store.to_url(transaction.committed)} in place), "
                    "and write the directories' records a killed commit left out"
                )
            else:
                lines.append(f"  delete {len(plan.deleted):,} data files its write markers name:")
                lines += listed(plan.deleted)
                lines.append(f"  delete {store.to_url(transaction.started)}")
            lines.append(f"  delete the job's state {store.to_url(committer.paths.job_dir)}")
            return lines
        result = committer.abort_job()
        lines = [f"Aborted {job} of {committer.destination_url}"]
        if warning:
            lines.append(f"  Warning:             {warning}")
        if result.committed:
            lines.append("  The job was committed: its output stays; only its state was deleted")
        else:
            lines.append(f"  Data files deleted:  {len(result.deleted):,}")
            lines.extend(f"    {url}" for url in result.deleted)
        cleanup = "not run" if result.cleanup is None else result.cleanup.outcome.value
        if result.cleanup is not None and result.cleanup.error is not None:
            cleanup += f" ({result.cleanup.error})"
        lines.append(f"  Cleanup:             {cleanup}")
        return lines

    def judge_for_rollback(self, reads: StateReads, *, named: bool) -> RollbackVerdict:
        """A job with write markers, committed once its ``_committed_<tid>`` is in place."""
        if reads.info(MarkerPaths(reads.paths).markers_dir) is None:
            return NOT_ROLLED_BACK
        return judge_by_markers(reads, TransactionPaths(reads.paths).committed, named=named)


OPERATIONS = TransactionalOperations()


def _inspect_transaction(reads: StateReads) -> TransactionStatus:
    transaction = TransactionPaths(reads.paths)
    started, committed = reads.info(transaction.started), reads.info(transaction.committed)
    return TransactionStatus(
        transaction.tid,
        started is not None and not started.is_dir,
        committed is not None and not committed.is_dir,
        reads.to_url(transaction.committed),
    )


def _what_would_happen(
    task_attempts: list[str],
    manifests: list[ManifestStatus],
    markers: MarkerStatus | None,
    transaction: TransactionStatus,
) -> tuple[str, str]:
    """What ``commit`` and ``abort`` would do with ``TransactionalCommitter``."""
    state = f"delete the job's state ({len(task_attempts)} task attempt directories, {len(manifests)} manifests)"
    if transaction.committed:
        return (
            f"finish the directories' records, _SUCCESS and the cleanup only: _committed_{transaction.tid} is in "
            "place (the job is committed)",
            f"keep the output (the job is committed), write the directories' records a killed commit left out, "
            f"and {state}",
        )
    count = "an unknown number of" if markers is None or markers.error is not None else f"{markers.markers:,}"
    alive = ""
    if markers is not None and markers.driver_alive:
        alive = f"; its driver looks alive ({markers.liveness}): the job may still be running"
    abort = (
        f"delete the data files its {count} write markers name (abort --dry-run lists them), "
        f"_started_{transaction.tid}, then {state}{alive}"
    )
    problem = unusable(manifests)
    if problem is not None:
        return f"refuse, changing nothing in the destination: {problem}", abort
    files = sum(m.files for m in manifests)
    size = sum(m.bytes for m in manifests)
    return (
        f"write _committed_{transaction.tid} for {len(manifests)} task manifests ({files:,} files, {size:,} bytes; "
        f"no file moves) after deleting the files of other attempts that its markers name{alive}",
        abort,
    )
