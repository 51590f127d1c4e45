"""Operating a destination from the command line: ``status`` (read only), ``commit``, ``abort``, ``rollback``
and ``vacuum``.

One module per command: ``status`` gathers what is in flight under ``_temporary`` into dataclasses (printed
for a person, or as JSON); ``commands`` runs the job's committer's own ``commit_job``/``abort_job``/``plan_abort``
(manifest or transactional, by the job's state) and says what changed; ``transactional`` runs ``mc.rollback``
and ``mc.vacuum`` and lists what they deleted; ``progress`` draws the terminal progress bar of a job commit.
"""

from __future__ import annotations

from .status import DestinationStatus, inspect_destination

__all__ = ["DestinationStatus", "inspect_destination"]
