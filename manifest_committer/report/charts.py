"""Hand-made inline SVG charts: horizontal bars, a stage waterfall, min-mean-max ranges.

Why not a plotting library: every figure of the report is a set of horizontal bars on one linear axis, which
is a few rectangles and a tick row, about a hundred lines here. A library (matplotlib: tens of MB, a font
cache on first use, SVG with embedded glyph paths and ids to de-duplicate across charts) would add a dependency
users must install for the command line, slow it, and make the page larger, for no figure we need. The SVG
written here is small, deterministic (stable in tests), uses the page's fonts and scales with the page.

Every chart has a unit on its axis; every value drawn is also in a ``<title>`` tooltip and in a table beside
the chart, so nothing is only visible as a length. All text passes through ``html.escape``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from .aggregate import SampleRange, StageTime

log = logging.getLogger(__name__)

WIDTH = 760
LABEL_WIDTH = 250
RIGHT_MARGIN = 150
ROW_HEIGHT = 22
BAR_HEIGHT = 14
AXIS_HEIGHT = 34
TOP = 8

FAILED_COLOUR = "#c62828"
"""Fill of a failed stage's bar; the runs table marks failed rows in the same family of red."""
STAGE_COLOUR = "#3f7fbf"
TOTAL_COLOUR = "#9e9e9e"
UNTIMED_COLOUR = "#cfcfcf"
FAILED_BAND_COLOUR = "#fde0de"
"""Behind a failed stage's row in the waterfall, so it is seen even when the stage took no time."""
AXIS_COLOUR = "#555555"
GRID_COLOUR = "#e3e3e3"

Formatter = Callable[[float], str]


@dataclass(frozen=True, slots=True)
class Series:
    """One kind of bar in a grouped bar chart: its name in the legend and its colour."""

    name: str
    colour: str


@dataclass(frozen=True, slots=True)
class BarRow:
    """One row of a grouped bar chart: a label and one value per series (``None``: not recorded)."""

    label: str
    values: tuple[float | None, ...]


def format_ms(value: float) -> str:
    """Milliseconds for an axis or a cell: ``850 ms``, ``1.25 s``, ``3.2 min``."""
    if value < 1000:
        return f"{value:,.0f} ms" if value >= 10 or value == int(value) else f"{value:.3g} ms"
    if value < 60_000:
        return f"{value / 1000:,.2f} s"
    return f"{value / 60_000:,.1f} min"


