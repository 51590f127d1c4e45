"""SaveTaskManifest: publish a task attempt's manifest by writing a temp file and renaming it into place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import JobStateError
from ..manifest import TaskManifest
from ..statistic_names import TASK_STAGE_SAVE_MANIFEST, TASK_STAGE_SAVE_TASK_MANIFEST
from .base import Stage


@dataclass(frozen=True, slots=True)
class SaveTaskManifestArguments:
    build_manifest: Callable[[], TaskManifest]
    """Called for every attempt, so the saved statistics include the failed attempts before it."""


@dataclass(frozen=True, slots=True)
class SaveTaskManifestResult:
    manifest_path: str
    manifest: TaskManifest


class SaveTaskManifestStage(Stage[SaveTaskManifestArguments, SaveTaskManifestResult]):
    """Save to ``manifests/$taskAttemptId-manifest.json.tmp``, rename to ``manifests/$taskId-manifest.json``.

    Precondition: the job's manifest directory exists (the job is neither committed nor aborted).
    Retried up to ``manifest.save.attempts`` times. Postcondition: the task's manifest is the complete
    document of this attempt; an earlier attempt's manifest of the same task is replaced (last commit wins).
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
            raise JobStateError(
                f"{self.to_url(self.paths.manifest_dir)}: job {self.paths.job_id} was committed or aborted; "
                f"task attempt {first.task_attempt_id} cannot commit"
            )
        temp = self.paths.temp_manifest_path(first.task_attempt_id)
        final = self.paths.manifest_path(first.task_id)
        self.save_file_atomically(make_bytes, temp, final, TASK_STAGE_SAVE_TASK_MANIFEST)
        return SaveTaskManifestResult(final, saved[-1])
