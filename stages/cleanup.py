"""Cleanup: delete this job's temporary directory, and nothing of any other job; after a job commit, off its
critical path where the store can rename a directory."""

from __future__ import annotations

import enum
import functools
import logging
import posixpath
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..background import BackgroundWork
from ..config import CommitterConfig
from ..parallel import CALLS_A_BATCH, Outcome, run_together, slices
from ..paths import COMMIT_FINISHED_MARKER, trash_entry_job_id
from ..statistic_names import JOB_STAGE_CLEANUP, OP_LOAD_FILE
from ..store import FileStatus
from ..success_data import SuccessData
from .base import Stage
from .journal import this_jobs_summary

log = logging.getLogger(__name__)

_TRASH_ATTEMPTS = 3
"""Tries to move the job directory into the trash; a concurrent job's sweep may remove an empty ``.trash``
between our ``mkdirs`` and the rename."""


class CleanupOutcome(enum.Enum):
    DISABLED = "disabled"
    NOTHING_TO_CLEAN_UP = "nothing to clean up"
    DELETED = "deleted"
    PARALLEL_DELETE = "parallel delete"
    MOVED_TO_TRASH = "moved to trash"
    """The job's directory left the way in one rename; a background thread deletes it (``trash`` in the result)."""
    FAILURE = "failure"


@dataclass(frozen=True, slots=True)
class CleanupArguments:
    enabled: bool = True
    parallel: bool = True
    base_first: bool = False
    suppress_errors: bool = False
    background: bool = False
    """After the commit point only: move the job directory into the trash and delete it in the background,
    where the store renames directories in one call; the synchronous delete elsewhere."""

    @classmethod
    def from_config(
        cls, config: CommitterConfig, *, suppress_errors: bool, background: bool = False
    ) -> CleanupArguments:
        """Hadoop's ``cleanup.*`` keys, whether a failure is only logged, and whether to delete in the background."""
        return cls(
            enabled=not config.cleanup_skipped,
            parallel=config.cleanup_parallel_delete,
            base_first=config.cleanup_parallel_delete_base_first,
            suppress_errors=suppress_errors,
            background=background,
        )


@dataclass(frozen=True, slots=True)
class CleanupResult:
    outcome: CleanupOutcome
    delete_calls: int
    error: BaseException | None = None
    trash: str | None = None
    """The trash entry the job directory was moved to (``MOVED_TO_TRASH``), deleted in the background."""


