"""CommitTask: scan the attempt's output into a manifest and publish it; no data file moves yet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...manifest import TaskManifest
from ...statistic_names import COMMITTER_TASKS_COMPLETED, TASK_STAGE_COMMIT
from ..base import Stage
from ..save_task_manifest import SaveTaskManifestArguments, SaveTaskManifestStage
from .scan_task_directory import ScanArguments, ScanTaskDirectoryStage


@dataclass(frozen=True, slots=True)
class CommitTaskArguments:
    task_id: str
    task_attempt_id: str
    outputs: Mapping[str, str] | None = None
    """The writer's declared files (see ``ScanArguments.outputs``); ``None``: the whole attempt directory."""


@dataclass(frozen=True, slots=True)
class CommitTaskResult:
    manifest_path: str
    manifest: TaskManifest


class CommitTaskStage(Stage[CommitTaskArguments, CommitTaskResult]):
    """Scan, then save the manifest. Precondition: the attempt directory exists.

    Postcondition: ``manifests/$taskId-manifest.json`` lists every file and directory of this attempt (or the
    files the writer declared, with their directories).
    ``committer_tasks_completed`` is counted before the statistics are snapshotted into the manifest, so the
    job commit sees every task even when tasks run in other processes (which Hadoop's task commit does not ensure).
    """

    name = TASK_STAGE_COMMIT

    def execute(self, arguments: CommitTaskArguments) -> CommitTaskResult:
        scan = ScanTaskDirectoryStage(self.context).apply(ScanArguments(arguments.task_attempt_id, arguments.outputs))
        self.stats.increment(COMMITTER_TASKS_COMPLETED)
        attempt_dir = self.to_url(self.paths.task_attempt_dir(arguments.task_attempt_id))

        def build_manifest() -> TaskManifest:
            return TaskManifest(
                job_id=self.paths.job_id,
                job_attempt_number=self.paths.job_attempt,
                task_id=arguments.task_id,
                task_attempt_id=arguments.task_attempt_id,
                task_attempt_dir=attempt_dir,
                files=scan.files,
                directories=scan.directories,
                iostatistics=self.stats.snapshot(),
            )

        saved = SaveTaskManifestStage(self.context).apply(SaveTaskManifestArguments(build_manifest))
        return CommitTaskResult(saved.manifest_path, saved.manifest)
