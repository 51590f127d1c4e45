"""The examples of the other writer frameworks run end to end and read back exactly what they wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import manifest_committer as mc

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "name",
    ["arrow", "polars", pytest.param("dask", marks=pytest.mark.slow), pytest.param("ray", marks=pytest.mark.slow)],
)
def test_example_writes_and_reads_back(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "events"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / f"{name}_write.py"), "--dest", str(dest)],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = mc.SuccessData.load(str(dest / "_SUCCESS"))
    assert summary.success
    assert summary.job_id.startswith(f"{name}-")
