"""Types that more than one stage of a job commit or abort hands to another."""

from __future__ import annotations

from dataclasses import dataclass

from ...manifest import EntryStatus


@dataclass(frozen=True, slots=True)
class TargetDirectory:
    """A destination directory the job's files go into."""

    path: str
    level: int
    status: EntryStatus
    receives_files: bool = False
    """A file of the job goes directly into it. Only worked out on stores without real directories, where such a
    directory comes into being with its first file and needs no marker of its own."""
