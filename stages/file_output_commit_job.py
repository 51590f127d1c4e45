"""FileOutputCommitJob: Hadoop FileOutputCommitter's job commit, algorithm 1 (v1) or 2 (v2)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import ManifestError, OutputValidationError
from ..manifest import TaskManifest
from ..statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    JOB_STAGE_SAVE_SUCCESS_MARKER,
    OP_LOAD_MANIFEST,
    TASK_STAGE_SAVE_SUMMARY_FILE,
)
from ..success_data import SUCCESS_FILENAME_LIMIT, SuccessData
from .file_output_base import FileOutputStage
from .file_output_cleanup import FileOutputCleanupArguments, FileOutputCleanupResult, FileOutputCleanupStage
from .merge_paths import JobMergePathsStage, MergePathsArguments, MergeSource

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileOutputCommitJobArguments:
    algorithm: Literal[1, 2]
    committer_name: str
    """What ``_SUCCESS`` names in its ``committer`` field: the protocol."""
    accepted_attempts: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class FileOutputCommitJobResult:
    success: SuccessData
    tasks_committed: int
    files_committed: int
    cleanup: FileOutputCleanupResult | None
    already_committed: bool = False


class FileOutputCommitJobStage(FileOutputStage[FileOutputCommitJobArguments, FileOutputCommitJobResult]):
    """v1: merge every committed task directory into the destination; v2: nothing to move. Then both write
    ``_SUCCESS`` (this project's JSON summary, where Hadoop writes an empty file) and clean up.

    Totals and ``filenames`` come from the task reports under ``_tasks/``. With ``accepted_attempts``, each
    accepted task's report must name the accepted attempt (``ManifestError`` otherwise, before anything moves);
    in v1 only accepted tasks are merged, in v2 their files are in the destination already, whatever the answer.
    Unlike Hadoop's v1 (which renames whole directories and overwrites), every move here is a file rename that
    never overwrites, so a rerun after a crash moves what is left; once ``_SUCCESS`` of this job is in place and
    the state is gone, a rerun returns that summary. ``abort_job`` cannot undo a half-done v1 merge (Hadoop's
    cannot either): what moved stays.
    """

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: FileOutputCommitJobArguments) -> FileOutputCommitJobResult:
        finished = self._already_finished()
        if finished is not None:
            return FileOutputCommitJobResult(finished, 0, 0, None, already_committed=True)
        self.check_job_holds_the_layout("commit")
        layout = self.layout
        with self.stats.track(JOB_STAGE_LOAD_MANIFESTS):
            self.context.active_stage = JOB_STAGE_LOAD_MANIFESTS
            reports = self._load_reports(arguments.accepted_attempts)
        if arguments.algorithm == 1:
            sources = [
                MergeSource(status.path.rstrip("/").rsplit("/", 1)[-1], status.path)
                for status in self.list_dir(layout.job_attempt_dir)
                if status.is_dir and not status.path.rstrip("/").rsplit("/", 1)[-1].startswith("_")
            ]
            if arguments.accepted_attempts is not None:
                sources = [source for source in sources if source.task_id in arguments.accepted_attempts]
            JobMergePathsStage(self.context).apply(
                MergePathsArguments(sorted(sources, key=lambda s: s.task_id), self.paths.dest)
            )
        for report in reports:
            self.stats.merge(report.iostatistics)
        files = [entry for report in reports for entry in report.files]
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, len(files))
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, sum(entry.size for entry in files))
        self.stats.set_counter(COMMITTER_TASKS_COMPLETED, len(reports))
        if self.config.validate_output:
            self._validate(reports)

        success = SuccessData.create(self.paths.job_id, self.context.job_id_source, COMMITTER_COMMIT_JOB)
        success.committer = arguments.committer_name
        success.filenames = sorted(entry.dest for entry in files)[:SUCCESS_FILENAME_LIMIT]
        success.iostatistics = self.stats.snapshot()
        if self.config.mark_successful_jobs:
            self.context.active_stage = JOB_STAGE_SAVE_SUCCESS_MARKER
            with self.stats.track(JOB_STAGE_SAVE_SUCCESS_MARKER):
                self.save_file_atomically(
                    success.to_json, layout.temp_success_path, layout.success_path, TASK_STAGE_SAVE_SUMMARY_FILE
                )
        cleanup = FileOutputCleanupStage(self.context).apply(
            FileOutputCleanupArguments(
                enabled=not self.config.cleanup_skipped, suppress_errors=self.config.cleanup_failures_ignored
            )
        )
        self.context.active_stage = self.name
        return FileOutputCommitJobResult(success, len(reports), len(files), cleanup)

    def _load_reports(self, accepted: Mapping[str, str] | None) -> list[TaskManifest]:
        """The task reports, one per committed task (the last attempt's), checked against ``accepted``."""
        reports: dict[str, TaskManifest] = {}
        try:
            listed = self.list_dir(self.layout.task_reports_dir)
        except FileNotFoundError:
            listed = []
        for status in sorted(listed, key=lambda s: s.path):
            if status.is_dir or not status.path.endswith(".json"):
                continue
            url = self.to_url(status.path)
            report = TaskManifest.from_json(self.read_bytes(status.path, OP_LOAD_MANIFEST), url)
            if report.job_id != self.paths.job_id or status.path != self.layout.task_report_path(report.task_id):
                raise ManifestError(f"{url}: not a report of job {self.paths.job_id} (task {report.task_id!r})")
            reports[report.task_id] = report
        if accepted is None:
            return [reports[task] for task in sorted(reports)]
        for task_id, attempt_id in sorted(accepted.items()):
            found = reports.get(task_id)
            if found is None:
                raise ManifestError(
                    f"{self.to_url(self.layout.task_report_path(task_id))}: task {task_id} was accepted "
                    f"(attempt {attempt_id}) but never committed"
                )
            if found.task_attempt_id != attempt_id:
                raise ManifestError(
                    f"{self.to_url(self.layout.task_report_path(task_id))}: task {task_id} was committed by attempt "
                    f"{found.task_attempt_id}, not by the accepted attempt {attempt_id}"
                )
        return [reports[task] for task in sorted(accepted)]

    def _validate(self, reports: list[TaskManifest]) -> None:
        """Every reported file is in the destination with its size, before ``_SUCCESS``."""
        self.context.active_stage = JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT
        with self.stats.track(JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT):
            for report in reports:
                for entry in report.files:
                    found = self.info(self.from_url(entry.dest))
                    if found is None or found.is_dir or found.size != entry.size:
                        raise OutputValidationError(
                            f"{entry.dest}: file of task {report.task_id} is missing or not of size {entry.size}"
                        )

    def _already_finished(self) -> SuccessData | None:
        """This job's ``_SUCCESS``, if the job was committed and its temporary state is gone."""
        if self.info(self.layout.owner_path) is not None:
            return None
        if self.info(self.layout.success_path) is None:
            return None
        url = self.to_url(self.layout.success_path)
        try:
            success = SuccessData.from_json(self.read_bytes(self.layout.success_path), url)
        except ManifestError:
            return None
        if success.success and success.job_id == self.paths.job_id:
            log.info("%s: job %s was already committed; nothing to do", self.name, self.paths.job_id)
            return success
        return None
