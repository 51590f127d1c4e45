"""The report as a person sees it: rendered by a real headless Chromium, checked in the screenshot's pixels.

Chromium is Debian's ``chromium`` (scripts/run-tests.sh installs it when missing). One browser run takes the
screenshot and dumps the DOM after the page's script ran; a script appended to that copy of the page writes the
boxes of the table rows and charts into the DOM, so the test knows where to look in the pixels (appended after
everything else, it moves nothing that is measured). A second copy clicks a column heading, to test sorting.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest
from PIL import Image

from manifest_committer.report import ReportData, write_report
from manifest_committer.report.charts import FAILED_BAND_COLOUR, FAILED_COLOUR, LABEL_WIDTH, STAGE_COLOUR
from manifest_committer.report.page import FAILED_ROW_COLOUR, OUTCOME_ORDER

from ..fixtures.report_runs import FAILED_JOB, RETRIED_JOB, ReportRuns, make_runs

WINDOW = (1400, 7000)
BROWSER_TIMEOUT = 90

LAYOUT_SCRIPT = """<script>
(function () {
  function box(e) { var r = e.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }
  var rows = Array.prototype.map.call(document.querySelectorAll("#runs tbody tr"),
    function (r) { return {id: r.id, outcome: r.className, box: box(r)}; });
  var charts = Array.prototype.map.call(document.querySelectorAll("svg.chart"),
    function (s) { return {label: s.getAttribute("aria-label"), box: box(s)}; });
  var pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify({rows: rows, charts: charts});
  document.body.appendChild(pre);
})();
</script>"""

CLICK_SCRIPT = """<script>document.querySelector('#runs th[data-key="bytes"]').click();</script>"""


def _colour(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def _chromium() -> str:
    path = shutil.which("chromium")
    assert path, "Debian's chromium is needed: apt-get install -y chromium (scripts/run-tests.sh does it)"
    return path


def _browser(page: Path, profile: Path, *extra: str) -> subprocess.Popen[str]:
    profile.mkdir()
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *extra,
        "--dump-dom",
        page.as_uri(),
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _with_script(page: Path, script: str, name: str) -> Path:
    html = page.read_text(encoding="utf-8")
    copy = page.with_name(name)
    copy.write_text(html.replace("</body>", script + "</body>"), encoding="utf-8")
    return copy


@dataclass(frozen=True)
class Rendered:
    data: ReportData
    screenshot: Image.Image
    dom: str
    clicked_dom: str
    layout: dict[str, list[dict[str, object]]]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rendered]:
    root = tmp_path_factory.mktemp("report-browser")
    runs: ReportRuns = make_runs(root / "runs")
    page = root / "report.html"
    data = write_report([str(runs.root)], str(page))
    shot = root / "shot.png"
    # Both browsers at once: each takes seconds to start and to shut down.
    measured = _browser(_with_script(page, LAYOUT_SCRIPT, "measured.html"), root / "p1", f"--screenshot={shot}")
    clicked = _browser(_with_script(page, CLICK_SCRIPT, "clicked.html"), root / "p2")
    dom, _ = measured.communicate(timeout=BROWSER_TIMEOUT)
    clicked_dom, _ = clicked.communicate(timeout=BROWSER_TIMEOUT)
    assert measured.returncode == 0 and clicked.returncode == 0
    match = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert match, "the page's DOM after its scripts ran has no layout: did the browser run the scripts?"
    with Image.open(shot) as image:
        screenshot = image.convert("RGB")
    yield Rendered(data, screenshot, dom, clicked_dom, json.loads(unescape(match.group(1))))


def _pixels(image: Image.Image, box: list[float], left_skip: float = 0) -> Counter[tuple[int, int, int]]:
    left, top, width, height = box
    assert top + height <= image.height and left + width <= image.width, f"{box} lies outside the screenshot"
    region = image.crop((int(left + left_skip) + 1, int(top) + 1, int(left + width) - 1, int(top + height) - 1))
    colours = region.getcolors(maxcolors=region.width * region.height) or []
    counts: Counter[tuple[int, int, int]] = Counter()
    for count, colour in colours:
        assert isinstance(colour, tuple)
        counts[(colour[0], colour[1], colour[2])] += count
    return counts


def _row_order(dom: str) -> list[int]:
    return [int(index) for index in re.findall(r'<tr class="\w+" id="row-(\d+)"', dom)]


def test_table_sorted_failures_first_then_newest(rendered: Rendered) -> None:
    runs = rendered.data.runs
    expected = [run.index for run in sorted(runs, key=lambda run: (OUTCOME_ORDER[run.outcome], -run.timestamp))]
    assert _row_order(rendered.dom) == expected
    assert expected != [run.index for run in runs], "the page lists runs as found; only the script sorts them"


def test_click_on_a_heading_sorts_by_it(rendered: Rendered) -> None:
    by_index = {run.index: run for run in rendered.data.runs}
    values = [by_index[index].bytes for index in _row_order(rendered.clicked_dom)]
    known = [value for value in values if value is not None]
    assert known == sorted(known) and len(known) >= 3
    assert values == known + [None] * (len(values) - len(known)), "runs without bytes sort last"
    assert re.search(r'<th data-key="bytes"[^>]*aria-sort="ascending"', rendered.clicked_dom)


def test_failed_runs_stand_out_in_the_screenshot(rendered: Rendered) -> None:
    red = _colour(FAILED_ROW_COLOUR)
    rows = rendered.layout["rows"]
    assert len(rows) == len(rendered.data.runs)
    for row in rows:
        pixels = _pixels(rendered.screenshot, row["box"])  # type: ignore[arg-type]
        share = pixels[red] / sum(pixels.values())
        if row["outcome"] == "failed":
            assert share > 0.5, f"failed row {row['id']} is not shown in {FAILED_ROW_COLOUR}"
        else:
            assert share == 0, f"{row['outcome']} row {row['id']} looks failed"
    assert sum(row["outcome"] == "failed" for row in rows) == 2


def test_charts_are_drawn(rendered: Rendered) -> None:
    charts = rendered.layout["charts"]
    labels = [str(chart["label"]) for chart in charts]
    for expected in ("Job stages across runs", "Store operations across runs", "files per task manifest"):
        assert expected in labels
    assert sum(label.startswith("stage waterfall of") for label in labels) == len(rendered.data.runs)
    white = (255, 255, 255)
    for chart in charts:
        box: list[float] = chart["box"]  # type: ignore[assignment]
        assert box[2] > 0 and box[3] > 0, f"chart {chart['label']} takes no room"
        # Right of the labels: bars, axis, ticks. Few coloured pixels would mean an empty plot.
        pixels = _pixels(rendered.screenshot, box, left_skip=LABEL_WIDTH)
        drawn = sum(count for colour, count in pixels.items() if colour != white)
        assert drawn > 300, f"chart {chart['label']} looks empty ({drawn} pixels drawn)"


def test_failed_stage_is_red_in_the_waterfall(rendered: Rendered) -> None:
    charts = {str(chart["label"]): chart["box"] for chart in rendered.layout["charts"]}
    failed = _pixels(rendered.screenshot, charts[f"stage waterfall of {FAILED_JOB}"], LABEL_WIDTH)  # type: ignore[arg-type]
    assert failed[_colour(FAILED_BAND_COLOUR)] > 1000 and failed[_colour(FAILED_COLOUR)] > 0
    fine = _pixels(rendered.screenshot, charts[f"stage waterfall of {RETRIED_JOB}"], LABEL_WIDTH)  # type: ignore[arg-type]
    assert fine[_colour(FAILED_COLOUR)] == fine[_colour(FAILED_BAND_COLOUR)] == 0
    assert fine[_colour(STAGE_COLOUR)] > 20


def test_every_run_has_its_section(rendered: Rendered) -> None:
    for run in rendered.data.runs:
        assert f'id="run-{run.index}"' in rendered.dom
