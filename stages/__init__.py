"""The stages of the manifest committer protocol, one module and one class each.

This folder installs as ``manifest_committer.stages``; it is never a top-level package of its own.
"""

from __future__ import annotations

if __name__ != "manifest_committer.stages":
    raise ImportError(f"import manifest_committer.stages, not {__name__!r}: stages is part of manifest_committer")
