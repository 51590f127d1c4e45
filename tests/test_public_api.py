"""The package's public surface: every error a user can be handed is importable from ``manifest_committer``."""

from __future__ import annotations

import importlib
import pkgutil

import manifest_committer
from manifest_committer.errors import CommitterError


def _public_errors() -> set[str]:
    """Every ``CommitterError`` subclass without a leading underscore, wherever in the package it is defined.

    A module that needs an optional framework (pyspark, polars, ...) to import is passed over: its errors, if any,
    belong to that writer's own module.
    """
    for module in pkgutil.walk_packages(manifest_committer.__path__, "manifest_committer."):
        try:
            importlib.import_module(module.name)
        except ImportError:
            continue

    def subclasses(root: type[CommitterError]) -> set[type[CommitterError]]:
        found = set(root.__subclasses__())
        for child in list(found):
            found |= subclasses(child)
        return found

    return {
        error.__name__
        for error in subclasses(CommitterError) | {CommitterError}
        if error.__module__.startswith("manifest_committer.") and not error.__name__.startswith("_")
    }


def test_every_public_error_is_exported() -> None:
    missing = _public_errors() - set(manifest_committer.__all__)
    assert not missing, f"errors users can catch but not import from manifest_committer: {sorted(missing)}"


def test_every_exported_name_is_importable() -> None:
    for name in manifest_committer.__all__:
        assert hasattr(manifest_committer, name), name
