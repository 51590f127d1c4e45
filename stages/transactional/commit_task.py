"""TransactionalCommitTask: record which of the attempt's files (already in the destination) it commits."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import CommitterError
from ...manifest import DirEntry, EntryStatus, FileEntry, TaskManifest
from ...protocols.transactional.records import TransactionPaths, attempt_tag, parse_data_file_name
from ...statistic_names import (
    COMMITTER_TASK_DIRECTORY_COUNT,
    COMMITTER_TASK_DIRECTORY_DEPTH,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    COMMITTER_TASKS_COMPLETED,
    TASK_STAGE_COMMIT,
)
from ...store import FileStatus
from ..base import Stage
from ..marker_reads import read_job_markers
from ..save_task_manifest import SaveTaskManifestArguments, SaveTaskManifestStage

PROBE_THREADS = 16


@dataclass(frozen=True, slots=True)
class TransactionalCommitTaskArguments:
    task_id: str
    task_attempt_id: str
    written: Sequence[tuple[str, str]] | None
    """(task-side relative path, destination-relative path) of the files the attempt opened in this process, or
    ``None`` when the attempt wrote elsewhere: its files are then found through the job's markers."""
    outputs: Mapping[str, str] | None = None
    """The writer's declared files, task-side path -> destination-relative path; they must be the same (files
    are written in place and cannot be renamed). ``None``: every file of the attempt."""


@dataclass(frozen=True, slots=True)
class TransactionalCommitTaskResult:
    manifest: TaskManifest


class TransactionalCommitTaskStage(Stage[TransactionalCommitTaskArguments, TransactionalCommitTaskResult]):
    """Probe each of the attempt's files, then save a manifest naming them (source = destination).

    Precondition: the attempt's files are closed. Postcondition: ``manifests/$taskAttemptId-manifest.json`` (one
    per attempt: two attempts of a task may both commit, and the job commit chooses) lists every committed file
    with its size; a file the attempt opened but that is not in the store is a ``CommitterError`` naming it (a
    write that failed, or a file still open).
    """

    name = TASK_STAGE_COMMIT

    def execute(self, arguments: TransactionalCommitTaskArguments) -> TransactionalCommitTaskResult:
        transaction = TransactionPaths(self.paths)
        attempt = arguments.task_attempt_id
        if arguments.written is not None:
            finals = self._selected(dict(arguments.written), arguments.outputs, attempt)
            must_exist = True
        else:
            finals = self._from_markers(transaction, attempt, arguments.outputs)
            must_exist = arguments.outputs is not None
        files: list[FileEntry] = []
        directories: dict[str, int] = {}
        for final, status in zip(finals, self._probe([transaction.data_path(f) for f in finals]), strict=True):
            if status is None or status.is_dir:
                if must_exist:
                    raise CommitterError(
                        f"{self.to_url(transaction.data_path(final))}: task attempt {attempt} opened this file but "
                        "it is not in the store (a failed write, or a file still open at task commit)"
                    )
                continue  # a marker whose file was never created
            url = self.to_url(status.path)
            files.append(FileEntry(url, url, status.size, status.etag))
            parent = posixpath.dirname(final)
            while parent:
                directories[parent] = parent.count("/") + 1
                parent = posixpath.dirname(parent)
        self.stats.increment(COMMITTER_TASKS_COMPLETED)
        self.stats.add_sample(COMMITTER_TASK_FILE_COUNT, len(files))
        self.stats.add_sample(COMMITTER_TASK_FILE_SIZE, sum(entry.size for entry in files))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_COUNT, len(directories))
        self.stats.add_sample(COMMITTER_TASK_DIRECTORY_DEPTH, max(directories.values(), default=0))
        attempt_url = self.to_url(self.paths.task_attempt_dir(attempt))
        dirs = [
            DirEntry(self.to_url(transaction.data_path(d)), EntryStatus.DIR, level)
            for d, level in sorted(directories.items())
        ]

        def build() -> TaskManifest:
            return TaskManifest(
                job_id=self.paths.job_id,
                job_attempt_number=self.paths.job_attempt,
                task_id=arguments.task_id,
                task_attempt_id=attempt,
                task_attempt_dir=attempt_url,
                files=files,
                directories=dirs,
                iostatistics=self.stats.snapshot(),
            )

        saved = SaveTaskManifestStage(self.context).apply(SaveTaskManifestArguments(build, per_attempt=True))
        return TransactionalCommitTaskResult(saved.manifest)

    def _probe(self, paths: list[str]) -> list[FileStatus | None]:
        """One ``info`` per file, up to ``PROBE_THREADS`` at once where a call is a round trip (a task's files
        probed one after another cost one round trip each, the bulk of the task side of the commit)."""
        if len(paths) <= 1 or self.capabilities.microsecond_calls:
            return [self.info(path) for path in paths]
        with ThreadPoolExecutor(min(PROBE_THREADS, len(paths)), thread_name_prefix="task-commit-probe") as pool:
            return list(pool.map(self.info, paths))

    def _selected(self, written: dict[str, str], outputs: Mapping[str, str] | None, attempt: str) -> list[str]:
        if outputs is None:
            return sorted(written.values())
        finals = []
        for source, dest in sorted(outputs.items()):
            if source != dest:
                raise CommitterError(
                    f"task attempt {attempt}: declared output {source!r} -> {dest!r}: the transactional protocol "
                    "writes files in place and cannot rename them; open the file at its destination-relative path"
                )
            final = written.get(source)
            if final is None:
                raise CommitterError(f"task attempt {attempt}: declared output {source!r} was never written")
            finals.append(final)
        return finals

    def _from_markers(
        self, transaction: TransactionPaths, attempt: str, outputs: Mapping[str, str] | None
    ) -> list[str]:
        """The attempt's files from the job's markers: those whose names carry this job's tid and this attempt's tag."""
        tag = attempt_tag(attempt)
        finals = []
        for marker in sorted(read_job_markers(self, transaction.markers).markers):
            parsed = parse_data_file_name(posixpath.basename(marker.data_file))
            if parsed is not None and parsed.tid == transaction.tid and parsed.tag == tag:
                finals.append(marker.data_file)
        if outputs is None:
            return finals
        wanted = set(outputs)
        by_task_name = {_task_side_name(final, tag, transaction.tid): final for final in finals}
        missing = sorted(wanted - set(by_task_name))
        if missing or any(source != dest for source, dest in outputs.items()):
            raise CommitterError(
                f"task attempt {attempt}: declared outputs {missing[:3] or sorted(outputs)[:3]} are not files this "
                "attempt wrote in place"
            )
        return sorted(by_task_name[name] for name in wanted)


def _task_side_name(final: str, tag: str, tid: str) -> str:
    """The task-side relative path of a destination file name (the tid and tag removed again)."""
    directory, name = posixpath.split(final)
    stem, dot, rest = name.partition(".")
    original = stem.removesuffix(f"-tid-{tid}-{tag}") + dot + rest
    return posixpath.join(directory, original) if directory else original
