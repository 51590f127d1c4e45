"""Find every ``_SUCCESS`` and ``summary-*.json`` under the given paths and parse them, never failing on one.

The documents are untrusted input: a corrupt, empty or unreadable one becomes a ``Skipped`` entry with its
reason, so one bad file never hides the others. The same run found twice (its ``_SUCCESS`` in the destination
and its ``summary-<jobId>.json`` in the report directory) counts once, with both places named.
"""

from __future__ import annotations

import fnmatch
import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fsspec.core import url_to_fs

from ..errors import CommitterError
from ..success_data import SUCCESS_MARKER, SuccessData

log = logging.getLogger(__name__)

SUMMARY_PATTERN = "summary-*.json"


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input that could not be used, and why."""

    url: str
    reason: str


@dataclass(frozen=True, slots=True)
class Run:
    """One job's report: where it was read (first place, then any other place holding the same run)."""

    source: str
    also_at: tuple[str, ...]
    document: SuccessData


@dataclass(frozen=True, slots=True)
class LoadedDocuments:
    """Everything found under the paths: the runs, in the order found, and the inputs that were skipped."""

    runs: tuple[Run, ...]
    skipped: tuple[Skipped, ...]
    files_found: int


def is_report_name(name: str) -> bool:
    """True for ``_SUCCESS`` and ``summary-*.json``, the names a directory is searched for."""
    base = posixpath.basename(name.rstrip("/"))
    return base == SUCCESS_MARKER or fnmatch.fnmatchcase(base, SUMMARY_PATTERN)


def _find(path: str, options: dict[str, Any]) -> tuple[list[tuple[Any, str]], list[Skipped]]:
    """The report files a path names: itself if it is a file (any name), else those found below it."""
    try:
        fs, root = url_to_fs(path, **options)
        info = fs.info(root)
    except FileNotFoundError:
        return [], [Skipped(path, "no such file or directory")]
    except (OSError, ValueError, ImportError) as error:
        return [], [Skipped(path, f"cannot open: {type(error).__name__}: {error}")]
    if info.get("type") != "directory":
        return [(fs, root)], []
    try:
        names = sorted(fs.find(root))
    except OSError as error:
        return [], [Skipped(path, f"cannot list: {type(error).__name__}: {error}")]
    return [(fs, name) for name in names if is_report_name(name)], []


def _read(fs: Any, path: str, url: str) -> SuccessData:
    try:
        data: bytes = fs.cat_file(path)
    except OSError as error:
        raise CommitterError(f"{url}: cannot read: {type(error).__name__}: {error}") from error
    return SuccessData.from_json(data, url)


def _size(document: SuccessData) -> int:
    stats = document.iostatistics
    return len(stats.counters) + len(stats.meanstatistics)


def load_documents(paths: Sequence[str], storage_options: dict[str, Any] | None = None) -> LoadedDocuments:
    """Load every report under ``paths`` (plain paths or fsspec URLs, files or directories, searched recursively).

    ``storage_options`` apply to every path. A file named explicitly is read whatever its name; a directory
    contributes its ``_SUCCESS`` and ``summary-*.json`` files at any depth.
    """
    options = dict(storage_options or {})
    skipped: list[Skipped] = []
    runs: list[Run] = []
    by_identity: dict[tuple[str, int, bool], int] = {}
    seen: set[str] = set()
    found = 0
    for path in paths:
        files, problems = _find(path, options)
        skipped.extend(problems)
        for fs, name in files:
            url = fs.unstrip_protocol(name)
            if url in seen:
                continue
            seen.add(url)
            found += 1
            try:
                document = _read(fs, name, url)
            except CommitterError as error:
                log.warning("Skipping %s: %s", url, error)
                skipped.append(Skipped(url, str(error).removeprefix(f"{url}: ")))
                continue
            identity = (document.job_id, document.timestamp, document.success)
            index = by_identity.get(identity)
            if index is not None:
                # Keep the fuller copy: the summary report is snapshotted after _SUCCESS was written.
                first = runs[index]
                fuller = document if _size(document) > _size(first.document) else first.document
                runs[index] = Run(first.source, (*first.also_at, url), fuller)
                continue
            by_identity[identity] = len(runs)
            runs.append(Run(url, (), document))
    return LoadedDocuments(tuple(runs), tuple(skipped), found)