class CleanupStage(Stage[CleanupArguments, CleanupResult]):
    """Delete ``_temporary/$jobId`` (task attempt directories first, in parallel, where asked), then
    ``_temporary`` itself only if no other job uses it.

    The ``commit-finished`` record goes last: when the job attempt holds one, everything else in it (task
    attempts, manifests, the journal, ``commit-started``) is deleted first, one call each, and the record only
    with the job directory itself. So a kill at any point leaves the record while anything it protects is left,
    and a rerun of ``commit_job`` that finds it finishes the cleanup instead of committing again.
    Hadoop deletes all of ``_temporary``, which breaks concurrent jobs into one destination.

    In the background (``CleanupArguments.background``: a job commit past its commit point, on a store with
    ``directory_rename``), ``_temporary/$jobId`` leaves the way in one atomic rename to
    ``_temporary/.trash/$jobId=<unique>`` and the stage returns. A thread of this process then deletes that
    entry (``commit-finished`` last, as above) and sweeps the trash of what a process killed mid-delete left,
    then removes ``.trash`` and ``_temporary`` if empty; the committer's ``close()`` and the process exit wait
    for it (``background.BackgroundWork``, in ``StageContext.background``). Its failures are logged, never raised (the
    job commit has returned), and the next job commit's sweep deletes what is left. Every promise holds: the move comes
    after the commit point, and with it ``commit-started`` leaves the job directory, so an abort reverts nothing; a
    rerun finds ``commit-finished`` in the entry (``summary_in_trash``); nothing lists ``.trash`` for jobs (its name is
    no valid job id). Object stores, which have no directory rename, keep the synchronous delete.

    Postcondition: no state of this job is left in ``_temporary/$jobId``, unless the outcome is ``FAILURE``;
    after ``MOVED_TO_TRASH``, none anywhere once the background delete has finished.
    """

    name = JOB_STAGE_CLEANUP

    def execute(self, arguments: CleanupArguments) -> CleanupResult:
        if not arguments.enabled:
            return CleanupResult(CleanupOutcome.DISABLED, 0)  # cleanup.skipped: nothing deleted or moved
        background = self.context.background
        if arguments.background and background is not None and self.capabilities.directory_rename:
            moved = self._move_to_trash(background)
            if moved is not None:
                return moved
        return self._delete_in_place(arguments)

    def _move_to_trash(self, background: BackgroundWork) -> CleanupResult | None:
        """Rename the job directory into the trash and start its background delete; ``None`` if the rename
        failed (the caller then deletes in place)."""
        job_dir = self.paths.job_dir
        entry: str | None = None
        calls = 0
        try:
            if self.info(job_dir) is not None:
                entry = self.paths.trash_entry(
                    f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
                )
                for attempt in range(1, _TRASH_ATTEMPTS + 1):
                    self.mkdirs(self.paths.trash_dir)
                    calls += 2
                    try:
                        self.rename_dir(job_dir, entry)
                        break
                    except FileNotFoundError:
                        # .trash swept away by a concurrent job between the two calls, or job_dir gone.
                        if attempt == _TRASH_ATTEMPTS or self.info(job_dir) is None:
                            raise
        except Exception as error:
            log.info("%s: could not move %s into the trash, deleting it in place: %s", self.name, job_dir, error)
            return None
        background.start(self.paths.job_id, functools.partial(self._empty_trash, entry))
        if entry is None:
            return CleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP, 0)
        log.info("%s: moved %s to %s; deleting it in the background", self.name, job_dir, entry)
        return CleanupResult(CleanupOutcome.MOVED_TO_TRASH, calls, trash=entry)

    def _delete_in_place(self, arguments: CleanupArguments) -> CleanupResult:
        job_dir = self.paths.job_dir
        survey = _Survey(self, arguments.parallel)
        if survey.job_dir is None:
            # Gone already; what a process killed while deleting this job's trash entry left goes now.
            if self.capabilities.directory_rename:
                try:
                    for entry in self._trash_entries(self.paths.job_id):
                        self._delete_trash_entry(entry)
                    if self.remove_empty_dir(self.paths.trash_dir):
                        self.remove_empty_dir(self.paths.temporary_dir)
                except Exception as failure:
                    log.warning("%s: deleting the trash of job %s failed: %s", self.name, self.paths.job_id, failure)
            return CleanupResult(CleanupOutcome.NOTHING_TO_CLEAN_UP, 0)
        calls = 0
        outcome = CleanupOutcome.DELETED
        error: BaseException | None = None
        job_dir_deleted = False
        try:
            if survey.record() is not None:
                calls += self._delete_all_but_the_commit_record(arguments.parallel, survey)
                if arguments.parallel:
                    outcome = CleanupOutcome.PARALLEL_DELETE
            elif arguments.parallel:
                if arguments.base_first:
                    calls += 1
                    try:
                        self.delete_dir(job_dir)
                        job_dir_deleted = True
                    except OSError as base_error:
                        log.info("Base-first delete of %s failed, deleting in parallel: %s", job_dir, base_error)
                if not job_dir_deleted:
                    calls += self._delete_task_attempts_in_parallel(survey.task_attempts())
                    outcome = CleanupOutcome.PARALLEL_DELETE
            if not job_dir_deleted:
                calls += 1
                self.delete_dir(job_dir)
            # Last job out turns off the light: remove _temporary only if nothing else is in it (an empty .trash,
            # left by a kill between its mkdirs and the move into it, counts as nothing).
            if self.capabilities.directory_rename:
                self.remove_empty_dir(self.paths.trash_dir)
            self.remove_empty_dir(self.paths.temporary_dir)
        except Exception as failure:
            outcome, error = CleanupOutcome.FAILURE, failure
            log.warning("%s: cleanup of %s failed: %s", self.name, self.to_url(job_dir), failure)
            if not arguments.suppress_errors:
                raise
        return CleanupResult(outcome, calls, error)

    # --- the trash ------------------------------------------------------------------------------------------------

    def _empty_trash(self, first: str | None) -> None:
        """The background delete: ``first`` (this job's entry), then every other entry, then ``.trash`` and
        ``_temporary`` if empty. Never raises: the job commit has returned; the next sweep retries."""
        start = time.perf_counter()
        try:
            if first is not None:
                self._delete_trash_entry(first)
            for entry in self._trash_entries():
                if entry != first:
                    log.info("%s: sweeping %s, left by an earlier cleanup", self.name, self.to_url(entry))
                    self._delete_trash_entry(entry)
            self.remove_empty_dir(self.paths.trash_dir)
            self.remove_empty_dir(self.paths.temporary_dir)
        except Exception as error:
            log.warning(
                "%s: background delete of %s failed; the next job commit into %s sweeps it: %s",
                self.name,
                self.to_url(first or self.paths.trash_dir),
                self.to_url(self.paths.dest),
                error,
            )
            return
        log.info(
            "%s: background delete of job %s's state took %.3f s",
            self.name,
            self.paths.job_id,
            time.perf_counter() - start,
        )

    def _trash_entries(self, job_id: str | None = None) -> list[str]:
        """Entries of the trash (of ``job_id`` only, if given), by name; names not of the trash's form are left."""
        try:
            listed = self.list_dir(self.paths.trash_dir)
        except FileNotFoundError:
            return []
        entries = []
        for status in listed:
            owner = trash_entry_job_id(posixpath.basename(status.path.rstrip("/")))
            if status.is_dir and owner is not None and (job_id is None or owner == job_id):
                entries.append(status.path.rstrip("/"))
        return sorted(entries)

    def _delete_trash_entry(self, entry: str) -> None:
        """Delete one moved job directory, each attempt's ``commit-finished`` last (with the entry itself), so a
        kill meanwhile leaves a rerun the record that its job is committed. A concurrent sweep of the same
        entry is fine: what vanished meanwhile is simply gone."""
        try:
            attempts = self.list_dir(entry)
        except FileNotFoundError:
            return
        for attempt in sorted(status.path for status in attempts if status.is_dir):
            try:
                children = self.list_dir(attempt)
            except FileNotFoundError:
                continue
            for child in sorted(status.path.rstrip("/") for status in children):
                if posixpath.basename(child) != COMMIT_FINISHED_MARKER:
                    self.delete_dir(child)
        self.delete_dir(entry)

    def _delete_all_but_the_commit_record(self, parallel: bool, survey: _Survey) -> int:
        """Everything in the job attempt directory but the record, in one round of parallel calls after the
        survey's listings: the task attempt directories (``parallel``) and the attempt directory's other entries;
        the ``tasks`` directory itself, then emptied, goes with the job directory."""
        record = self.paths.commit_finished_path.rstrip("/")
        tasks_dir = self.paths.task_attempts_dir.rstrip("/")
        attempts = survey.task_attempts() if parallel else []
        skipped = {record, tasks_dir} if parallel else {record}
        others = [status for status in survey.attempt_entries() if status.path.rstrip("/") not in skipped]
        failed: list[OSError] = []

        def delete(status: FileStatus) -> None:
            if status.is_dir:
                self.delete_dir(status.path)
            else:  # one call; a directory's delete probes or lists first on object stores
                self.delete_file(status.path)

        steps: list[Callable[[], None]] = [
            functools.partial(delete, status) for status in sorted(others, key=lambda status: status.path)
        ]
        steps += self._task_attempt_deletes(attempts, failed)
        run_together(self.context.pool, steps, max_in_flight=self.context.max_in_flight)
        self._log_failed(failed)
        return len(attempts) + len(others)

    def _delete_task_attempts_in_parallel(self, attempts: list[FileStatus]) -> int:
        failed: list[OSError] = []
        steps = self._task_attempt_deletes(attempts, failed)
        run_together(self.context.pool, steps, max_in_flight=self.context.max_in_flight)
        self._log_failed(failed)
        return len(attempts)

    def _task_attempt_deletes(self, attempts: list[FileStatus], failed: list[OSError]) -> list[Callable[[], None]]:
        """Steps deleting the task attempt directories: a call each, or, where the store takes batches, a call for
        every ``CALLS_A_BATCH`` (a thread a batch, not a delete). A failure goes to ``failed``, not up: as in
        Hadoop, the delete of the whole job directory that follows decides the outcome."""
        paths = sorted(status.path for status in attempts)
        batched = self.capabilities.concurrent_calls and not self.capabilities.microsecond_calls

        def delete(batch: Sequence[str]) -> None:
            try:
                if batched:
                    self.delete_dirs(batch)
                else:
                    self.delete_dir(batch[0])
            except OSError as error:
                failed.append(error)

        return [functools.partial(delete, batch) for batch in slices(paths, CALLS_A_BATCH if batched else 1)]

    def _log_failed(self, failed: list[OSError]) -> None:
        if failed:
            log.info("%s: %d task attempt directories not deleted in parallel: %s", self.name, len(failed), failed[0])


