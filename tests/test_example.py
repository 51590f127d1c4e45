"""The README's main job runs end to end and its output is exact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import manifest_committer as mc

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "multi_task_write.py"


def test_example_commits_exactly_one_attempt_per_task(tmp_path: Path) -> None:
    dest = tmp_path / "events"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dest", str(dest), "--tasks", "4", "--rows", "2000"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "attempt_00003_0: task 3 attempt 0 crashed half-way; aborted, retrying" in result.stdout
    assert "Read back 8,000 rows" in result.stdout
    summary = mc.SuccessData.load(str(dest / "_SUCCESS"))
    assert summary.success
    assert summary.iostatistics.counters["committer_tasks_completed"] == 4
    assert not (dest / "_temporary").exists()
    assert (tmp_path / "committer.log").stat().st_size > 0


def test_example_says_what_to_install_when_its_extra_is_missing(tmp_path: Path) -> None:
    """``concurrent-log-handler`` is the ``examples`` extra, not a dependency of the library: say how to get it."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "concurrent_log_handler.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dest", str(tmp_path / "events"), "--tasks", "1", "--rows", "10"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "pip install '.[examples]'" in result.stderr
    assert not (tmp_path / "events").exists()
