"""SaveSuccess: put this job's ``_SUCCESS`` summary in place, the job's visible commit point."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..parallel import run_bounded
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
    kept in the job attempt directory, where an abort puts it back (``AbortJobStage``). A rerun after a kill
    in between finds the earlier one kept and only renames ours in.
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
            # Retried as a whole up to manifest.save.attempts times; each step is safe to repeat. The leftover's
            # delete and the probe of ``_SUCCESS`` go together (one round trip); the rename never overwrites, so
            # a ``_SUCCESS`` put there since the probe fails it, and the attempt is repeated.
            with self.stats.track(TASK_STAGE_SAVE_SUMMARY_FILE):
                found: list[FileStatus | None] = []
                steps: list[Callable[[], object]] = [
                    lambda: self.delete_dir(temp, retry=False),  # a leftover of an earlier run: even a directory
                    lambda: found.append(self.info(final, retry=False)),
                ]
                run_bounded(self.context.pool, steps, _run, max_in_flight=self.context.max_in_flight)
                self.write_bytes(temp, arguments.success.to_json(), retry=False)
                with self.stats.track(COMMIT_FILE_RENAME):
                    if found[0] is not None:
                        if self.info(aside, retry=False) is None:
                            log.info("Keeping the earlier %s as %s", self.to_url(final), self.to_url(aside))
                            self.rename_file(final, aside, retry=False)
                        else:
                            # An earlier run (or attempt) of this commit already kept the older one.
                            self.delete_file(final, retry=False)
                    self.rename_file(temp, final, retry=False)

        self.context.save_retry.call(attempt, f"{TASK_STAGE_SAVE_SUMMARY_FILE} {final}")
        return SaveSuccessResult(final)


def _run(step: Callable[[], object]) -> object:
    return step()
