"""The report's row of the whole job commit (``committer_commit_job``) counts the runs that failed."""

from __future__ import annotations

from pathlib import Path

from manifest_committer.report import load_documents, render_page, summarize
from manifest_committer.statistic_names import COMMITTER_COMMIT_JOB

from ..fixtures.report_runs import make_runs


def test_the_job_commit_row_counts_failed_runs(tmp_path: Path) -> None:
    runs = make_runs(tmp_path)
    data = summarize(load_documents([str(runs.root)]))
    failed = sum(run.outcome == "failed" for run in data.runs)
    assert failed >= 2  # ours and Hadoop's
    row = next(row for row in data.stage_percentiles if row.name == COMMITTER_COMMIT_JOB)
    assert row.failures == failed
    assert render_page(data)
