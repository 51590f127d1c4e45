"""``manifest-committer report``: every ``_SUCCESS`` and summary report under some paths, as one HTML page.

Loading (``loading``) finds and parses the documents, aggregation (``aggregate``) turns them into figures,
rendering (``page`` with the SVG of ``charts``) writes the page. Nothing here is imported by
``manifest_committer`` itself.
"""

from __future__ import annotations

from .aggregate import ReportData, summarize
from .loading import LoadedDocuments, Run, Skipped, load_documents
from .page import render_page, write_report

__all__ = [
    "LoadedDocuments",
    "ReportData",
    "Run",
    "Skipped",
    "load_documents",
    "render_page",
    "summarize",
    "write_report",
]
