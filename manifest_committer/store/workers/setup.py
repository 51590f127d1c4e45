"""What a worker process needs to open the destination's store as the committer opened it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fsspec

from ..bindings import StoreBinding, scheme_of
from ..operations import StoreOperations, use_client_calls_only


def effective_storage_options(url: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    """``storage_options`` with the defaults this process's fsspec configuration adds for ``url``'s filesystem
    (``fsspec.config.conf``, which a program may have set at run time), as fsspec applies them: a worker process
    then opens the store the committer opened, as an fsspec filesystem unpickled in another process is."""
    try:
        filesystem = fsspec.get_filesystem_class(scheme_of(url))
    except (ImportError, ValueError):
        return dict(storage_options)
    options: dict[str, Any] = fsspec.config.apply_config(filesystem, dict(storage_options))
    return options


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """Sent to each worker first; everything in it must pickle (a store travels as its URL and options, as in
    fsspec)."""

    url: str
    storage_options: dict[str, Any]
    binding: StoreBinding
    """The binding that opened the committer's store (a binding registered at run time exists in the committer's
    process only, so it travels rather than being looked up again)."""
    store_wrapper: Callable[[StoreOperations], StoreOperations] | None
    """The committer's ``store_wrapper`` (the tests' fault injection), applied to the worker's store too."""
    threads: int
    """Requests the worker works on at once."""
    direct_requests: bool = True
    """The committer's ``store.direct.requests``."""

    def open_store(self) -> StoreOperations:
        store = self.binding.open(self.url, self.storage_options).store
        if not self.direct_requests:
            use_client_calls_only(store)
        return store if self.store_wrapper is None else self.store_wrapper(store)
