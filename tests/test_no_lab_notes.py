"""The code carries no lab notes: no docstring or comment of the package states a measured figure (a time with its
unit, a ratio, "took", "measured") or research history (a pull-request number). Figures live in BENCHMARKS.md,
research in docs/; a docstring says why in words."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for root in (REPO / "manifest_committer", REPO / "stages")
    for path in root.rglob("*.py")
    if path.relative_to(REPO).parts[:2] != ("manifest_committer", "stages")
)
"""``manifest_committer/stages`` is a symlink to ``stages/``: read once."""

LAB_NOTE = re.compile(
    r"(?<![\w.])\d(?:[\d.,]*\d)? ?(?:ns|us|µs|ms|s|seconds?|min|minutes?)\b"
    r"|\btook (?:about |~)?\d|\bmeasured\b|\bPR ?#?\d{3,}|\bHUDI-\d+"
    r"|\d(?:\.\d+)?x\b|\d(?:\.\d+)? ?\N{MULTIPLICATION SIGN}|\d(?:\.\d+)? times (?:as|the|its)\b|\d ?%",
    flags=re.IGNORECASE,
)
"""A time with its unit, "took", "measured", a PR number, a ratio or a percentage."""

ALLOWED = {
    ("manifest_committer/formatting.py", "``13 ms``, ``1.5 ms``, ``2.35 s``, ``3 min 4.0 s``"),
    ("manifest_committer/report/charts.py", "``850 ms``, ``1.25 s``, ``3.2 min``"),
    ("manifest_committer/store/azure.py", "(doubling up to 2 s)"),
    ("manifest_committer/store/azure.py", "three times, 15, 18 and 24 s apart"),
    ("manifest_committer/store/gcs.py", "up to six times (about 33 s of sleeps)"),
}
"""Settings and output formats, not measurements (file, the text that holds the figure): our own settings and
the clients' default retry schedules."""


def notes(path: Path) -> Iterator[tuple[int, str]]:
    """Each comment and each docstring-like string statement, with its first line."""
    text = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def lab_notes(path: Path) -> list[str]:
    name = path.relative_to(REPO).as_posix()
    allowed = [fragment for file, fragment in ALLOWED if file == name]
    found = []
    for line, raw in notes(path):
        note = raw
        for fragment in allowed:
            note = note.replace(fragment, "")
        for match in LAB_NOTE.finditer(note):
            start = max(0, match.start() - 40)
            found.append(f"{name}:{line}: ...{note[start : match.end() + 40]!r}...")
    return found


def test_sources_are_found() -> None:
    names = {path.relative_to(REPO).as_posix() for path in SOURCES}
    assert "manifest_committer/config.py" in names and "stages/base.py" in names


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.relative_to(REPO).as_posix())
def test_no_figures_or_research_in_docstrings_and_comments(path: Path) -> None:
    found = lab_notes(path)
    assert not found, "figures belong in BENCHMARKS.md, research in docs/:\n" + "\n".join(found)


def test_the_pattern_catches_lab_notes() -> None:
    for note in (
        "100 to 130 us a call",
        "took 4.3 s in one call",
        "Hudi answered success after a failed flush, PR #19368",
        "(measured under Spark)",
        "0.46x the CPU",
        "25-90 % slower",
        "3.6 times its own",
    ):
        assert LAB_NOTE.search(note), note
    for note in ("one request per data file", "``heartbeat.expiry.seconds``", "a 32-thread pool", "io.threads"):
        assert not LAB_NOTE.search(note), note


def test_benchmarks_page_is_at_most_300_lines() -> None:
    lines = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"BENCHMARKS.md has {len(lines)} lines"
