"""Store bindings: what opens a store for a URL scheme, and what that store guarantees.

A ``StoreBinding`` names the URL schemes it serves, opens a store for a URL (``opener``, which returns an
``OpenedStore``: the store and the URL's path in it) and declares the store's guarantees (``StoreCapabilities``).
The committer finds bindings in ``store/registry.py`` (the built-in ones, the entry point group
``manifest_committer.stores`` and ``register_store_binding`` at run time) and looks at schemes nowhere else: a
protocol asks a binding's capabilities, never its name.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic

import fsspec
from typing_extensions import TypeVar

from ..errors import ConfigError, UnsupportedStoreError
from .operations import StoreCapabilities, StoreOperations

StoreT_co = TypeVar("StoreT_co", bound=StoreOperations, covariant=True, default=StoreOperations)
"""The kind of store an ``OpenedStore`` holds: ``OpenedStore[S3Store]`` from the S3 opener, any store unsaid."""


@dataclass(frozen=True, slots=True)
class OpenedStore(Generic[StoreT_co]):
    """A destination's store, opened, and the destination's path as that store names it.

    What a binding's ``opener`` returns, and what ``open_store``, ``open_destination_store`` and
    ``StoreBinding.open`` give.
    """

    store: StoreT_co
    """The store operations for the URL's store, with exactly its binding's capabilities."""
    path: str
    """The URL's path in ``store`` (``/bucket/table``, ``container/table``), without a trailing ``/``."""


Opener = Callable[[str, dict[str, Any]], OpenedStore]
"""``(url, storage_options) -> OpenedStore(store, path)``: the store for a URL and the URL's path in that store."""

RENAME_GUARANTEES = (
    ("rename_never_overwrites", "a rename that never overwrites"),
    ("rename_outcome_known", "says whether it happened"),
)
"""The ``StoreCapabilities`` flags the rename-based protocols need, and how messages say them."""

WHAT_A_BINDING_PROVIDES = (
    "A store binding tells the committer how to open the store for a URL and declares what the store guarantees "
    "(StoreCapabilities): a rename that never overwrites (rename_never_overwrites) and says whether it happened "
    "(rename_outcome_known), which fsspec's generic mv does not promise; whether directories are real "
    "(real_directories); whether a rename keeps etags (etags_preserved_in_rename). Register one with "
    "manifest_committer.register_store_binding(...) at run time, or as an entry point of the group "
    "manifest_committer.stores (docs/stores.md)"
)
"""What every refusal of an unbound scheme says, so that the user can bind their store."""

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_THIS_DISTRIBUTION = "manifest-committer["
"""A requirement on one of this package's extras: the message adds how to install it from a clone."""


