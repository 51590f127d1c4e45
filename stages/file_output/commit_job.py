"""FileOutputCommitJob: Hadoop FileOutputCommitter's job commit, algorithm 1 (v1) or 2 (v2)."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ...errors import JobStateError, ManifestError, OutputValidationError
from ...manifest import TaskManifest
from ...statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    OP_LOAD_MANIFEST,
)
from ...success_data import SUCCESS_FILENAME_LIMIT, SuccessData
from ..save_success import SaveSuccessArguments, SaveSuccessStage
from .base import FileOutputStage
from .cleanup import FileOutputCleanupArguments, FileOutputCleanupResult, FileOutputCleanupStage
from .journal import (
    FileOutputCommitRecord,
    PlannedFile,
    committed_summary,
    describe,
    read_commit_record,
    write_commit_record,
)
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

    @property
    def details(self) -> str:
        return ""


class FileOutputCommitJobStage(FileOutputStage[FileOutputCommitJobArguments, FileOutputCommitJobResult]):
    """v1: merge every committed task directory into the destination; v2: nothing to move. Then both write
    ``_SUCCESS`` (this project's JSON summary, where Hadoop writes an empty file) and clean up.

    Totals and ``filenames`` come from the task reports under ``_tasks/``. With ``accepted_attempts``, each
    accepted task's report must name the accepted attempt (``ManifestError`` otherwise, before anything moves);
    in v1 only accepted tasks are merged, in v2 their files are in the destination already, whatever the answer.
    Before the destination first changes, the commit records what it publishes (``_COMMIT_STARTED.json``,
    ``stages/file_output/journal.py``): a rerun publishes exactly that, and ``abort_job`` before the commit
    point removes exactly the files it had moved. Unlike Hadoop's v1 (which renames whole directories and
    overwrites), every move is a file rename that never overwrites, so a rerun after a crash moves what is left.
    ``_SUCCESS`` replaces an earlier one by moving it aside first (``SaveSuccessStage``), so an abort can put it
    back. Once the commit point has passed, a rerun finishes the cleanup and returns the summary.
    """

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: FileOutputCommitJobArguments) -> FileOutputCommitJobResult:
        finished = committed_summary(self)
        if finished is not None:
            log.info("%s: job %s was already committed; finishing its cleanup", self.name, self.paths.job_id)
            cleanup = self._cleanup()
            return FileOutputCommitJobResult(finished, 0, 0, cleanup, already_committed=True)
        self.check_job_holds_the_layout("commit")
        layout = self.layout
        record = read_commit_record(self)
        accepted = arguments.accepted_attempts
        if record is not None:
            if accepted is not None and dict(accepted) != record.accepted:
                raise JobStateError(
                    f"{self.to_url(layout.commit_started_path)}: job {self.paths.job_id} already began committing "
                    f"attempts {describe(record.accepted)}; this call accepts {describe(accepted)}. A job commit is "
                    "finished with the attempts it began with (or aborted)"
                )
            accepted = record.accepted
            log.info("%s: resuming the interrupted commit of job %s", self.name, self.paths.job_id)
        with self.stats.track(JOB_STAGE_LOAD_MANIFESTS):
            self.context.active_stage = JOB_STAGE_LOAD_MANIFESTS
            reports = self._load_reports(accepted)
        if record is None:
            record = self._plan(arguments.algorithm, {report.task_id: report.task_attempt_id for report in reports})
            write_commit_record(self, record)
        if arguments.algorithm == 1:
            sources = [MergeSource(task_id, layout.committed_task_dir(task_id)) for task_id in sorted(record.accepted)]
            JobMergePathsStage(self.context).apply(MergePathsArguments(sources, self.paths.dest, finish_copies=True))
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
            SaveSuccessStage(self.context).apply(  # the commit point
                SaveSuccessArguments(success, layout.temp_success_path, layout.previous_success_path)
            )
        else:
            # The commit point without _SUCCESS: abort keeps the output once this is in place.
            self.write_bytes(layout.commit_finished_path, success.to_json())
        cleanup = self._cleanup()
        self.context.active_stage = self.name
        return FileOutputCommitJobResult(success, len(reports), len(files), cleanup)

    def _cleanup(self) -> FileOutputCleanupResult:
        return FileOutputCleanupStage(self.context).apply(
            FileOutputCleanupArguments(
                enabled=not self.config.cleanup_skipped, suppress_errors=self.config.cleanup_failures_ignored
            )
        )

    def _plan(self, algorithm: Literal[1, 2], accepted: dict[str, str]) -> FileOutputCommitRecord:
        """What this commit will publish: v1, every file of the accepted committed task directories, and the
        destination directories the merge will create; v2, only the accepted set (its files are published)."""
        if algorithm == 2:
            return FileOutputCommitRecord(self.paths.job_id, accepted)
        files: list[PlannedFile] = []
        directories: set[str] = set()
        for task_id in sorted(accepted):
            stack = [(self.layout.committed_task_dir(task_id), "")]
            while stack:
                directory, relative = stack.pop()
                try:
                    children = self.list_dir(directory)
                except FileNotFoundError:
                    if relative:
                        raise
                    continue  # the task wrote nothing
                if relative:
                    directories.add(relative)
                for child in children:
                    name = child.path.rstrip("/").rsplit("/", 1)[-1]
                    child_relative = posixpath.join(relative, name) if relative else name
                    if child.is_dir and not child.is_link:
                        stack.append((child.path, child_relative))
                    else:
                        files.append(PlannedFile(task_id, child_relative, child.size))
                        parent = posixpath.dirname(child_relative)
                        while parent:
                            directories.add(parent)
                            parent = posixpath.dirname(parent)
        created = tuple(sorted(d for d in directories if self.info(posixpath.join(self.paths.dest, d)) is None))
        return FileOutputCommitRecord(self.paths.job_id, accepted, tuple(files), created)

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
