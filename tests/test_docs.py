"""The pages in docs/ work as pasted: every Python block runs, the command-line page runs as a session, every
link between Markdown files resolves (file and heading), and no Markdown file points outside the repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = sorted(
    path
    for path in REPO.rglob("*.md")
    if not {"node_modules", ".git", ".venv"} & set(path.relative_to(REPO).parts)
    and not path.relative_to(REPO).parts[0].startswith(".")
)
SESSION_PAGE = DOCS / "operations.md"
"""Its blocks, Python and shell, run in order in one directory: each command's example acts on what the
previous blocks left, as an on-call person would type them."""

FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", flags=re.DOTALL | re.MULTILINE)
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.MULTILINE)
OUTSIDE = re.compile(r"CONTRACT|STYLE\.md|\bSTYLE\b|reference/|\.\./shared|/work/|/shared/")
"""What a pointer to the project's private papers looks like: users have only the repository."""


@dataclass(frozen=True)
class Block:
    page: Path
    language: str
    code: str
    line: int

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, match.group(1).lower(), match.group(2), text.count("\n", 0, match.start()) + 1)
        for match in FENCE.finditer(text)
    ]


PYTHON_BLOCKS = [block for page in PAGES for block in blocks(page) if block.language == "python"]


def marks(block: Block) -> list[pytest.MarkDecorator]:
    """Blocks that start Spark or Ray are slow (and Spark needs Java): they carry the suite's markers."""
    found = []
    if "pyspark" in block.code:
        found += [pytest.mark.spark, pytest.mark.slow]
    if "import ray" in block.code or "manifest_committer.ray" in block.code:
        found.append(pytest.mark.slow)
    return found


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A temporary directory for a block's ``tempfile`` calls, with a short path: Ray puts its sockets there,
    and a socket's path may not exceed 107 bytes (pytest's ``tmp_path`` can)."""
    path = Path(tempfile.mkdtemp(prefix="docs-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def environment(scratch: Path) -> dict[str, str]:
    """This checkout first on the path, the interpreter's own scripts (``manifest-committer``) on ``PATH``."""
    scripts = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(REPO),
        "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def run(block: Block, directory: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", block.code] if block.language == "python" else ["bash", "-e", "-c", block.code]
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=240, check=False)


def test_the_pages_have_python_to_run() -> None:
    assert PYTHON_BLOCKS, "no ```python block found in docs/"
    assert {block.page.name for block in PYTHON_BLOCKS} >= {"protocols.md", "writers.md", "operations.md"}


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.name, marks=marks(b)) for b in PYTHON_BLOCKS if b.page != SESSION_PAGE]
)
def test_each_python_block_runs_as_pasted(block: Block, tmp_path: Path, scratch: Path) -> None:
    """In a fresh interpreter, in an empty directory, with nothing defined beforehand."""
    result = run(block, tmp_path, environment(scratch))
    assert result.returncode == 0, f"{block.name}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, f"{block.name}\n{result.stderr[-3000:]}"


def test_the_command_line_page_runs_as_a_session(tmp_path: Path, scratch: Path) -> None:
    """The set-up block, then every command of the page in its order, in one directory; each exits 0."""
    env = environment(scratch)
    session = [block for block in blocks(SESSION_PAGE) if block.language in ("python", "bash")]
    assert session[0].language == "python", "the page starts by making destinations to try the commands on"
    commands = " ".join(block.code for block in session[1:])
    for command in ("status", "commit", "abort", "rollback", "vacuum", "report", "success", "manifest"):
        assert f"manifest-committer {command} " in commands, f"no example of {command} in {SESSION_PAGE.name}"
    for block in session:
        result = run(block, tmp_path, env)
        assert result.returncode == 0, f"{block.name}\n{block.code}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, f"{block.name}\n{result.stderr[-3000:]}"


def prose(text: str) -> str:
    """The page without its fenced blocks and code spans: links and headings live outside them."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor, with GitHub's ``-1``, ``-2`` suffixes for repeated ones."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(text):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


def test_headings_give_the_anchors_github_gives() -> None:
    assert slug("`rollback`") == "rollback"
    assert slug("The morning after: which command when") == "the-morning-after-which-command-when"
    assert slug("`_committed_<tid>` and `_started_<tid>`") == "_committed_tid-and-_started_tid"
    assert slug('PySpark: `write()` and `format("manifest")`') == "pyspark-write-and-formatmanifest"


def broken(page: Path, target: str) -> str | None:
    """Why the link ``target`` of ``page`` does not resolve, or ``None`` if it does (or is a web address)."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
        return None
    path_part, _, anchor = target.partition("#")
    linked = (page.parent / path_part).resolve() if path_part else page
    if not linked.is_relative_to(REPO):
        return "it leaves the repository"
    if not linked.exists():
        return "no such file"
    if anchor and anchor not in anchors(linked):
        return f"no such heading in {linked.relative_to(REPO)}"
    return None


@pytest.mark.parametrize("page", MARKDOWN, ids=[str(p.relative_to(REPO)) for p in MARKDOWN])
def test_every_relative_link_resolves(page: Path) -> None:
    """A link to a file names one in the repository; a link to a heading names one that exists."""
    problems = [f"{target}: {why}" for target in links(page) if (why := broken(page, target)) is not None]
    assert not problems, f"{page.relative_to(REPO)}: broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", MARKDOWN, ids=[str(p.relative_to(REPO)) for p in MARKDOWN])
def test_no_pointer_outside_the_repository(page: Path) -> None:
    """Users have the repository only: no contract, house style or reference papers, no absolute path of ours."""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        found = OUTSIDE.search(line)
        assert found is None, f"{page.relative_to(REPO)}:{number}: points outside the repository: {line.strip()}"


SOURCES = sorted(
    path
    for folder in ("manifest_committer", "stages", "tests", "benchmarks", "examples", "scripts")
    for path in (REPO / folder).rglob("*")
    if path.suffix in (".py", ".sh") and not path.is_symlink()
)
POINTER_IN_CODE = re.compile(
    r"CONTRACT ?(§|section)|contract §|STYLE (rule )?[0-9]|reference/[a-z-]+\.(txt|md)|\.\./shared"
)
"""In code a pointer looks like ``CONTRACT §6``, ``STYLE 2b`` or a reference paper's file name (a constant named
``STYLE`` holding CSS is no pointer)."""


def test_no_source_file_points_outside_the_repository() -> None:
    """Docstrings and comments point to docs/, which a clone has, not to papers it has not."""
    assert REPO / "manifest_committer" / "cli.py" in SOURCES
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in SOURCES
        if path != Path(__file__)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if POINTER_IN_CODE.search(line)
    ]
    assert not found, "points outside the repository:\n" + "\n".join(found)


def test_every_page_is_reachable_from_the_readme() -> None:
    """A page no link reaches is a page nobody reads."""
    reached = {(REPO / target.partition("#")[0]).resolve() for target in links(REPO / "README.md")}
    for page in PAGES:
        reached |= {(page.parent / t.partition("#")[0]).resolve() for t in links(page) if ":" not in t}
    missing = [page.name for page in PAGES if page.resolve() not in reached]
    assert not missing, f"pages no link reaches: {missing}"
