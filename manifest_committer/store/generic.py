"""A store binding for a plain fsspec filesystem in a few lines: ``fsspec_store_binding``.

The store it opens is ``FsspecStore``'s generic one (``DeclaredFsspecStore``) with the capabilities the binding
declares. Its ``rename_file`` checks then moves under the store object's lock, which is exact only when no other
process writes the store (an in-memory filesystem, a test's) and one committer at a time renames to a given
destination; a store others write needs a subclass whose ``rename_file`` uses
the store's own no-overwrite rename or conditional copy before it may declare ``rename_never_overwrites``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..urls import decode_path, split_url
from .bindings import OpenedStore, StoreBinding
from .operations import FsspecStore, StoreCapabilities


class DeclaredFsspecStore(FsspecStore):
    """``FsspecStore`` over one filesystem, with the capabilities its binding declares.

    URLs map to paths by the filesystem's own rules (``_strip_protocol``), so a filesystem whose paths start with
    ``/`` (as the in-memory one's) and one whose paths start with a bucket both round-trip through ``to_url``.
    """

    def __init__(self, fs: Any, scheme: str, capabilities: StoreCapabilities, schemes: Sequence[str] = ()) -> None:
        super().__init__(fs, scheme)
        self.capabilities = capabilities
        self.schemes = tuple(schemes) or (scheme,)

    def from_url(self, url: str) -> str:
        scheme, authority, path = split_url(url)
        if scheme not in self.schemes:
            raise ValueError(f"{url} is not a URL of the {self.scheme}:// store")
        return str(self.fs._strip_protocol(decode_path(f"{authority}{path}")))


def fsspec_store_binding(
    filesystem: type[Any],
    capabilities: StoreCapabilities,
    *,
    name: str | None = None,
    schemes: Sequence[str] | None = None,
    store: type[DeclaredFsspecStore] = DeclaredFsspecStore,
    backend_module: str | None = None,
    backend_requirement: str | None = None,
) -> StoreBinding:
    """A binding that opens ``filesystem`` (an fsspec filesystem class) with the storage options as its arguments.

    ``capabilities`` is what the store guarantees (see ``StoreCapabilities``; the rename-based protocols need
    ``rename_never_overwrites`` and ``rename_outcome_known``). ``schemes`` default to the filesystem's
    ``protocol``, ``name`` to the first scheme. ``store`` is the store class: a subclass of
    ``DeclaredFsspecStore`` that overrides ``rename_file`` (and whatever else the store does better) for stores
    that other processes write. The filesystem need not be registered with fsspec.
    """
    protocols = filesystem.protocol
    served = tuple(schemes) if schemes is not None else ((protocols,) if isinstance(protocols, str) else protocols)

    def open_store(url: str, storage_options: dict[str, Any]) -> OpenedStore[DeclaredFsspecStore]:
        fs = filesystem(**storage_options)
        scheme, authority, path = split_url(url)
        root = str(fs._strip_protocol(f"{authority}{path}")).rstrip("/") or "/"
        return OpenedStore(store(fs, scheme or served[0], capabilities, served), root)

    return StoreBinding(
        name=name or (served[0] if served else str(filesystem.__name__)),
        schemes=tuple(served),
        opener=open_store,
        capabilities=capabilities,
        backend_module=backend_module,
        backend_requirement=backend_requirement,
    )