@dataclass(frozen=True, slots=True)
class StoreBinding:
    """How to open one kind of store, and what it guarantees.

    Built-in bindings live beside their stores (``store/local.py``'s ``LOCAL_BINDING``, ...); a user's binds
    their own fsspec filesystem (``fsspec_store_binding`` makes one in a few lines). Invalid fields are a
    ``ConfigError`` naming the binding.
    """

    name: str
    """Names the binding in messages: ``local``, ``azure``, ``my-store``."""
    schemes: tuple[str, ...]
    """The URL schemes it serves, lower case; ``file`` serves plain paths too."""
    opener: Opener | None = None
    """Opens the store for a URL: called with the URL and a copy of the storage options (its own to change);
    returns an ``OpenedStore``: a store with exactly ``capabilities`` and the URL's path in it, without a trailing
    ``/``. ``None`` for a store the committer refuses (``refusal`` says why)."""
    capabilities: StoreCapabilities | None = None
    """What the store guarantees; required with an ``opener``."""
    backend_module: str | None = None
    """The module its fsspec backend lives in (``adlfs``), checked without importing it before the store is
    opened, so that a missing backend is an error naming ``backend_requirement``."""
    backend_requirement: str | None = None
    """What ``pip install`` installs ``backend_module``: ``manifest-committer[azure]``, ``my-filesystem>=1.2``."""
    refusal: str | None = None
    """Why the committer refuses the store: for every protocol when there is no ``opener`` (HDFS), otherwise
    for the rename-based protocols when ``capabilities`` lack a safe rename (S3, whose ``upload`` protocol
    still opens it). Without it, a refusal names the guarantees that are missing."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"store binding {self.name!r}: needs a name")
        schemes = (self.schemes,) if isinstance(self.schemes, str) else tuple(self.schemes)
        object.__setattr__(self, "schemes", schemes)
        if not schemes:
            raise ConfigError(f"store binding {self.name!r}: serves no URL scheme")
        for scheme in schemes:
            if not isinstance(scheme, str) or not _SCHEME.fullmatch(scheme):
                raise ConfigError(
                    f"store binding {self.name!r}: {scheme!r} is not a URL scheme (lower case, such as 'gs', "
                    "without '://')"
                )
        if self.opener is not None and not callable(self.opener):
            raise ConfigError(f"store binding {self.name!r}: its opener {self.opener!r} is not a function")
        if self.opener is None and not self.refusal:
            raise ConfigError(f"store binding {self.name!r}: has neither an opener nor a refusal that says why not")
        if self.opener is not None and not isinstance(self.capabilities, StoreCapabilities):
            raise ConfigError(
                f"store binding {self.name!r}: declares no capabilities (a StoreCapabilities of what the store "
                "guarantees)"
            )
        if self.backend_requirement is not None and self.backend_module is None:
            raise ConfigError(f"store binding {self.name!r}: names a backend requirement but no backend module")

    @property
    def renames_safely(self) -> bool:
        """The store's rename never overwrites and says whether it happened: the rename-based protocols' need."""
        return not self.missing_rename_guarantees()

    def missing_rename_guarantees(self) -> list[str]:
        """The ``StoreCapabilities`` flags of ``RENAME_GUARANTEES`` that the binding does not declare."""
        declared = self.capabilities
        return [flag for flag, _ in RENAME_GUARANTEES if declared is None or not getattr(declared, flag)]

    def require_safe_rename(self, url: str) -> None:
        """``UnsupportedStoreError`` for ``url`` unless the store renames safely: the binding's ``refusal``,
        or the guarantees that are missing."""
        missing = self.missing_rename_guarantees()
        if not missing:
            return
        if self.refusal:
            raise UnsupportedStoreError(f"{url}: {self.refusal}")
        said = " and ".join(f"{text} ({flag})" for flag, text in RENAME_GUARANTEES if flag in missing)
        raise UnsupportedStoreError(
            f"{url}: the store binding {self.name!r} does not declare {said}, which the rename-based protocols "
            "(manifest, v1, v2) and the transactional protocol need; declare it in the binding's StoreCapabilities "
            "only if the store's rename_file keeps that promise across processes (docs/stores.md)"
        )

    def open(self, url: str, storage_options: dict[str, Any] | None = None) -> OpenedStore:
        """The store and path for ``url``, once its backend is found installed; ``UnsupportedStoreError`` for a
        refused store or a missing backend, before any connection is made; ``ConfigError`` naming the binding
        when its opener returns anything but an ``OpenedStore``."""
        if self.opener is None:
            raise UnsupportedStoreError(f"{url}: {self.refusal}")
        self._require_backend(url)
        opened = self.opener(url, dict(storage_options or {}))
        if not isinstance(opened, OpenedStore):
            raise ConfigError(
                f"{url}: store binding {self.name!r}: its opener {_qualified_name(self.opener)} returned a "
                f"{type(opened).__name__}, not an OpenedStore: return manifest_committer.OpenedStore(store, path), "
                "the store and the URL's path in it (docs/stores.md)"
            )
        return opened

    def describe(self) -> str:
        """One line for lists of stores: ``azure (abfs://, az://; pip install 'manifest-committer[azure]')``."""
        parts = [
            ", ".join(f"{scheme}://" for scheme in self.schemes) + (", plain paths" if "file" in self.schemes else "")
        ]
        if self.opener is None:
            parts.append("refused")
        elif not self.renames_safely and self.capabilities is not None and self.capabilities.pending_uploads:
            parts.append("upload protocol only")
        if self.backend_requirement:
            parts.append(f"pip install '{self.backend_requirement}'")
        return f"{self.name} ({'; '.join(parts)})"

    def _require_backend(self, url: str) -> None:
        """Check that the fsspec backend is installed (without importing it), or say what installs it."""
        module = self.backend_module
        if module is None:
            return
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
            found = False
        if found:
            return
        install = ""
        if self.backend_requirement:
            install = f": pip install '{self.backend_requirement}'"
            if self.backend_requirement.startswith(_THIS_DISTRIBUTION):
                extra = self.backend_requirement[len(_THIS_DISTRIBUTION) - 1 :]
                install += f" (or pip install '.{extra}' in a clone of the repository)"
        raise UnsupportedStoreError(f"{url}: the {self.name} store needs {module}, which is not installed{install}")


def _qualified_name(function: Callable[..., Any]) -> str:
    """``my_package.stores.open_scratch`` for a function; its ``repr`` for anything else callable."""
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(function)


def scheme_of(url: str) -> str:
    """The scheme a store binding is chosen by: ``file`` for a plain path, the outermost layer of a chained URL."""
    if "::" in url:  # a chained URL such as simplecache::gs://b/p: only the outermost layer is ours to judge
        return url.split("::", 1)[0]
    protocol, _ = fsspec.core.split_protocol(url)
    return protocol or "file"


def cloud_filesystems(url: str, options: dict[str, Any]) -> tuple[Any, Any, str]:
    """A private filesystem for the committer's own calls, fsspec's shared one for task output, and the path.

    The private one is never handed out, so switching its client's retries off changes nobody else's; neither
    keeps listing caches, since a committer must see every change at once.
    """
    options.setdefault("use_listings_cache", False)
    data_fs, path = fsspec.core.url_to_fs(url, **options)
    fs, _ = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
    return fs, data_fs, path.rstrip("/")
