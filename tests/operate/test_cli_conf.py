"""``--conf`` of the command line: the short form its help shows (``io.threads``) is the committer's key, and
every other key that is not a committer key is an error naming it, with the key that was meant."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from tests.fixtures.committing import FAST, run_task


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_short_key_is_the_committers_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest, reports = str(tmp_path / "out"), tmp_path / "reports"
    committer = mc.ManifestCommitter(dest, "job-short", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})

    status, _, err = run(
        capsys,
        "commit",
        dest,
        "--job",
        "job-short",
        "--conf",
        "io.threads=3",
        "--conf",
        f"summary.report.directory={reports}",
    )

    assert (status, err) == (0, "")
    summary = orjson.loads((reports / "summary-job-short.json").read_bytes())
    assert summary["diagnostics"]["mapreduce.manifest.committer.io.threads"] == "3"


def test_a_short_heartbeat_expiry_judges_liveness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out")
    config = mc.CommitterConfig.from_hadoop_conf({"mapreduce.manifest.committer.markers.type": "direct"})
    driver = mc.create_committer(dest, "job-gone", "transactional", config=config)
    driver.setup_job()
    run_task(driver, "task_0", "attempt_0", {"gone.csv": b"g"})
    driver.close()  # the driver dies: its heartbeat stops
    time.sleep(1.2)

    assert run(capsys, "rollback", dest, "--dry-run")[1].startswith("Nothing rolled back: no dead")
    status, out, _ = run(capsys, "rollback", dest, "--dry-run", "--conf", "heartbeat.expiry.seconds=1")
    assert status == 0 and "would undo 1 job attempt(s)" in out


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("mapreduce.manifest.commiter.io.threads", "mapreduce.manifest.committer.io.threads"),
        ("MAPREDUCE.MANIFEST.COMMITTER.IO.THREADS", "mapreduce.manifest.committer.io.threads"),
        ("mapreduce.manifest.committer.io.thread", "mapreduce.manifest.committer.io.threads"),
        ("io.thread", "mapreduce.manifest.committer.io.threads"),
        ("heartbeat.expiry.second", "mapreduce.manifest.committer.heartbeat.expiry.seconds"),
        ("fs.s3a.committer.name", None),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["rollback"], ["vacuum", "--retention-hours", "1"]])
def test_every_other_key_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, meant: str | None, command: list[str]
) -> None:
    status, out, err = run(capsys, command[0], str(tmp_path), *command[1:], "--conf", f"{key}=8")
    assert (status, out) == (1, "")
    assert err.startswith(f"manifest-committer: error: --conf {key}: ")
    assert "committer configuration key" in err
    assert err.count("\n") == 1
    if meant is None:
        assert "did you mean" not in err
    else:
        assert f"did you mean `{meant}`?" in err