def format_bytes(value: float) -> str:
    """Bytes in decimal units: ``512 B``, ``58.6 MB``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


def count_formatter(unit: str) -> Formatter:
    """A formatter for counts: ``12 files``."""

    def format_count(value: float) -> str:
        text = f"{value:,.0f} {unit}" if value == int(value) else f"{value:,.1f} {unit}"
        return text.rstrip()

    return format_count


def _nice_step(maximum: float, ticks: int = 5) -> float:
    raw = maximum / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _scale(maximum: float, whole: bool = False) -> tuple[float, float]:
    """The axis end and tick step for data up to ``maximum`` (an empty axis still spans one unit).

    ``whole``: the values are counts, so ticks fall on whole numbers.
    """
    if maximum <= 0:
        return 1.0, 1.0 if whole else 0.25
    step = _nice_step(maximum)
    if whole:
        step = max(1.0, math.ceil(step))
    return math.ceil(maximum / step - 1e-9) * step, step


def _x(value: float, axis_max: float) -> float:
    return LABEL_WIDTH + (WIDTH - LABEL_WIDTH - RIGHT_MARGIN) * value / axis_max


def _axis(top: float, bottom: float, axis_max: float, step: float, *, fmt: Formatter, caption: str) -> list[str]:
    parts = [
        f'<line x1="{LABEL_WIDTH}" y1="{bottom}" x2="{_x(axis_max, axis_max):.1f}" y2="{bottom}" '
        f'stroke="{AXIS_COLOUR}"/>'
    ]
    tick = 0.0
    while tick <= axis_max + step / 1000:
        x = _x(tick, axis_max)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{GRID_COLOUR}"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{escape(fmt(tick))}</text>')
        tick += step
    centre = (LABEL_WIDTH + WIDTH - RIGHT_MARGIN) / 2
    parts.append(
        f'<text x="{centre:.1f}" y="{bottom + 30}" text-anchor="middle" class="caption">{escape(caption)}</text>'
    )
    return parts


def _label(y: float, text: str) -> str:
    shown = text if len(text) <= 36 else text[:35] + "…"
    return (
        f'<text x="{LABEL_WIDTH - 8}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle">'
        f"<title>{escape(text)}</title>{escape(shown)}</text>"
    )


def _svg(height: float, label: str, parts: Sequence[str]) -> str:
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{escape(label)}" shape-rendering="crispEdges">'
        f"<title>{escape(label)}</title>" + "".join(parts) + "</svg>"
    )


def _bar(x0: float, x1: float, y: float, height: float, *, colour: str, tooltip: str) -> str:
    width = max(x1 - x0, 2.0)  # a zero is still drawn as a sliver, so "recorded, zero" differs from "missing"
    return (
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" fill="{colour}">'
        f"<title>{escape(tooltip)}</title></rect>"
    )


def _legend(series: Sequence[Series]) -> list[str]:
    parts: list[str] = []
    x = float(LABEL_WIDTH)
    for item in series:
        parts.append(f'<rect x="{x:.0f}" y="{TOP}" width="12" height="12" fill="{item.colour}"/>')
        parts.append(f'<text x="{x + 16:.0f}" y="{TOP + 10}">{escape(item.name)}</text>')
        x += 24 + 7 * len(item.name)
    return parts


def grouped_bars(
    label: str,
    rows: Sequence[BarRow],
    series: Sequence[Series],
    fmt: Formatter,
    caption: str,
    *,
    whole: bool = False,
) -> str:
    """Horizontal bars, one group per row and one bar per series, on one axis whose ticks ``fmt`` labels."""
    values = [v for row in rows for v in row.values if v is not None]
    axis_max, step = _scale(max(values, default=0.0), whole)
    bar = max(4.0, (BAR_HEIGHT * 1.6) / max(len(series), 1))
    group = bar * len(series) + 8
    top = TOP + 22
    parts = _legend(series)
    for index, row in enumerate(rows):
        y = top + index * group
        parts.append(_label(y + group / 2 - 4, row.label))
        for position, (item, value) in enumerate(zip(series, row.values, strict=True)):
            if value is None:
                continue
            tooltip = f"{row.label}: {item.name} {fmt(value)}"
            parts.append(
                _bar(LABEL_WIDTH, _x(value, axis_max), y + position * bar, bar - 1, colour=item.colour, tooltip=tooltip)
            )
    bottom = top + len(rows) * group + 2
    parts.extend(_axis(top - 4, bottom, axis_max, step, fmt=fmt, caption=caption))
    return _svg(bottom + AXIS_HEIGHT, label, parts)


def waterfall(stages: Sequence[StageTime], total_ms: int | None, label: str) -> str:
    """One run's job stages laid end to end in protocol order, each from where the one before it ended.

    The reports keep each stage's total time, not its start, so the offsets assume the stages ran one after
    the other (as the job commit runs them); the grey bar is the whole job commit as timed by the committer.
    A failed stage is red on a pale red band; one with no recorded time (Hadoop keeps some stages as counts
    only) is a tick at its place, red if it failed.
    """
    known = sum(stage.millis or 0 for stage in stages)
    axis_max, step = _scale(max(known, total_ms or 0))
    rows = len(stages) + (1 if total_ms is not None else 0)
    parts: list[str] = []
    offset = 0
    for index, stage in enumerate(stages):
        y = TOP + index * ROW_HEIGHT
        parts.append(_label(y + BAR_HEIGHT / 2, stage.name))
        colour = FAILED_COLOUR if stage.failed else STAGE_COLOUR
        start = _x(offset, axis_max)
        if stage.failed:
            parts.append(
                f'<rect x="{LABEL_WIDTH}" y="{y - 3}" width="{WIDTH - LABEL_WIDTH}" height="{ROW_HEIGHT}" '
                f'fill="{FAILED_BAND_COLOUR}"/>'
            )
        if stage.millis is None:
            state = "failed, time not recorded" if stage.failed else "time not recorded"
            marker = colour if stage.failed else UNTIMED_COLOUR
            parts.append(_bar(start, start + 4, y, BAR_HEIGHT, colour=marker, tooltip=f"{stage.name}: {state}"))
            parts.append(
                f'<text x="{start + 8:.1f}" y="{y + BAR_HEIGHT / 2:.1f}" dominant-baseline="middle">{state}</text>'
            )
            continue
        end = _x(offset + stage.millis, axis_max)
        state = " (failed)" if stage.failed else ""
        tooltip = f"{stage.name}: {format_ms(stage.millis)}{state}"
        parts.append(_bar(start, end, y, BAR_HEIGHT, colour=colour, tooltip=tooltip))
        parts.append(
            f'<text x="{max(end, start + 2) + 4:.1f}" y="{y + BAR_HEIGHT / 2:.1f}" dominant-baseline="middle">'
            f"{escape(format_ms(stage.millis))}</text>"
        )
        offset += stage.millis
    if total_ms is not None:
        y = TOP + len(stages) * ROW_HEIGHT
        parts.append(_label(y + BAR_HEIGHT / 2, "job commit (total)"))
        parts.append(
            _bar(LABEL_WIDTH, _x(total_ms, axis_max), y, BAR_HEIGHT, colour=TOTAL_COLOUR, tooltip=format_ms(total_ms))
        )
    bottom = TOP + rows * ROW_HEIGHT + 2
    parts.extend(_axis(TOP - 4, bottom, axis_max, step, fmt=format_ms, caption="time since the first stage began (ms)"))
    return _svg(bottom + AXIS_HEIGHT, label, parts)


def ranges(
    label: str,
    rows: Sequence[tuple[str, SampleRange]],
    fmt: Formatter,
    caption: str,
    colour: str,
    *,
    whole: bool = False,
) -> str:
    """One line per row from least to most, with a dot at the mean: the spread of a per-task sample."""
    axis_max, step = _scale(max((r.maximum for _, r in rows), default=0), whole)
    parts: list[str] = []
    for index, (name, sample) in enumerate(rows):
        y = TOP + index * ROW_HEIGHT
        middle = y + BAR_HEIGHT / 2
        parts.append(_label(middle, name))
        tooltip = (
            f"{name}: {sample.samples:,} manifests, least {fmt(sample.minimum)}, mean {fmt(sample.mean)}, "
            f"most {fmt(sample.maximum)}"
        )
        low, high = _x(sample.minimum, axis_max), _x(sample.maximum, axis_max)
        parts.append(_bar(low, high, middle - 3, 6, colour=colour, tooltip=tooltip))
        parts.append(
            f'<circle cx="{_x(sample.mean, axis_max):.1f}" cy="{middle:.1f}" r="5" fill="#222222">'
            f"<title>{escape(tooltip)}</title></circle>"
        )
        skew = sample.maximum / sample.mean if sample.mean else 0.0
        parts.append(
            f'<text x="{max(high, low + 2) + 8:.1f}" y="{middle:.1f}" dominant-baseline="middle">'
            f"max/mean {skew:.1f}</text>"
        )
    bottom = TOP + len(rows) * ROW_HEIGHT + 2
    parts.extend(_axis(TOP - 4, bottom, axis_max, step, fmt=fmt, caption=caption))
    return _svg(bottom + AXIS_HEIGHT, label, parts)
