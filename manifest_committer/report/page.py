"""Render the report as one self-contained HTML page: inline CSS, inline SVG, a few lines of inline JS.

The page loads nothing (no CDN, no fonts, no images by URL), so it opens offline from an e-mail attachment or a
ticket. Every string from a report is untrusted and escaped. The runs table sorts when a header is clicked; on
load it is sorted failures first, newest first, because that is what on-call looks for.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence
from html import escape
from typing import Any

from ..errors import CommitterError
from ..success_data import DIAGNOSTIC_EXCEPTION, DIAGNOSTIC_STACKTRACE
from .aggregate import Percentiles, ReportData, RunSummary, summarize
from .charts import (
    BarRow,
    Series,
    count_formatter,
    format_bytes,
    format_ms,
    grouped_bars,
    ranges,
    waterfall,
)
from .loading import load_documents

log = logging.getLogger(__name__)

FAILED_ROW_COLOUR = "#f9d4d2"
"""Background of a failed run's row in the runs table: the colour a person's eye (and the test) looks for."""
ABORTED_ROW_COLOUR = "#fff1c9"
OUTCOME_ORDER = {"failed": 0, "aborted": 1, "succeeded": 2}

STYLE = f"""
body {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #1d1d1d;
       background: #ffffff; font-size: 14px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }}
h2 {{ font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }}
h3 {{ font-size: 15px; margin: 18px 0 6px; }}
table {{ border-collapse: collapse; margin: 8px 0; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid #e5e5e5; text-align: left; vertical-align: top; }}
td.number, th.number {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
#runs td.date {{ white-space: nowrap; }}
#runs th {{ cursor: pointer; user-select: none; background: #f2f4f7; }}
#runs th[aria-sort=ascending]::after {{ content: " ▲"; }}
#runs th[aria-sort=descending]::after {{ content: " ▼"; }}
#runs tr.failed td {{ background: {FAILED_ROW_COLOUR}; }}
#runs tr.failed td:first-child {{ box-shadow: inset 4px 0 0 #c62828; }}
#runs tr.aborted td {{ background: {ABORTED_ROW_COLOUR}; }}
.outcome-failed {{ color: #b71c1c; font-weight: 600; }}
.outcome-aborted {{ color: #8a6d00; font-weight: 600; }}
.muted {{ color: #666; }}
svg.chart {{ display: block; margin: 6px 0 12px; font-size: 11px; }}
svg.chart text {{ fill: #333; }}
svg.chart text.caption {{ fill: #555; font-style: italic; }}
.run {{ border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; margin: 12px 0; }}
.run.failed {{ border-color: #c62828; }}
pre {{ background: #f6f6f6; padding: 8px; overflow-x: auto; max-height: 360px; font-size: 12px; }}
.exception {{ color: #b71c1c; font-weight: 600; white-space: pre-wrap; }}
code {{ font-size: 12px; }}
"""

SCRIPT = """
(function () {
  var table = document.getElementById("runs");
  if (!table) { return; }
  var body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function key(row, index) { return row.cells[index].getAttribute("data-value"); }
  function compare(a, b, index) {
    var x = key(a, index), y = key(b, index);
    if (x === y) { return 0; }
    if (x === "") { return 1; }
    if (y === "") { return -1; }
    if (heads[index].getAttribute("data-type") === "number") { return parseFloat(x) - parseFloat(y); }
    return x < y ? -1 : 1;
  }
  function sortBy(index, descending) {
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var c = compare(a, b, index);
      if (c === 0 || key(a, index) === "" || key(b, index) === "") { return c; }
      return descending ? -c : c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
    heads[index].setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  heads.forEach(function (head, index) {
    head.addEventListener("click", function () {
      sortBy(index, head.getAttribute("aria-sort") === "ascending");
    });
  });
  var date = heads.findIndex(function (h) { return h.getAttribute("data-key") === "date"; });
  var outcome = heads.findIndex(function (h) { return h.getAttribute("data-key") === "outcome"; });
  sortBy(date, true);
  sortBy(outcome, false);
})();
"""

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("job", "Job", "text"),
    ("protocol", "Protocol", "text"),
    ("store", "Store", "text"),
    ("outcome", "Outcome", "number"),
    ("stage", "Failing stage", "text"),
    ("files", "Files", "number"),
    ("bytes", "Bytes", "number"),
    ("duration", "Duration", "number"),
    ("date", "Date (UTC)", "number"),
)
"""Key, heading and sort type of each column of the runs table."""


def _short_protocol(committer: str) -> str:
    return committer.rsplit(".", 1)[-1] or "unknown"


def _cell(
    text: str,
    value: str | int | float | None,
    *,
    number: bool = False,
    title: str | None = None,
    css: str | None = None,
) -> str:
    data = "" if value is None else str(value)
    attributes = f' data-value="{escape(data)}"'
    if title:
        attributes += f' title="{escape(title)}"'
    classes = " ".join(name for name in ("number" if number else None, css) if name)
    return f'<td class="{classes}"{attributes}>{text}</td>' if classes else f"<td{attributes}>{text}</td>"


def _when(run: RunSummary) -> str:
    """The run's time in UTC from its timestamp (ms); the document's own date text goes in the tooltip."""
    if run.timestamp <= 0:
        return run.date
    try:
        moment = datetime.datetime.fromtimestamp(run.timestamp / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return run.date
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _run_row(run: RunSummary) -> str:
    store_note = "" if run.store_from_filenames else "no file names in the report: scheme of the report's own location"
    cells = [
        _cell(f'<a href="#run-{run.index}">{escape(run.job_id or "(no job id)")}</a>', run.job_id),
        _cell(escape(_short_protocol(run.protocol)), run.protocol, title=run.protocol),
        _cell(escape(run.store + ("" if run.store_from_filenames else " *")), run.store, title=store_note or None),
        _cell(f'<span class="outcome-{run.outcome}">{run.outcome}</span>', OUTCOME_ORDER[run.outcome]),
        _cell(escape(run.failing_stage or ""), run.failing_stage or ""),
        _cell("—" if run.files is None else f"{run.files:,} files", run.files, number=True),
        _cell(
            "—" if run.bytes is None else escape(format_bytes(run.bytes)),
            run.bytes,
            number=True,
            title=None if run.bytes is None else f"{run.bytes:,} bytes",
        ),
        _cell("—" if run.duration_ms is None else escape(format_ms(run.duration_ms)), run.duration_ms, number=True),
        _cell(escape(_when(run)), run.timestamp, title=f"{run.date} on host {run.hostname}", css="date"),
    ]
    return f'<tr class="{run.outcome}" id="row-{run.index}">' + "".join(cells) + "</tr>"


def _runs_table(runs: Sequence[RunSummary]) -> str:
    heads = "".join(
        f'<th data-key="{key}" data-type="{kind}"{" class=number" if key in ("files", "bytes", "duration") else ""}>'
        f"{escape(title)}</th>"
        for key, title, kind in COLUMNS
    )
    rows = "".join(_run_row(run) for run in runs)
    return f'<table id="runs"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>'


def _percentile_section(title: str, rows: Sequence[Percentiles], note: str, chart_id: str) -> str:
    if not rows:
        return f"<h2>{escape(title)}</h2><p class=muted>No run recorded any.</p>"
    chart = grouped_bars(
        title,
        [BarRow(row.name, (row.p50, row.p95)) for row in rows],
        [Series("p50", "#8fb8e6"), Series("p95", "#1f5fa8")],
        format_ms,
        "milliseconds (ms)",
    )
    body = "".join(
        f"<tr><td><code>{escape(row.name)}</code></td><td class=number>{row.runs:,}</td>"
        f"<td class=number>{row.calls:,}</td><td class=number>{row.failures:,}</td>"
        f"<td class=number>{escape(format_ms(row.p50))}</td><td class=number>{escape(format_ms(row.p95))}</td>"
        f"<td class=number>{escape(format_ms(row.maximum))}</td></tr>"
        for row in rows
    )
    table = (
        "<table><thead><tr><th>Statistic</th><th class=number>Runs</th><th class=number>Calls</th>"
        "<th class=number>Failed calls</th><th class=number>p50</th><th class=number>p95</th>"
        f"<th class=number>Max</th></tr></thead><tbody>{body}</tbody></table>"
    )
    return f'<h2>{escape(title)}</h2><p class=muted>{escape(note)}</p><div id="{chart_id}">{chart}</div>{table}'


def _retries_section(runs: Sequence[RunSummary]) -> str:
    title = "Retries, throttling and recovered renames"
    rows = [run for run in runs if run.retries or run.rate_limited or run.renames_recovered]
    note = (
        "Per run: store calls retried after a transient error (store_io_retry), waits for the io.rate limit or "
        "for store throttling (store_io_rate_limited), and renames found done after an error "
        "(commit_file_rename_recovered). Ours records every call that took an io.rate token, so the time waited "
        "is the figure to read. Runs with none of them are left out."
    )
    if not rows:
        return f"<h2>{title}</h2><p class=muted>{escape(note)}</p><p>No run retried, waited or recovered a rename.</p>"
    chart = grouped_bars(
        "retries and recovered renames per run",
        [BarRow(_run_label(run), (run.retries, run.renames_recovered)) for run in rows],
        [Series("retried store calls", "#d08a1f"), Series("renames recovered", "#2e8b57")],
        count_formatter(""),
        "count (store calls retried; files whose rename was recovered)",
        whole=True,
    )
    waits = [run for run in rows if run.rate_limited_ms is not None]
    if waits:
        chart += grouped_bars(
            "time waiting for the rate limit per run",
            [BarRow(_run_label(run), (run.rate_limited_ms,)) for run in waits],
            [Series("time waiting (io.rate or throttling)", "#7b4fb0")],
            format_ms,
            "milliseconds (ms) waited in total",
        )
    body = "".join(
        f"<tr><td>{escape(_run_label(run))}</td><td class=number>{run.retries:,}</td>"
        f"<td class=number>{run.rate_limited:,}</td>"
        f"<td class=number>{'—' if run.rate_limited_ms is None else escape(format_ms(run.rate_limited_ms))}</td>"
        f"<td class=number>{run.renames_recovered:,}</td></tr>"
        for run in rows
    )
    table = (
        "<table><thead><tr><th>Run</th><th class=number>Retries (calls)</th>"
        "<th class=number>Calls that took a rate-limit token</th><th class=number>Time waiting</th>"
        "<th class=number>Renames recovered (files)</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    return f'<h2>{title}</h2><p class=muted>{escape(note)}</p><div id="chart-retries">{chart}</div>{table}'


def _skew_section(runs: Sequence[RunSummary]) -> str:
    title = "Task skew: files and bytes per task manifest"
    files = [(_run_label(run), run.files_per_manifest) for run in runs if run.files_per_manifest]
    sizes = [(_run_label(run), run.bytes_per_manifest) for run in runs if run.bytes_per_manifest]
    note = (
        "Per run, the least and most files (and bytes) one task's manifest committed, with a dot at the mean "
        "(committer_task_file_count, committer_task_file_size). A long line means a few tasks did most of the work."
    )
    if not files and not sizes:
        return f"<h2>{escape(title)}</h2><p class=muted>{escape(note)}</p><p>No run recorded per-task samples.</p>"
    parts = [f"<h2>{escape(title)}</h2><p class=muted>{escape(note)}</p>", '<div id="chart-skew">']
    if files:
        parts.append(
            ranges(
                "files per task manifest",
                [(n, r) for n, r in files if r],
                count_formatter("files"),
                "files per manifest (count)",
                "#3f7fbf",
                whole=True,
            )
        )
    if sizes:
        parts.append(
            ranges(
                "bytes per task manifest",
                [(n, r) for n, r in sizes if r],
                format_bytes,
                "bytes per manifest (B, decimal units)",
                "#2e8b57",
            )
        )
    parts.append("</div>")
    return "".join(parts)


def _run_label(run: RunSummary) -> str:
    return f"#{run.index + 1} {run.job_id}"


def _run_detail(run: RunSummary) -> str:
    heading = f"Run #{run.index + 1}: {run.job_id or '(no job id)'} — {run.outcome}"
    places = "".join(f"<br>also at <code>{escape(url)}</code>" for url in run.also_at)
    parts = [
        f'<section class="run {run.outcome}" id="run-{run.index}"><h3>{escape(heading)}</h3>',
        f"<p class=muted>from <code>{escape(run.source)}</code>{places}<br>{escape(run.protocol)} on "
        f"{escape(run.hostname)}, {escape(run.date)}</p>",
    ]
    if run.exception or run.stacktrace:
        parts.append(f'<p class="exception">{escape(run.exception or "(no exception message)")}</p>')
        if run.stacktrace:
            parts.append(f"<pre>{escape(run.stacktrace)}</pre>")
    if run.stages or run.commit_job_ms is not None:
        parts.append(waterfall(run.stages, run.commit_job_ms, f"stage waterfall of {run.job_id}"))
    else:
        parts.append("<p class=muted>No stage times in this report.</p>")
    others = {k: v for k, v in run.diagnostics.items() if k not in (DIAGNOSTIC_EXCEPTION, DIAGNOSTIC_STACKTRACE)}
    if others:
        items = "".join(f"<tr><td><code>{escape(k)}</code></td><td>{escape(v)}</td></tr>" for k, v in others.items())
        parts.append(f"<details><summary>Diagnostics</summary><table>{items}</table></details>")
    parts.append("</section>")
    return "".join(parts)


def _skipped_section(data: ReportData) -> str:
    if not data.skipped:
        return ""
    items = "".join(f"<li><code>{escape(item.url)}</code>: {escape(item.reason)}</li>" for item in data.skipped)
    return f'<h2 id="skipped">Skipped inputs ({len(data.skipped)})</h2><ul>{items}</ul>'


def render_page(data: ReportData, generated: datetime.datetime | None = None) -> str:
    """The whole page as a string."""
    when = (generated or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds")
    failed = sum(run.outcome == "failed" for run in data.runs)
    summary = (
        f"{len(data.runs):,} runs from {data.files_found:,} files, {failed:,} failed, "
        f"{len(data.skipped):,} inputs skipped; generated {when}"
    )
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Manifest committer runs</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Manifest committer runs</h1>",
        f"<p class=muted>{escape(summary)}</p>",
        "<h2>Runs</h2>",
        "<p class=muted>Click a heading to sort. Store: the scheme of the committed files' URLs "
        "(* where the report named none). Duration: the job commit as timed by the committer, else the sum of "
        "the stage times kept.</p>",
        _runs_table(data.runs),
        _percentile_section(
            "Job stages across runs",
            data.stage_percentiles,
            "p50 and p95 over the runs of each stage's total time in one run (ms).",
            "chart-stages",
        ),
        _percentile_section(
            "Store operations across runs",
            data.operation_percentiles,
            "p50 and p95 over the runs of the mean time of one call in a run (ms); Max is the longest single call "
            "seen. Calls and failed calls are summed over all runs.",
            "chart-operations",
        ),
        _retries_section(data.runs),
        _skew_section(data.runs),
        "<h2>Each run: stage waterfall, failure and stack trace</h2>",
        *(_run_detail(run) for run in data.runs),
        _skipped_section(data),
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(sections) + "\n"


def write_report(paths: Sequence[str], output: str, storage_options: dict[str, Any] | None = None) -> ReportData:
    """Load every report under ``paths``, write the page to ``output`` (a local path), return what it shows.

    No file found at all is a ``CommitterError`` naming the paths, and nothing is written.
    """
    loaded = load_documents(paths, storage_options)
    if not loaded.files_found:
        reasons = "; ".join(f"{item.url}: {item.reason}" for item in loaded.skipped)
        raise CommitterError(
            f"no _SUCCESS or summary-*.json found under {', '.join(paths)}" + (f" ({reasons})" if reasons else "")
        )
    data = summarize(loaded)
    page = render_page(data)
    try:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(page)
    except OSError as error:
        raise CommitterError(f"{output}: cannot write the report: {error}") from error
    log.info("Wrote %s: %d runs, %d inputs skipped", output, len(data.runs), len(data.skipped))
    return data
