"""The examples of docs/markers.md run as pasted, in a fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(
    r"^```python\n(.*?)^```", (REPO / "docs" / "markers.md").read_text(encoding="utf-8"), flags=re.DOTALL | re.M
)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block-{index}" for index in range(len(BLOCKS))])
def test_each_example_runs(block: str, tmp_path: Path) -> None:
    environment = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() in ("127.0.0.1 0 60.0", "job-1 1 None")
