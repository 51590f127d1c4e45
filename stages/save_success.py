"""SaveSuccess: put this job's ``_SUCCESS`` summary in place, the job's visible commit point."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..parallel import run_together
from ..statistic_names import COMMIT_FILE_RENAME, JOB_STAGE_SAVE_SUCCESS_MARKER, TASK_STAGE_SAVE_SUMMARY_FILE
from ..store import FileStatus
from ..success_data import SuccessData
from .base import Stage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SaveSuccessArguments:
    success: SuccessData
    temp: str | None = None
    """Where to write it first; ``None``: the manifest layout's ``_SUCCESS.tmp``."""
    aside: str | None = None
    """Where to keep the replaced ``_SUCCESS``; ``None``: the manifest layout's ``previous-_SUCCESS``."""


@dataclass(frozen=True, slots=True)
class SaveSuccessResult:
    path: str


class SaveSuccessStage(Stage[SaveSuccessArguments, SaveSuccessResult]):
    """Save to ``<job attempt dir>/_SUCCESS.tmp``; move any existing ``_SUCCESS`` aside to
    ``<job attempt dir>/previous-_SUCCESS``; rename ours into place.

    Never delete-then-rename: until ours is in place, the earlier ``_SUCCESS`` is either in the destination or
    kept in the job attempt directory, where an abort puts it back (``success_aside``). A copy kept there
    already (by setup, or an earlier run) gives way to a ``_SUCCESS`` in place, which is newer. A rerun after a
    kill in between finds the earlier one kept and only renames ours in.
    Precondition: every file is committed (and validated, if asked). Postcondition: ``_SUCCESS`` is this
    job's complete summary (the commit point); readers never see a half-written one.
    """

    name = JOB_STAGE_SAVE_SUCCESS_MARKER

    def execute(self, arguments: SaveSuccessArguments) -> SaveSuccessResult:
        paths = self.paths
        temp = arguments.temp or paths.temp_success_path
        aside = arguments.aside or paths.previous_success_path
        final = paths.success_path

        def attempt() -> None:
            # Retried as a whole up to manifest.save.attempts times; each step is safe to repeat. The write of
            # the temporary file (replacing a leftover of an earlier run) and the probe of ``_SUCCESS`` go
            # together, one round trip; the rename never overwrites, so a ``_SUCCESS`` put there since the probe
            # fails it, and the attempt is repeated.
            with self.stats.track(TASK_STAGE_SAVE_SUMMARY_FILE):
                found: list[FileStatus | None] = []
                data = arguments.success.to_json()
                steps: list[Callable[[], object]] = [
                    lambda: self._write_over_leftover(temp, data),
                    lambda: found.append(self.info(final, retry=False)),
                ]
                run_together(self.context.pool, steps, max_in_flight=self.context.max_in_flight)
                with self.stats.track(COMMIT_FILE_RENAME):
                    if found[0] is not None:
                        if self.info(aside, retry=False) is not None:
                            # What setup (or an earlier run) kept is older than the one in place, which
                            # another job wrote since: an abort puts back the newer, never the older.
                            self.delete_file(aside, retry=False)
                        log.info("Keeping the earlier %s as %s", self.to_url(final), self.to_url(aside))
                        self.rename_file(final, aside, retry=False)
                    self.rename_file(temp, final, retry=False)

        self.context.save_retry.call(attempt, f"{TASK_STAGE_SAVE_SUMMARY_FILE} {final}")
        return SaveSuccessResult(final)

    def _write_over_leftover(self, temp: str, data: bytes) -> None:
        """Write ``temp``, replacing a file an earlier run left there; a directory left there, which a write
        cannot replace, is deleted and the write made again."""
        try:
            self.write_bytes(temp, data, retry=False)
        except IsADirectoryError:
            log.info("Deleting the directory left at %s by an earlier run", self.to_url(temp))
            self.delete_dir(temp, retry=False)
            self.write_bytes(temp, data, retry=False)
