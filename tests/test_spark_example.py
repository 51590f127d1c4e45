"""The README's main job (``examples/spark_job.py``) runs end to end on a real local Spark session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import manifest_committer as mc

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "spark_job.py"


def test_spark_example_writes_reads_back_and_summarises(tmp_path: Path) -> None:
    dest = tmp_path / "spark-events"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--rows", "20000", "--dest", str(dest)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Read back 20,000 rows with spark.read.parquet (expected 20,000)" in result.stdout
    assert "Outcome:    SUCCESS" in result.stdout
    summary = mc.SuccessData.load(str(dest / "_SUCCESS"))
    assert summary.success
    assert not (dest / "_temporary").exists()
