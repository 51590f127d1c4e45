"""The ``report`` subcommand: write the page and say in one line what it holds."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from .page import write_report

log = logging.getLogger(__name__)


def run_report(paths: Sequence[str], output: str, storage_options: dict[str, Any]) -> int:
    """Write the report; non-zero when no run could be read (the page still lists why each input was skipped)."""
    data = write_report(paths, output, storage_options)
    skipped = f", {len(data.skipped):,} inputs skipped" if data.skipped else ""
    if not data.runs:
        print(
            f"manifest-committer: error: no readable report among {data.files_found:,} files found; "
            f"the reasons are listed in {output}",
            file=sys.stderr,
        )
        return 1
    print(f"Wrote {output}: {len(data.runs):,} runs{skipped}")
    return 0
