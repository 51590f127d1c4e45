"""The job commit's store when worker processes make its batches of calls: ``rename_files`` and
``complete_uploads`` go to a worker, everything else to the committer's own store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..operations import NO_HINTS, RenameHint, StoreOperations
from ..wrapping import WrappingStore
from .pool import WorkerPool
from .portable_errors import AUTH_ERROR, TRANSIENT, judged_in_worker
from .serve import COMPLETE_UPLOADS, RENAME_FILES

if TYPE_CHECKING:
    from ..pending_upload import PendingUpload


class WorkerDispatchStore(WrappingStore):
    """``inner`` (the committer's store), its batches made by ``pool``'s workers.

    Each batch is handed over whole, so to the stages it is a store that takes batches (``concurrent_calls``)
    whose calls take milliseconds, whatever the store is. Only the first, unretried attempt of each call is made
    in a worker: an error comes back judged by the worker's store (``portable_errors``) for the stage to settle
    here, through the committer's own store, retry policy, statistics and journal.
    """

    passes_batches = True

    def __init__(self, inner: StoreOperations, pool: WorkerPool) -> None:
        super().__init__(inner)
        self.pool = pool
        self.capabilities = replace(self.capabilities, concurrent_calls=True, microsecond_calls=False)

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        if not pairs:
            return []
        return self.pool.call(RENAME_FILES, list(pairs), list(hints), calls=len(pairs))

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        """Reads stay in this process (what is read is parsed here): the committer's store, a batch at once."""
        return self.inner.read_files(paths)

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        """Deletes stay in this process, as every call but the renames and completions: a batch at once."""
        return self.inner.delete_dirs(paths)

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]:
        if not uploads:
            return []
        return self.pool.call(COMPLETE_UPLOADS, list(uploads), calls=len(uploads))

    def is_transient(self, error: BaseException) -> bool:
        judged = judged_in_worker(error, TRANSIENT)
        return self.inner.is_transient(error) if judged is None else judged

    def is_auth_error(self, error: BaseException) -> bool:
        judged = judged_in_worker(error, AUTH_ERROR)
        return self.inner.is_auth_error(error) if judged is None else judged
