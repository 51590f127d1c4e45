"""The names of the commit protocols: what ``create_committer`` takes, ``_SUCCESS`` records and ``status`` shows."""

from __future__ import annotations

import enum


class ProtocolName(enum.StrEnum):
    """A commit protocol (docs/protocols.md); each member equals its string, so ``"upload" == ProtocolName.UPLOAD``."""

    MANIFEST = "manifest"
    """Hadoop's manifest committer: tasks write under ``_temporary``, job commit renames every file."""
    TRANSACTIONAL = "transactional"
    """Tasks write in place under tid-bearing names; job commit writes ``_committed_<tid>``."""
    UPLOAD = "upload"
    """S3: tasks leave multipart uploads incomplete; job commit completes them, never overwriting."""
    V1 = "v1"
    """Hadoop FileOutputCommitter's algorithm 1: task commit renames the attempt, job commit merges."""
    V2 = "v2"
    """Hadoop FileOutputCommitter's algorithm 2: task commit merges into the destination."""


AUTO = "auto"
"""What ``create_committer`` takes to choose by store: ``upload`` on S3, ``manifest`` elsewhere."""
