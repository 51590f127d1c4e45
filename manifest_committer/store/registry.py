"""The store bindings of this process: the built-in ones, the installed entry points, and those registered at run time.

Bindings come from the entry point group ``manifest_committer.stores`` (each entry point names a ``StoreBinding``
or a function of no arguments returning one; the built-in stores are declared there too, in pyproject.toml) and
from ``register_store_binding`` calls. The built-ins are also loaded from ``BUILT_IN_STORES``, this package's
own copy of its entry points, so that a copy of the package on ``sys.path`` without installed metadata (the
source shipped to a Spark executor) still serves them; an installed entry point with the same value is the same
binding.

A scheme has one binding. A second binding for a served scheme is refused naming both, unless registered at run
time with ``replace=True``; every replacement is logged naming both bindings (a built-in's at WARNING). A
built-in's scheme changes hands only by such a call of the user's: an entry point claiming it, or a
``register_store_binding(..., replace=True)`` made while an entry point is loaded (by the import of its module),
is refused with a warning naming both bindings and the entry point, and the built-in keeps the scheme. Two entry
points claiming one scheme leave it refused, naming both, until a run-time registration chooses. A broken entry
point is logged and named in refusals, and stops no other store.

The registry is process-wide, as entry points and fsspec's own registry are: one ``StoreBindings`` object
(``store_bindings()``) holds that state, and nothing else in this module changes. It loads the entry points
once, at the first lookup or registration, and every read and change holds its lock. A binding
registered at run time serves the process that registered it: the processes that run task commits (executors,
workers) need the same registration, or an entry point.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

import fsspec

from ..errors import ConfigError, UnsupportedStoreError
from .bindings import WHAT_A_BINDING_PROVIDES, StoreBinding, scheme_of
from .destination import check_destination

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "manifest_committer.stores"

BUILT_IN_STORES: tuple[EntryPoint, ...] = tuple(
    EntryPoint(name, value, ENTRY_POINT_GROUP)
    for name, value in (
        ("local", "manifest_committer.store.local:LOCAL_BINDING"),
        ("memory", "manifest_committer.store.memory:MEMORY_BINDING"),
        ("azure", "manifest_committer.store.azure:AZURE_BINDING"),
        ("gcs", "manifest_committer.store.gcs:GCS_BINDING"),
        ("s3", "manifest_committer.store.s3:S3_BINDING"),
        ("s3n", "manifest_committer.store.s3:S3N_BINDING"),
        ("hdfs", "manifest_committer.store.hdfs:HDFS_BINDING"),
    )
)
"""The built-in stores, exactly as pyproject.toml declares them in the entry point group (a test holds the two
equal)."""

RUN_TIME = "registered at run time"


@dataclass(frozen=True, slots=True)
class _Claim:
    """A binding serving a scheme, and where it came from (for messages)."""

    binding: StoreBinding
    origin: str
    built_in: bool = False

    def describe(self) -> str:
        return f"{self.binding.name!r} ({self.origin})"


def installed_entry_points() -> Iterable[EntryPoint]:
    """The entry points of the group in every installed distribution."""
    return entry_points(group=ENTRY_POINT_GROUP)


def _origin_of(entry_point: EntryPoint) -> str:
    distribution = getattr(entry_point, "dist", None)
    installed_by = f" of {distribution.name} {distribution.version}" if distribution is not None else ""
    return f"entry point {entry_point.name} = {entry_point.value}{installed_by}"


class StoreBindings:
    """The bindings of a process (``store_bindings()``), or of a test that builds its own.

    ``built_ins`` and ``discover`` (the installed entry points) are read once, at the first lookup or
    registration.
    """

    def __init__(
        self,
        built_ins: Iterable[EntryPoint] = BUILT_IN_STORES,
        discover: Callable[[], Iterable[EntryPoint]] = installed_entry_points,
    ) -> None:
        self._built_ins = tuple(built_ins)
        self._discover = discover
        self._lock = threading.RLock()
        """Reentrant: a module loaded as an entry point may register a binding while it is imported."""
        self._loaded = False
        self._claims: dict[str, _Claim] = {}
        self._contested: dict[str, tuple[str, ...]] = {}
        """Schemes that entry points claim twice: refused, naming the claimants, until a run-time registration."""
        self._failures: list[str] = []
        self._loading: str | None = None
        """The entry point being loaded (by this thread, which holds the lock meanwhile), if one is."""

    # --- changes ------------------------------------------------------------------------------------------------

    def register(self, binding: StoreBinding, *, replace: bool = False) -> None:
        """Serve ``binding``'s schemes with it, in this process.

        ``ConfigError`` naming both bindings if another serves one of them, unless ``replace``: then ``binding``
        takes those schemes (the other keeps the rest of its own), logged naming both; a built-in's only when
        no entry point is being loaded (called from the import of one, it is refused with a warning). Registering
        an equal binding again changes nothing.
        """
        if not isinstance(binding, StoreBinding):
            raise ConfigError(f"register_store_binding: {binding!r} is not a StoreBinding")
        with self._lock:
            self._load()
            if self._loading is None:
                self._claim(_Claim(binding, RUN_TIME), replace=replace, strict=True)
            else:
                self._claim(
                    _Claim(binding, f"registered while {self._loading} was loaded"), replace=replace, strict=True
                )

    def _claim(self, claim: _Claim, *, replace: bool, strict: bool) -> None:
        """Serve ``claim``'s schemes with it: ``strict`` (a registration call) raises where another serves one and
        ``replace`` is not given, otherwise (an entry point) such a scheme is contested. While an entry point is
        loaded nothing takes a built-in's scheme (refused with a warning)."""
        binding = claim.binding
        taken = {
            scheme: other
            for scheme in binding.schemes
            if (other := self._claims.get(scheme)) is not None and other.binding != binding
        }
        schemes = list(binding.schemes)
        if self._loading is not None and (kept := {s: other for s, other in taken.items() if other.built_in}):
            log.warning(
                "Store binding %s claims schemes of built-in bindings (%s): refused, the built-ins keep them (a "
                "built-in's scheme changes hands only by the user's own register_store_binding(..., replace=True))",
                claim.describe(),
                "; ".join(f"{scheme}:// by {other.describe()}" for scheme, other in kept.items()),
            )
            schemes = [scheme for scheme in schemes if scheme not in kept]
            taken = {scheme: other for scheme, other in taken.items() if scheme not in kept}
        contested = [scheme for scheme in schemes if scheme in self._contested]
        if (taken or contested) and not replace:
            held = [f"{scheme}:// by {other.describe()}" for scheme, other in taken.items()]
            held += [f"{scheme}:// by {' and '.join(self._contested[scheme])}" for scheme in contested]
            if strict:
                raise ConfigError(
                    f"store binding {claim.describe()} claims schemes already served: {'; '.join(held)}. "
                    "Pass replace=True to register_store_binding to serve them with this binding instead"
                )
            log.warning("Store binding %s claims schemes already served (%s): refused", claim.describe(), held)
            for scheme, other in taken.items():
                self._contested[scheme] = (other.describe(), claim.describe())
                del self._claims[scheme]
            for scheme in contested:
                self._contested[scheme] = (*self._contested[scheme], claim.describe())
        for scheme in schemes:
            if replace or (scheme not in taken and scheme not in contested):
                if replace and scheme in taken:
                    other = taken[scheme]
                    log.log(
                        logging.WARNING if other.built_in else logging.INFO,
                        "Store binding %s replaces %s for %s://",
                        claim.describe(),
                        other.describe(),
                        scheme,
                    )
                elif replace and scheme in contested:
                    log.info(
                        "Store binding %s serves %s://, claimed by %s",
                        claim.describe(),
                        scheme,
                        " and ".join(self._contested[scheme]),
                    )
                self._claims[scheme] = claim
                self._contested.pop(scheme, None)

    def _load(self) -> None:
        """The built-ins, then the installed entry points, once (under the lock)."""
        if self._loaded:
            return
        self._loaded = True  # first: a module that registers itself while it is loaded finds the registry open
        built_in_values = {entry_point.value for entry_point in self._built_ins}
        for entry_point in self._built_ins:
            self._load_entry_point(entry_point, f"built in, {entry_point.value}", built_in=True)
        try:
            discovered = sorted(self._discover(), key=lambda entry_point: (entry_point.name, entry_point.value))
        except Exception as error:  # unreadable metadata of some distribution: the built-ins still serve
            log.warning("Cannot read the entry points of %s: %s", ENTRY_POINT_GROUP, error)
            self._failures.append(f"the entry points of {ENTRY_POINT_GROUP} ({type(error).__name__}: {error})")
            return
        for entry_point in discovered:
            if entry_point.value not in built_in_values:  # the built-ins as the installed metadata lists them
                self._load_entry_point(entry_point, _origin_of(entry_point), built_in=False)

    def _load_entry_point(self, entry_point: EntryPoint, origin: str, *, built_in: bool) -> None:
        """Import an entry point and claim its binding's schemes; while an installed one is imported and claims,
        ``_loading`` names it, so that nothing it does takes a built-in's scheme."""
        self._loading = None if built_in else origin
        try:
            try:
                loaded = entry_point.load()
                binding = loaded if isinstance(loaded, StoreBinding) or not callable(loaded) else loaded()
                if not isinstance(binding, StoreBinding):
                    raise TypeError(f"it gives a {type(binding).__name__}, not a StoreBinding")
            except Exception as error:
                log.warning("Store binding of %s failed to load: %s: %s", origin, type(error).__name__, error)
                self._failures.append(f"{origin} ({type(error).__name__}: {error})")
                return
            self._claim(_Claim(binding, origin, built_in), replace=False, strict=False)
        finally:
            self._loading = None

    # --- lookups ------------------------------------------------------------------------------------------------

    def check(self, url: object, parameter: str = "destination") -> str:
        """``url`` if it may be a destination (``store/destination.py``), else a ``ConfigError`` naming
        ``parameter``; ``find`` and ``binding_for`` check it too."""
        with self._lock:
            self._load()
            return check_destination(url, self._claims, parameter)

    def find(self, url: str) -> StoreBinding | None:
        """The binding serving ``url``'s scheme, or ``None`` (no binding, or a contested scheme).

        ``ConfigError`` for a ``url`` that may not be a destination (``check_destination``)."""
        with self._lock:
            self._load()
            check_destination(url, self._claims)
            claim = self._claims.get(scheme_of(url))
        return None if claim is None else claim.binding

    def binding_for(self, url: str) -> StoreBinding:
        """The binding serving ``url``'s scheme; ``UnsupportedStoreError`` saying what a binding must provide,
        how to register one and which schemes are served, before anything is imported or connected; its first
        line names the served scheme nearest to one that fsspec does not know either. ``ConfigError`` for a
        ``url`` that may not be a destination (``check_destination``): every door to a store comes through here,
        so nothing is opened for it."""
        with self._lock:
            self._load()
            check_destination(url, self._claims)
            scheme = scheme_of(url)
            nearest = difflib.get_close_matches(scheme, list(self._claims), n=1, cutoff=0.5)
            claim = self._claims.get(scheme)
            contested = self._contested.get(scheme)
            if claim is not None:
                return claim.binding
            served = self._describe_served()
            failures = list(self._failures)
        if contested is not None:
            raise UnsupportedStoreError(
                f"{url}: more than one store binding claims {scheme}://: {' and '.join(contested)}. Choose one with "
                "manifest_committer.register_store_binding(binding, replace=True), or uninstall the other"
            )
        # fsspec's registry is only asked for the wording: a filesystem it knows still needs a binding.
        known = scheme in fsspec.available_protocols()
        head = f"no store binding for the {scheme}:// filesystem" if known else f"unknown scheme {scheme}://"
        guess = f"; did you mean {nearest[0]}://?" if nearest and not known else ""  # a typo, not another system
        message = f"{url}: {head}{guess}\n{WHAT_A_BINDING_PROVIDES}. Registered: {served}"
        if failures:
            message += f". Store bindings that failed to load: {'; '.join(failures)}"
        raise UnsupportedStoreError(message)

    def bindings(self) -> list[StoreBinding]:
        """Every binding serving a scheme, each once, in the order they were loaded or registered."""
        with self._lock:
            self._load()
            found: dict[int, StoreBinding] = {}
            for claim in self._claims.values():
                found.setdefault(id(claim.binding), claim.binding)
            return list(found.values())

    @property
    def failures(self) -> list[str]:
        """The entry points that failed to load, each with its error."""
        with self._lock:
            self._load()
            return list(self._failures)

    def _describe_served(self) -> str:
        openable = [binding for binding in self.bindings() if binding.opener is not None]
        return ", ".join(binding.describe() for binding in openable) or "none"


_PROCESS_BINDINGS = StoreBindings()
"""The process's bindings; see the module's docstring. Empty until first used."""


def store_bindings() -> StoreBindings:
    """The store bindings of this process."""
    return _PROCESS_BINDINGS


def register_store_binding(binding: StoreBinding, *, replace: bool = False) -> None:
    """Serve ``binding``'s URL schemes with it in this process (``StoreBindings.register``).

    ``ConfigError`` naming both bindings if another already serves one of its schemes, unless ``replace`` (each
    takeover logged naming both; a built-in's refused while an entry point's module is imported).
    Register it in every process that commits (executors and workers too), for example when the module that
    defines the filesystem is imported, or declare it as an entry point of the group ``manifest_committer.stores``.
    """
    store_bindings().register(binding, replace=replace)
