"""SaveTaskManifest: publish a task attempt's manifest by writing a temp file and renaming it into place."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import JobStateError
from ..manifest import TaskManifest
from ..statistic_names import TASK_STAGE_SAVE_MANIFEST, TASK_STAGE_SAVE_TASK_MANIFEST
from .base import Stage
from .journal import read_commit_record

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SaveTaskManifestArguments:
    build_manifest: Callable[[], TaskManifest]
    """Called for every attempt, so the saved statistics include the failed attempts before it."""
    per_attempt: bool = False
    """Save as ``manifests/$taskAttemptId-manifest.json``, one per attempt, instead of replacing the task's one
    manifest: where two attempts of a task may both commit and the job commit chooses (transactional), so a late
    losing attempt never displaces the accepted one."""


@dataclass(frozen=True, slots=True)
class SaveTaskManifestResult:
    manifest_path: str
    manifest: TaskManifest


class SaveTaskManifestStage(Stage[SaveTaskManifestArguments, SaveTaskManifestResult]):
    """Save to ``manifests/$taskAttemptId-manifest.json.tmp``, rename to ``manifests/$taskId-manifest.json``.

    Precondition: the job's manifest directory exists and its commit has not begun (no ``commit-started``).
    Retried up to ``manifest.save.attempts`` times. Postcondition: the task's manifest is the complete
    document of this attempt; an earlier attempt's manifest of the same task is replaced (last commit wins).
    A task commit racing the end of its job must neither resurrect the job's state nor report success: a
    store write creates missing parents (and on object stores always succeeds), so the job's state is checked
    again once the manifest is in place, and if the job ended (or began committing without this attempt)
    meanwhile, what this save wrote is removed and ``JobStateError`` raised.
    """

    name = TASK_STAGE_SAVE_MANIFEST

    def execute(self, arguments: SaveTaskManifestArguments) -> SaveTaskManifestResult:
        saved: list[TaskManifest] = []

        def make_bytes() -> bytes:
            manifest = arguments.build_manifest()
            saved.append(manifest)
            return manifest.to_json()

        first = arguments.build_manifest()
        if self.info(self.paths.manifest_dir) is None:
            # A late attempt (killed, or speculative and lost) must not resurrect the state of a finished job.
            raise self._too_late(first, "was committed or aborted")
        if self.info(self.paths.commit_started_path) is not None:
            raise self._too_late(first, "has begun its job commit")
        temp = self.paths.temp_manifest_path(first.task_attempt_id)
        final = self.paths.manifest_path(first.task_attempt_id if arguments.per_attempt else first.task_id)
        self.save_file_atomically(make_bytes, temp, final, TASK_STAGE_SAVE_TASK_MANIFEST)
        ended = self._job_ended_meanwhile(first)
        if ended is not None:
            self._remove_what_was_written(first, temp, final, ended, own_file=arguments.per_attempt)
            raise self._too_late(first, ended)
        return SaveTaskManifestResult(final, saved[-1])

    def _too_late(self, manifest: TaskManifest, what: str) -> JobStateError:
        return JobStateError(
            f"{self.to_url(self.paths.manifest_dir)}: job {self.paths.job_id} {what}; task attempt "
            f"{manifest.task_attempt_id} of task {manifest.task_id} cannot commit"
        )

    def _job_ended_meanwhile(self, manifest: TaskManifest) -> str | None:
        """Why the job can no longer take this attempt, or ``None`` if it still can."""
        if self.info(self.paths.commit_finished_path) is not None:
            return "was committed"
        started = read_commit_record(self)
        if started is not None:
            if started.accepted.get(manifest.task_id) == manifest.task_attempt_id:
                return None  # the job commit took this attempt (a retried save of the same document)
            return "began its job commit without this attempt"
        if self.capabilities.real_directories:
            if self.info(self.paths.task_attempts_dir) is None:  # cleanup deletes task attempts first
                return "was committed or aborted"
        elif manifest.files and self.info(self.from_url(manifest.files[0].source)) is None:
            return "was committed or aborted (this attempt's files are gone)"
        return None

    def _remove_what_was_written(
        self, manifest: TaskManifest, temp: str, final: str, ended: str, *, own_file: bool
    ) -> None:
        started = read_commit_record(self)
        if not own_file and started is not None and manifest.task_id in started.accepted:
            # Another attempt of this task was accepted; its manifest was at ``final``. Leave ours there: the
            # commit's rerun and abort then fail loudly on the mismatch rather than act on a guess.
            log.error(
                "Task attempt %s replaced the manifest of accepted attempt %s of task %s after job %s %s",
                manifest.task_attempt_id,
                started.accepted[manifest.task_id],
                manifest.task_id,
                self.paths.job_id,
                ended,
            )
            return
        self.delete_file(temp)
        self.delete_file(final)
        if self.capabilities.real_directories:
            # The write recreated the directories the job's cleanup had removed: remove them again, if empty.
            for directory in (
                self.paths.manifest_dir,
                self.paths.job_attempt_dir,
                self.paths.job_dir,
                self.paths.temporary_dir,
            ):
                if not self.remove_empty_dir(directory):
                    break