class _Survey:
    """What the cleanup needs to know of the job's directory, asked in one round trip of independent calls: is
    the job directory there, is ``commit-finished``, and the listings of the task attempts (where deleted in
    parallel) and of the job attempt directory. A call's failure is raised where its answer is used."""

    def __init__(self, stage: CleanupStage, parallel: bool) -> None:
        paths = stage.paths
        self._stage = stage
        self._attempt_dir = paths.job_attempt_dir
        job_dir = Outcome(lambda: stage.info(paths.job_dir))
        self._record = Outcome(lambda: stage.info(paths.commit_finished_path))
        self._attempt_entries = Outcome(lambda: stage.list_dir_if_present(paths.job_attempt_dir))
        self._task_attempts = Outcome(lambda: stage.list_dir_if_present(paths.task_attempts_dir))
        self._parallel = parallel
        steps: list[Callable[[], object]] = [job_dir, self._record, self._attempt_entries]
        if parallel:
            steps.append(self._task_attempts)
        run_together(stage.context.pool, steps, max_in_flight=stage.context.max_in_flight)
        self.job_dir = job_dir.get()

    def record(self) -> FileStatus | None:
        """The ``commit-finished`` record, if there."""
        return self._record.get()

    def task_attempts(self) -> list[FileStatus]:
        """The task attempt directories (none if ``tasks`` is missing, or not listed: no parallel delete)."""
        listed = self._task_attempts.get() if self._parallel else None
        return [status for status in listed or [] if status.is_dir]

    def attempt_entries(self) -> list[FileStatus]:
        """The job attempt directory's entries; ``FileNotFoundError`` if it is missing."""
        listed = self._attempt_entries.get()
        if listed is None:
            raise FileNotFoundError(self._stage.to_url(self._attempt_dir))
        return listed


