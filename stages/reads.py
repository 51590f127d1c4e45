"""StateReads: the gate of the tools that only look at a job's state (``status``, and the commands' reports).

Not a step of any protocol: it exists so that every read of ``status`` is timed, retried and counted like any
stage's call (docs/architecture.md), and so that a protocol's description of its own state reads through the gate too.
"""

from __future__ import annotations

import dataclasses
import posixpath

from ..config import CommitterConfig
from ..errors import JobStateError
from ..iostatistics import StatisticsStore
from ..paths import JobPaths
from ..statistic_names import OP_LOAD_FILE
from ..store import StoreOperations
from .base import Stage, StageContext

STATUS = "status"


class StateReads(Stage[None, None]):
    """Read-only store calls through the stage gate; ``paths`` names the job attempt being looked at."""

    name = STATUS

    @classmethod
    def over(cls, store: StoreOperations, config: CommitterConfig, paths: JobPaths) -> StateReads:
        """A gate over ``store`` for the job attempt of ``paths``, with statistics of its own."""
        return cls(StageContext(config=config, store=store, paths=paths, stats=StatisticsStore()))

    def at(self, paths: JobPaths) -> StateReads:
        """The same store and configuration, for another job attempt."""
        return StateReads(dataclasses.replace(self.context, paths=paths, stats=StatisticsStore()))

    def execute(self, arguments: None) -> None:
        raise JobStateError("the reads of status are not a step to run")

    def try_read(self, path: str, statistic: str = OP_LOAD_FILE) -> bytes | None:
        """The file's bytes, or ``None`` where there is no file (missing, or a directory)."""
        try:
            return self.read_bytes(path, statistic)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def names(self, path: str) -> list[tuple[str, bool]]:
        """Entries of a directory as (name, is_dir), sorted; none if it is missing."""
        try:
            listing = self.list_dir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted((posixpath.basename(status.path.rstrip("/")), status.is_dir) for status in listing)
