"""Operating a destination from the command line: ``status`` (read only), ``commit`` and ``abort``.

One module per command: ``status`` gathers what is in flight under ``_temporary`` into dataclasses (printed
for a person, or as JSON); ``commands`` runs the committer's own ``commit_job``/``abort_job``/``plan_abort``
and says what changed; ``progress`` draws the terminal progress bar of a job commit.
"""

from __future__ import annotations

from .status import DestinationStatus, inspect_destination

__all__ = ["DestinationStatus", "inspect_destination"]