def clean_up_job(gate: Stage[Any, Any], *, suppress_errors: bool, background: bool = False) -> CleanupResult:
    """Run the cleanup stage inside a job commit or abort (``gate``), under Hadoop's ``cleanup.*`` keys, then make
    ``gate`` the active stage again, so that a failure after the cleanup names the commit or abort."""
    cleanup = CleanupStage(gate.context).apply(
        CleanupArguments.from_config(gate.config, suppress_errors=suppress_errors, background=background)
    )
    gate.context.active_stage = gate.name
    return cleanup


def summary_in_trash(gate: Stage[Any, Any]) -> SuccessData | None:
    """This job's summary from its ``commit-finished`` record in the trash: how a rerun of ``commit_job`` after
    its job directory was moved there (and ``marksuccessfuljobs=false``, so no ``_SUCCESS``) finds the job
    committed. Looked for only when the job directory is gone, on stores that move it."""
    if not gate.capabilities.directory_rename or gate.info(gate.paths.job_dir) is not None:
        return None
    try:
        entries = gate.list_dir(gate.paths.trash_dir)
    except FileNotFoundError:
        return None
    attempt = posixpath.basename(gate.paths.job_attempt_dir)
    for status in sorted(entries, key=lambda status: status.path):
        name = posixpath.basename(status.path.rstrip("/"))
        if not status.is_dir or trash_entry_job_id(name) != gate.paths.job_id:
            continue
        path = posixpath.join(status.path.rstrip("/"), attempt, COMMIT_FINISHED_MARKER)
        data = gate.read_bytes_if_present(path, OP_LOAD_FILE)
        success = None if data is None else this_jobs_summary(gate, data, path)
        if success is not None:
            return success
    return None
