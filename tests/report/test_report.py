"""The report across runs: finding and loading the documents, the figures derived from them, the page and CLI.

The runs are made by the real committer (tests/fixtures/report_runs.py) plus Hadoop's own files; what a person
sees in a browser is tested in report/test_browser.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html import escape
from pathlib import Path

import fsspec
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.cli import main
from manifest_committer.report import load_documents, render_page, summarize, write_report
from manifest_committer.report.aggregate import RunSummary, percentile
from manifest_committer.report.loading import is_report_name
from manifest_committer.statistic_names import JOB_STAGE_LOAD_MANIFESTS, JOB_STAGE_RENAME_FILES

from ..fixtures.report_runs import (
    ABORTED_JOB,
    FAILED_JOB,
    HADOOP_FAILED_JOB,
    PLAIN_JOB,
    RETRIED_JOB,
    ReportRuns,
    make_runs,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ReportRuns:
    return make_runs(tmp_path_factory.mktemp("report-runs"))


def _by_job(summaries: tuple[RunSummary, ...]) -> dict[str, RunSummary]:
    return {run.job_id: run for run in summaries}


def test_names_searched_in_directories() -> None:
    assert is_report_name("/a/_SUCCESS")
    assert is_report_name("s3://b/reports/summary-job_1.json")
    assert not is_report_name("/a/_SUCCESS.crc")
    assert not is_report_name("/a/summary-job_1.json.tmp")
    assert not is_report_name("/a/task_1-manifest.json")


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 0.0, 20.0], 100) == 20.0
    assert percentile(list(map(float, range(101))), 95) == pytest.approx(95.0)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_every_run_found_once_and_bad_files_skipped_with_reason(runs: ReportRuns) -> None:
    loaded = load_documents([str(runs.root)])
    jobs = sorted(run.document.job_id for run in loaded.runs)
    hadoop_success = orjson.loads((runs.hadoop / "dest" / "_SUCCESS").read_bytes())["jobId"]
    expected = [ABORTED_JOB, FAILED_JOB, PLAIN_JOB, RETRIED_JOB, HADOOP_FAILED_JOB, "job_202411220000_0003"]
    assert jobs == sorted([*expected, hadoop_success])
    # _SUCCESS and summary-<job>.json of one run count once, naming both places.
    retried = next(run for run in loaded.runs if run.document.job_id == RETRIED_JOB)
    places = {Path(url.removeprefix("file://")) for url in (retried.source, *retried.also_at)}
    assert places == {runs.destinations[0] / "_SUCCESS", runs.reports / f"summary-{RETRIED_JOB}.json"}
    reasons = {Path(item.url.removeprefix("file://")).name: item.reason for item in loaded.skipped}
    assert set(reasons) == {"summary-broken.json", "_SUCCESS"}
    assert "JSON" in reasons["summary-broken.json"]
    assert "zero-byte" in reasons["_SUCCESS"]


def test_outcomes_stages_and_figures_of_real_runs(runs: ReportRuns) -> None:
    data = summarize(load_documents([str(runs.root)]))
    by_job = _by_job(data.runs)

    conflict = by_job[FAILED_JOB]
    assert conflict.outcome == "failed"
    assert conflict.failing_stage == JOB_STAGE_RENAME_FILES
    assert conflict.exception is not None and "OutputConflictError" in conflict.exception
    assert conflict.stacktrace is not None and "Traceback" in conflict.stacktrace
    assert any(stage.name == JOB_STAGE_RENAME_FILES and stage.failed for stage in conflict.stages)

    assert by_job[ABORTED_JOB].outcome == "aborted"
    assert by_job[ABORTED_JOB].failing_stage is None
    hadoop_failed = by_job[HADOOP_FAILED_JOB]
    assert (hadoop_failed.outcome, hadoop_failed.failing_stage) == ("failed", JOB_STAGE_LOAD_MANIFESTS)
    assert hadoop_failed.exception is not None and "PathIOException" in hadoop_failed.exception
    assert by_job["job_202411220000_0003"].outcome == "aborted"

    retried = by_job[RETRIED_JOB]
    assert retried.outcome == "succeeded"
    assert retried.store == "file" and retried.store_from_filenames
    # Four tasks wrote 1, 4, 7 and 10 files of (task + 1)**2 kB each.
    sizes = [(3 * task + 1) * 1000 * (task + 1) ** 2 for task in range(4)]
    assert (retried.files, retried.bytes) == (22, sum(sizes))
    assert retried.files_per_manifest is not None and retried.bytes_per_manifest is not None
    assert (retried.files_per_manifest.minimum, retried.files_per_manifest.maximum) == (1, 10)
    assert retried.files_per_manifest.samples == 4
    assert (retried.bytes_per_manifest.minimum, retried.bytes_per_manifest.maximum) == (min(sizes), max(sizes))
    assert retried.retries >= 3  # three injected transient rename failures, each retried
    assert retried.renames_recovered == 1  # the rename whose answer was lost
    assert retried.duration_ms is not None and retried.duration_ms == retried.commit_job_ms

    plain = by_job[PLAIN_JOB]
    assert plain.rate_limited > 0 and plain.rate_limited_ms is not None and plain.rate_limited_ms > 0

    hadoop_success = next(run for run in data.runs if run.store == "abfs")
    assert hadoop_success.duration_ms == 1840  # committer_commit_job.max: Hadoop kept no mean for it
    assert hadoop_success.bytes == 58634258


def test_percentiles_across_runs(runs: ReportRuns) -> None:
    data = summarize(load_documents([str(runs.root)]))
    stages = {row.name: row for row in data.stage_percentiles}
    commit = stages["committer_commit_job"]
    durations = [run.duration_ms for run in data.runs if run.duration_ms is not None]
    assert commit.runs == len(durations)
    assert commit.p50 == percentile(durations, 50)
    assert commit.p95 == percentile(durations, 95)
    assert commit.p50 <= commit.p95 <= commit.maximum
    assert stages[JOB_STAGE_RENAME_FILES].failures == 1
    operations = {row.name: row for row in data.operation_percentiles}
    renames = [run.operations["op_rename"] for run in data.runs if "op_rename" in run.operations]
    assert operations["op_rename"].failures == sum(latency.failures for latency in renames) > 0
    assert operations["op_rename"].calls == sum(latency.calls for latency in renames)
    assert operations["op_rename"].maximum == max(latency.max_ms or 0 for latency in renames)


def test_page_is_self_contained_and_escapes_document_text(runs: ReportRuns, tmp_path: Path) -> None:
    """A report is untrusted: markup in it is shown as text; the page fetches nothing."""
    raw = orjson.loads((runs.reports / f"summary-{FAILED_JOB}.json").read_bytes())
    raw["jobId"] = "job_<b>bold</b>"
    raw["diagnostics"]["exception"] = '<img src=x onerror="alert(1)">'
    raw["timestamp"] += 1
    (tmp_path / "summary-crafted.json").write_bytes(orjson.dumps(raw))
    page = render_page(summarize(load_documents([str(tmp_path)])))
    assert "<img src=x" not in page and "<b>bold</b>" not in page
    assert escape('<img src=x onerror="alert(1)">') in page
    assert escape("job_<b>bold</b>") in page
    assert not re.search(r"""\b(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page


def test_cli_writes_page_of_files_and_directories(
    runs: ReportRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    hadoop_failure = runs.hadoop / "reports" / f"summary-{HADOOP_FAILED_JOB}.json"
    assert main(["report", str(runs.reports), str(hadoop_failure), "--html", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote {out}: 5 runs"
    page = out.read_text(encoding="utf-8")
    for job in (RETRIED_JOB, PLAIN_JOB, FAILED_JOB, ABORTED_JOB, HADOOP_FAILED_JOB):
        assert job in page


def test_cli_reads_any_fsspec_store(runs: ReportRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory = fsspec.filesystem("memory")
    base = "/report-test"
    try:
        memory.pipe(f"{base}/deep/er/_SUCCESS", (runs.destinations[0] / "_SUCCESS").read_bytes())
        out = tmp_path / "report.html"
        code = main(["report", f"memory://{base}", "--html", str(out), "--storage-option", "skip_instance_cache=1"])
        assert code == 0, capsys.readouterr().err
        assert f"memory://{base}/deep/er/_SUCCESS" in out.read_text(encoding="utf-8")
    finally:
        memory.rm(base, recursive=True)


def test_cli_nothing_found_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "empty"), str(tmp_path / "missing"), "--html", str(out)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("manifest-committer: error: no _SUCCESS")
    assert "missing: no such file or directory" in error
    assert not out.exists()


def test_cli_only_bad_files_writes_page_and_fails(
    runs: ReportRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(runs.corrupt), "--html", str(out)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no readable report among 2 files" in error
    page = out.read_text(encoding="utf-8")
    assert "summary-broken.json" in page and "zero-byte _SUCCESS marker" in page


def test_cli_bad_storage_option_is_one_line_error(
    runs: ReportRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(runs.reports), "--html", str(tmp_path / "x.html"), "--storage-option", "nokey"]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_unwritable_output_is_one_line_error(runs: ReportRuns, tmp_path: Path) -> None:
    with pytest.raises(mc.CommitterError, match="cannot write the report"):
        write_report([str(runs.reports)], str(tmp_path / "no" / "such" / "dir" / "r.html"))


def test_importing_the_package_leaves_the_report_out() -> None:
    code = "import sys, manifest_committer; print(any(m.startswith('manifest_committer.report') for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
