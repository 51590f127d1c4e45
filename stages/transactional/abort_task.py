"""TransactionalAbortTask: delete an attempt's files from the destination."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from ...protocols.transactional.records import TransactionPaths, attempt_tag, parse_data_file_name
from ...statistic_names import TASK_STAGE_ABORT_TASK
from ..base import Stage
from ..marker_reads import read_job_markers
from .abort_job import delete_named_files


@dataclass(frozen=True, slots=True)
class TransactionalAbortTaskArguments:
    task_attempt_id: str
    written: Sequence[tuple[str, str]] | None
    """(task-side path, destination-relative path) opened through this committer; ``None``: find them through
    the job's markers (the attempt wrote in another process)."""


class TransactionalAbortTaskStage(Stage[TransactionalAbortTaskArguments, int]):
    """Delete each file of the attempt; returns how many were there. Its markers stay: the job commit deletes
    anything they name that no committed manifest lists, so a file created after this abort goes too."""

    name = TASK_STAGE_ABORT_TASK

    def execute(self, arguments: TransactionalAbortTaskArguments) -> int:
        transaction = TransactionPaths(self.paths)
        if arguments.written is not None:
            finals = [final for _, final in arguments.written]
        else:
            tag = attempt_tag(arguments.task_attempt_id)
            finals = []
            for marker in read_job_markers(self, transaction.markers).markers:
                parsed = parse_data_file_name(posixpath.basename(marker.data_file))
                if parsed is not None and parsed.tid == transaction.tid and parsed.tag == tag:
                    finals.append(marker.data_file)
        return len(delete_named_files(self, [transaction.data_path(final) for final in sorted(finals)]).deleted)
