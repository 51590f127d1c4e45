"""The progress bar of a job commit run from the command line: on a terminal only, drawn by tqdm.

tqdm rather than rich: one small pure-Python package with no dependencies of its own, which draws a single
bar on stderr and sizes it to the terminal; rich would bring Pygments and markdown-it for one bar. The
library never draws anything: ``commit_job(progress=...)`` calls back once per unit of renames, and this is
the callback.
"""

from __future__ import annotations

import logging
from typing import Never, TextIO

from tqdm import tqdm

log = logging.getLogger(__name__)


class CommitProgressBar:
    """A bar from the start of the job commit (manifests loading, total unknown) to the last file renamed.

    With ``enabled`` false (output is not a terminal) it draws nothing at all, so logs and pipes stay clean.
    """

    def __init__(self, job_id: str, stream: TextIO, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: tqdm[Never] | None = None
        if enabled:
            self._bar = tqdm(
                total=None,
                desc=f"job {job_id}: loading manifests",
                unit=" files",
                file=stream,
                dynamic_ncols=True,
                leave=True,
            )

    def __call__(self, done: int, total: int) -> None:
        bar = self._bar
        if bar is None:
            return
        if bar.total != total:
            bar.total = total
            bar.set_description_str(bar.desc.replace("loading manifests", "renaming"), refresh=False)
        bar.update(done - bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> CommitProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
