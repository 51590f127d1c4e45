"""What the stages of the ``v1`` and ``v2`` protocols share: Hadoop FileOutputCommitter's layout, and which job
holds it."""

from __future__ import annotations

from typing import TypeVar

from ...errors import JobStateError
from ...protocols.file_output.layout import FileOutputPaths, LayoutHolder
from ..base import Stage

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


class FileOutputStage(Stage[ArgT, ResultT]):
    """A stage of the v1/v2 protocols: ``layout`` is Hadoop's ``_temporary/<appAttempt>`` tree of this job."""

    @property
    def layout(self) -> FileOutputPaths:
        return FileOutputPaths(self.paths.dest, self.paths.job_attempt)

    def job_holding_the_layout(self) -> str | None:
        """The job id in ``_temporary/<appAttempt>/_JOB``, or ``None`` when no job holds it."""
        data = self.read_bytes_if_present(self.layout.owner_path)  # one call: _JOB may go between two
        return None if data is None else LayoutHolder.from_bytes(data).job_id

    def check_job_holds_the_layout(self, doing: str) -> None:
        """``JobStateError`` naming the directory unless this job set it up and it is still there."""
        holder = self.job_holding_the_layout()
        if holder == self.paths.job_id:
            return
        where = self.to_url(self.layout.job_attempt_dir)
        if holder is None:
            raise JobStateError(
                f"{where}: job {self.paths.job_id} is not set up (or was cleaned up), so it cannot {doing}"
            )
        raise JobStateError(
            f"{where}: held by job {holder}, not job {self.paths.job_id}, so it cannot {doing}: "
            "Hadoop's v1/v2 layout has one job per destination and attempt at a time"
        )
