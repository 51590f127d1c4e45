"""Worker processes for a job commit's batches of store calls (``io.processes``).

Where one process's CPU bounds a job commit (a cloud SDK's request building and signing under the GIL), its
per-file calls (the renames of the manifest protocol, the completions of the upload protocol) can be spread over
worker processes. Each worker opens the destination's store from its URL and storage options, as fsspec rebuilds
a filesystem in another process (``setup``), and makes the batches it is handed (``serve``); the job commit keeps
everything else: the journal, the evidence and retries that settle a failed call, the statistics
(``dispatch``). ``pool`` starts, feeds and stops the workers; ``channel`` and ``portable_errors`` carry the
requests and answers between them.
"""

from __future__ import annotations

from .dispatch import WorkerDispatchStore
from .pool import WorkerPool
from .portable_errors import WorkerStoreError
from .setup import WorkerSetup

__all__ = ["WorkerDispatchStore", "WorkerPool", "WorkerSetup", "WorkerStoreError"]
