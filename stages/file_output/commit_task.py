"""FileOutputCommitTask: Hadoop FileOutputCommitter's task commit, algorithm 1 (v1) or 2 (v2)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ...errors import JobStateError
from ...manifest import FileEntry, TaskManifest
from ...statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    COMMITTER_TASKS_COMPLETED,
    TASK_STAGE_COMMIT,
    TASK_STAGE_SAVE_TASK_MANIFEST,
)
from .base import FileOutputStage
from .merge_paths import MergePathsArguments, MergePathsStage, MergeSource


@dataclass(frozen=True, slots=True)
class FileOutputCommitTaskArguments:
    task_id: str
    task_attempt_id: str
    algorithm: Literal[1, 2]
    outputs: Mapping[str, str] | None = None
    """The writer's declared files (as ``ScanArguments.outputs``); ``None``: the whole attempt directory."""


@dataclass(frozen=True, slots=True)
class FileOutputCommitTaskResult:
    manifest: TaskManifest
    """What the task moved, with final destination URLs; saved as ``_tasks/<taskId>.json`` for the job."""


class FileOutputCommitTaskStage(FileOutputStage[FileOutputCommitTaskArguments, FileOutputCommitTaskResult]):
    """v1: move the attempt's files to ``_temporary/<appAttempt>/<taskId>`` (an earlier attempt's committed
    directory is deleted first, as Hadoop does); v2: move them straight into the destination, where they are
    visible at once and stay visible whatever happens to the job (v2's known flaw, kept as the baseline).

    Then the attempt directory is deleted and the task's report (a manifest-format document: files with their
    final destinations, and the task's statistics) saved under ``_tasks/``, for the job's ``_SUCCESS`` and for
    ``accepted_attempts``. Precondition: this job holds the layout, its job commit has not begun, and the attempt
    directory exists.
    """

    name = TASK_STAGE_COMMIT

    def execute(self, arguments: FileOutputCommitTaskArguments) -> FileOutputCommitTaskResult:
        attempt = arguments.task_attempt_id
        self.check_job_holds_the_layout(f"commit task attempt {attempt}")
        layout = self.layout
        if self.info(layout.commit_started_path) is not None:
            # The job commit has fixed what it publishes (and v1 lists the committed task directories once).
            raise JobStateError(
                f"{self.to_url(layout.commit_started_path)}: the commit of job {self.paths.job_id} has begun; "
                f"task attempt {attempt} can no longer commit"
            )
        work = layout.task_attempt_dir(attempt)
        if self.info(work) is None:
            raise JobStateError(
                f"{self.to_url(work)}: task attempt {attempt} has no working directory "
                "(never set up, already committed or aborted, or cleaned up)"
            )
        if arguments.algorithm == 1:
            target = layout.committed_task_dir(arguments.task_id)
            self.delete_dir(target)  # an earlier attempt's: the last attempt to commit wins, as in Hadoop
        else:
            target = self.paths.dest
        source = MergeSource(arguments.task_id, work, arguments.outputs)
        merged = MergePathsStage(self.context).apply(MergePathsArguments([source], target))
        self.context.active_stage = self.name
        self.delete_dir(work)  # what was not declared, and the emptied directories
        self.stats.increment(COMMITTER_TASKS_COMPLETED)
        # The manifest protocol's task samples, so that the protocols' _SUCCESS files compare.
        self.stats.add_sample(COMMITTER_TASK_FILE_COUNT, len(merged.moved))
        self.stats.add_sample(COMMITTER_TASK_FILE_SIZE, merged.bytes)
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_COUNT, len(merged.directories))
        self.stats.add_sample(
            COMMITTER_TASK_DIRECTORY_DEPTH, max((d.count("/") + 1 for d in merged.directories), default=0)
        )
        files = [
            FileEntry(
                self.to_url(posixpath.join(work, moved.source_relative)),
                self.to_url(posixpath.join(self.paths.dest, moved.target_relative)),
                moved.size,
            )
            for moved in merged.moved
        ]

        def build_report() -> TaskManifest:
            return TaskManifest(
                job_id=self.paths.job_id,
                job_attempt_number=self.paths.job_attempt,
                task_id=arguments.task_id,
                task_attempt_id=attempt,
                task_attempt_dir=self.to_url(work),
                files=files,
                iostatistics=self.stats.snapshot(),
            )

        self.save_file_atomically(
            lambda: build_report().to_json(),
            layout.temp_task_report_path(attempt),
            layout.task_report_path(arguments.task_id),
            TASK_STAGE_SAVE_TASK_MANIFEST,
        )
        return FileOutputCommitTaskResult(build_report())
