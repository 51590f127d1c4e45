"""CommitJob: the job commit, composed of the other stages in the order of the protocol."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

import fsspec

from ..errors import ManifestError
from ..parallel import run_bounded
from ..statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    OP_COPY_FILE,
    OP_SAVE_FILE,
)
from ..store import open_store
from ..success_data import DIAGNOSTIC_MANIFESTS, SuccessData
from .base import Stage
from .cleanup import CleanupArguments, CleanupResult, CleanupStage
from .create_directories import CreateDirectoriesArguments, CreateDirectoriesStage
from .load_manifests import LoadManifestsArguments, LoadManifestsResult, LoadManifestsStage
from .rename_files import RenameFilesArguments, RenameFilesResult, RenameFilesStage
from .save_success import SaveSuccessArguments, SaveSuccessStage
from .validate_output import ValidateOutputArguments, ValidateOutputStage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommitJobArguments:
    spill_directory: str | None = None
    accepted_attempts: Mapping[str, str] | None = None
    """Task id -> attempt id to commit; ``None`` commits every manifest (see ``LoadManifestsArguments``)."""


@dataclass(frozen=True, slots=True)
class CommitJobResult:
    success: SuccessData
    manifests_loaded: int
    files_committed: int
    cleanup: CleanupResult | None
    already_committed: bool = False


class CommitJobStage(Stage[CommitJobArguments, CommitJobResult]):
    """Load and check all manifests; create directories; rename files; validate; save ``_SUCCESS``; clean up.

    Nothing in the destination changes until every manifest has been loaded and checked. Repeatable: after a
    crash at any point, running it again finishes the job (files already in place count as done), and once
    ``_SUCCESS`` of this job exists and its state is gone, a rerun returns that summary.
    """

    name = COMMITTER_COMMIT_JOB

    def execute(self, arguments: CommitJobArguments) -> CommitJobResult:
        finished = self._already_finished()
        if finished is not None:
            log.info("%s: job %s was already committed; nothing to do", self.name, self.paths.job_id)
            return CommitJobResult(finished, 0, 0, None, already_committed=True)

        loaded = LoadManifestsStage(self.context).apply(
            LoadManifestsArguments(arguments.spill_directory, arguments.accepted_attempts)
        )
        with loaded.entry_file:
            self.write_bytes(self.paths.commit_started_path, b"")
            CreateDirectoriesStage(self.context).apply(CreateDirectoriesArguments(loaded.directories))
            renamed = RenameFilesStage(self.context).apply(RenameFilesArguments(loaded.entry_file))
            self._set_job_counters(loaded, renamed)
            if self.config.validate_output:
                ValidateOutputStage(self.context).apply(ValidateOutputArguments(loaded.entry_file))

        success = SuccessData.create(self.paths.job_id, self.context.job_id_source, COMMITTER_COMMIT_JOB)
        success.filenames = renamed.first_filenames
        if self.config.diagnostics_manifest_directory:
            kept = self._keep_manifests(self.config.diagnostics_manifest_directory)
            if kept is not None:
                success.diagnostics[DIAGNOSTIC_MANIFESTS] = kept
        success.iostatistics = self.stats.snapshot()
        if self.config.mark_successful_jobs:
            SaveSuccessStage(self.context).apply(SaveSuccessArguments(success))
        self.write_bytes(self.paths.commit_finished_path, b"")

        cleanup = CleanupStage(self.context).apply(
            CleanupArguments.from_config(self.config, suppress_errors=self.config.cleanup_failures_ignored)
        )
        self.context.active_stage = self.name
        return CommitJobResult(success, loaded.manifest_count, renamed.files_committed, cleanup)

    def _set_job_counters(self, loaded: LoadManifestsResult, renamed: RenameFilesResult) -> None:
        # Set, not summed: the task statistics merged from the manifests count the same files already.
        self.stats.set_counter(COMMITTER_FILES_COMMITTED, renamed.files_committed)
        self.stats.set_counter(COMMITTER_BYTES_COMMITTED, renamed.bytes_committed)
        self.stats.set_counter(COMMITTER_TASKS_COMPLETED, loaded.manifest_count)

    def _already_finished(self) -> SuccessData | None:
        """This job's ``_SUCCESS``, if the job was committed and its temporary state is gone."""
        if self.info(self.paths.manifest_dir) is not None:
            return None
        if self.info(self.paths.success_path) is None:
            return None
        url = self.to_url(self.paths.success_path)
        try:
            success = SuccessData.from_json(self.read_bytes(self.paths.success_path), url)
        except ManifestError:
            return None
        if success.success and success.job_id == self.paths.job_id:
            return success
        return None

    def _keep_manifests(self, directory: str) -> str | None:
        """Copy the manifests to ``<directory>/<jobId>/`` for later diagnosis.

        Copied, not moved as Hadoop does, so a crash right after still leaves a repeatable job commit.
        A failure is logged and ignored: diagnostics must never fail a job.
        """
        try:
            dest_scheme = self.to_url(self.paths.dest).split(":", 1)[0]
            same_store = (fsspec.core.split_protocol(directory)[0] or "file") == dest_scheme
            target_store, target_root = open_store(directory, self.context.storage_options if same_store else None)
            target = posixpath.join(target_root, self.paths.job_id)
            manifests = [s.path for s in self.list_dir(self.paths.manifest_dir) if not s.is_dir]

            def copy(path: str) -> None:
                data = self.read_bytes(path, OP_COPY_FILE)
                # Another store, outside the job's gate: its own call, timed, retried by the job's policy.
                self.call(
                    OP_SAVE_FILE,
                    lambda: target_store.write_bytes(posixpath.join(target, posixpath.basename(path)), data),
                    path,
                )

            run_bounded(self.context.pool, manifests, copy, max_in_flight=self.context.max_in_flight)
            return target_store.to_url(target)
        except Exception as error:
            log.warning("Could not keep the manifests of job %s in %s: %s", self.paths.job_id, directory, error)
            return None
