"""The command line: readable output for people, raw JSON on request, one-line errors and no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import format_success, main
from manifest_committer.formatting import format_bytes, format_millis
from tests.fixtures.stage_context import load_data


def _committed_job(destination: str, report_dir: str) -> mc.ManifestCommitter:
    config = mc.CommitterConfig(summary_report_directory=report_dir)
    committer = mc.ManifestCommitter(destination, job_id="job-cli", config=config)
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    with task.fs.open(task.work_path + "/dt=2026-11-22/part 0%.csv", "wb") as handle:
        handle.write(b"a,b\n1,2\n")
    committer.commit_task(task)
    committer.commit_job()
    return committer


def test_success_prints_outcome_files_and_counters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out")
    _committed_job(dest, str(tmp_path / "reports"))
    assert main(["success", dest + "/_SUCCESS"]) == 0
    out = capsys.readouterr().out
    assert "Outcome:    SUCCESS" in out
    assert "job-cli" in out
    assert "dt=2026-11-22/part%200%25.csv" in out
    assert "committer_files_committed" in out
    assert "Files:      1 committed" in out
    assert "Bytes:      8 bytes" in out


def test_success_reads_a_summary_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out")
    _committed_job(dest, str(tmp_path / "reports"))
    assert main(["success", str(tmp_path / "reports" / "summary-job-cli.json")]) == 0
    assert "mapreduce.manifest.committer.io.threads: 32" in capsys.readouterr().out


def test_success_json_is_the_raw_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out")
    _committed_job(dest, str(tmp_path / "reports"))
    assert main(["success", "--json", dest + "/_SUCCESS"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert document["jobId"] == "job-cli"


def test_manifest_prints_files_and_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out")
    committer = mc.ManifestCommitter(dest, job_id="job-m")
    committer.setup_job()
    task = committer.setup_task("task_00007", "attempt_00007_1")
    with task.fs.open(task.work_path + "/a/b/c.txt", "wb") as handle:
        handle.write(b"12345")
    committer.commit_task(task)
    path = committer.paths.manifest_path("task_00007")
    assert main(["manifest", path]) == 0
    out = capsys.readouterr().out
    assert "attempt_00007_1" in out
    assert "Files:         1 (5 bytes)" in out
    assert "not_found" in out
    assert main(["manifest", "--json", path]) == 0
    assert orjson.loads(capsys.readouterr().out)["taskID"] == "task_00007"


def test_a_percent_encoded_url_from_a_manifest_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "out put")
    committer = _committed_job(dest, str(tmp_path / "reports"))
    url = committer.store.to_url(committer.paths.success_path)
    assert "%20" in url
    assert main(["success", url]) == 0
    assert "Outcome:    SUCCESS" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "command", "expected"),
    [
        (None, "success", "file not found"),
        (b"", "success", "zero-byte _SUCCESS marker"),
        (b"{not json", "success", "failed to read JSON"),
        (b'{"name": "other"}', "success", "not a success file"),
        (b'{"type": "x", "version": 1}', "manifest", "not a task manifest"),
    ],
)
def test_bad_files_give_one_line_error_and_nonzero_status(
    tmp_path: Path, content: bytes | None, command: str, expected: str
) -> None:
    path = tmp_path / "file.json"
    if content is not None:
        path.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", command, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("manifest-committer: error: ")
    assert str(path) in lines[0]
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("command", "sample", "edit", "expected"),
    [
        ("manifest", "local-task-manifest.json", {"iostatistics": {"meanstatistics": [1]}}, "iostatistics"),
        ("manifest", "local-task-manifest.json", {"files": [{"s": 1, "d": [], "z": "big"}]}, "files[0].s"),
        ("manifest", "local-task-manifest.json", {"directories": {"d": "x"}}, "directories: must be an array"),
        ("success", "success.json", {"iostatistics": {"meanstatistics": [1]}}, "iostatistics"),
        ("success", "success.json", {"metrics": {"m": [1]}}, "metrics.m: must be an integer"),
        ("success", "success.json", {"diagnostics": []}, "diagnostics: must be an object"),
    ],
)
def test_malformed_documents_of_any_shape_give_one_line_naming_file_and_field(
    tmp_path: Path, command: str, sample: str, edit: dict[str, object], expected: str
) -> None:
    """A well-formed JSON document with a field of the wrong shape raised a bare AttributeError/TypeError and
    the command printed a traceback."""
    document = load_data(f"hadoop/{sample}")
    document.update(edit)
    path = tmp_path / "file.json"
    path.write_bytes(orjson.dumps(document))

    result = run_cli(command, str(path))

    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_format_bytes_gives_the_readable_size_and_the_exact_count() -> None:
    assert format_bytes(0) == "0 bytes"
    assert format_bytes(1023) == "1,023 bytes"
    assert format_bytes(3010) == "2.9 KiB (3,010 bytes)"
    assert format_bytes(5 * 1024**2 + 1) == "5.0 MiB (5,242,881 bytes)"
    assert format_bytes(3 * 1024**4) == "3.0 TiB (3,298,534,883,328 bytes)"


def test_format_millis_has_a_unit_on_every_figure() -> None:
    assert [format_millis(v) for v in (0, 1.5, 13, 999, 2345, 184_000)] == [
        "0 ms",
        "1.5 ms",
        "13 ms",
        "999 ms",
        "2.35 s",
        "3 min 4.0 s",
    ]


def _success_with_statistics() -> mc.SuccessData:
    success = mc.SuccessData.create("job-s", "JobID", "committer_commit_job")
    stats = success.iostatistics
    stats.counters.update(
        {"committer_files_committed": 3000, "committer_bytes_committed": 5 * 1024**2, "op_rename": 3000}
    )
    stats.meanstatistics.update(
        {
            "job_stage_rename_files.mean": mc.MeanStatistic(1, 2500),
            "job_stage_load_manifests.mean": mc.MeanStatistic(1, 300),
            "job_stage_setup.mean": mc.MeanStatistic(1, 9999),
            "op_rename.mean": mc.MeanStatistic(3000, 6000),
            "committer_task_file_size": mc.MeanStatistic(2, 4096),
        }
    )
    stats.minimums.update({"op_rename.min": 1, "committer_task_file_size": 1024})
    stats.maximums.update({"op_rename.max": 40, "committer_task_file_size": 3072})
    return success


def test_success_puts_files_bytes_and_time_first_and_separates_durations_from_sizes() -> None:
    lines = format_success(_success_with_statistics(), "x/_SUCCESS").splitlines()
    assert lines[1:5] == [
        "  Outcome:    SUCCESS",
        "  Files:      3,000 committed",
        "  Bytes:      5.0 MiB (5,242,880 bytes)",
        "  Time:       2.80 s (job commit stages)",  # set-up runs when the job starts: not part of the commit
    ]
    durations = lines.index("Durations (calls, min, mean, max, total):")
    per_task = lines.index("Per task (tasks, min, mean, max):")
    assert lines[durations + 4].split() == ["op_rename", "3,000", "1", "ms", "2", "ms", "40", "ms", "6.00", "s"]
    assert "committer_task_file_size" not in "\n".join(lines[durations:per_task])
    assert lines[per_task + 1].split() == [
        "committer_task_file_size", "2",
        "1.0", "KiB", "(1,024", "bytes)", "2.0", "KiB", "(2,048", "bytes)", "3.0", "KiB", "(3,072", "bytes)",
    ]  # fmt: skip
    byte_totals = lines.index("Byte totals:")
    assert lines[byte_totals + 1].split() == ["committer_bytes_committed", "5.0", "MiB", "(5,242,880", "bytes)"]
    counts = "\n".join(lines[lines.index("Counts (events and store calls):") : byte_totals])
    assert "op_rename" in counts
    assert "committer_bytes_committed" not in counts


def test_a_summary_report_gives_the_whole_job_commit_time() -> None:
    success = _success_with_statistics()
    success.iostatistics.meanstatistics["committer_commit_job.mean"] = mc.MeanStatistic(1, 3100)
    assert "  Time:       3.10 s (job commit)" in format_success(success, "summary.json").splitlines()


@pytest.mark.parametrize(
    "argv",
    [["succes", "x"], ["success"], ["success", "--no-such-flag", "x"], []],
    ids=["typo", "no-path", "flag", "none"],
)
def test_usage_errors_are_one_line(argv: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", *argv], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("manifest-committer: error: ")
    assert "--help" in lines[0]


def test_an_unforeseen_error_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "_SUCCESS"
    path.write_bytes(b"{}")

    def broken(data: bytes, origin: str) -> mc.SuccessData:
        raise AttributeError("'list' object has no attribute 'get'\nsecond line")

    monkeypatch.setattr(mc.SuccessData, "from_json", broken)
    assert main(["success", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"manifest-committer: error: {path}: AttributeError: ")
    assert "Traceback" not in err
