"""The writer frameworks' releases that the extras admit: the newest (the test command installs them) and the
oldest (tested in an environment of their own).

    python scripts/frameworks.py newest        # pins of the newest releases the extras admit (asks the index)
    python scripts/frameworks.py oldest        # pins of the lowest versions the extras admit (pyproject.toml)
    python scripts/frameworks.py check PIN...  # fails, naming each, unless the installed versions are these

The frameworks are the packages of the writer extras (``spark``, ``arrow``, ``polars``, ``dask``, ``ray``) that
each writer drives: PySpark, pyarrow, Polars, Dask and Ray. Each must declare a lower bound (``>=``, the oldest
release tested) and an upper one (``<``, the next major release, not yet known to work); a package named in two
extras must be named alike. ``newest`` asks the package index that pip is configured with (``pip index
versions``, one query a package, in parallel) and leaves out pre-releases.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
WRITER_EXTRAS = ("spark", "arrow", "polars", "dask", "ray")
FRAMEWORKS = ("pyspark", "pyarrow", "polars", "dask", "ray")
"""The packages of the writer extras whose versions the writers depend on (``pandas``, say, is not one)."""


class FrameworkError(Exception):
    """pyproject.toml's extras, the index or the environment are not what this script needs; names the package."""


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """The framework requirements of the writer extras, one a package (extras merged), in ``FRAMEWORKS`` order."""
    with pyproject.open("rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    found: dict[str, Requirement] = {}
    for extra in WRITER_EXTRAS:
        for text in extras[extra]:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            if name not in FRAMEWORKS:
                continue
            known = found.get(name)
            if known is not None and known.specifier != requirement.specifier:
                raise FrameworkError(f"{name}: extras differ: {known.specifier} and {requirement.specifier}")
            if known is not None:
                requirement.extras |= known.extras
            found[name] = requirement
    missing = [name for name in FRAMEWORKS if name not in found]
    if missing:
        raise FrameworkError(f"{', '.join(missing)}: in no writer extra of {pyproject}")
    for requirement in found.values():
        bound(requirement, ">=")
        bound(requirement, "<")
    return [found[name] for name in FRAMEWORKS]


def bound(requirement: Requirement, operator: str) -> Version:
    """The version of ``requirement``'s one ``operator`` clause (``>=`` or ``<``)."""
    versions = [Version(clause.version) for clause in requirement.specifier if clause.operator == operator]
    if len(versions) != 1:
        raise FrameworkError(f"{requirement}: needs exactly one {operator} bound")
    return versions[0]


def pin(requirement: Requirement, version: Version) -> str:
    """``name[extras]==version``, as pip installs it."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}=={version}"


def oldest() -> list[str]:
    """A pin of each framework at the lower bound its extra admits."""
    return [pin(requirement, bound(requirement, ">=")) for requirement in requirements()]


def released(name: str) -> list[Version]:
    """The releases of ``name`` on the index pip uses (no pre-releases)."""
    command = [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"]
    answer = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in answer.stdout.splitlines():
        if line.startswith("Available versions:"):
            versions = []
            for text in line.partition(":")[2].split(","):
                try:
                    versions.append(Version(text.strip()))
                except InvalidVersion:
                    continue
            return versions
    raise FrameworkError(f"{name}: the index named no version ({' '.join(command[2:])}): {answer.stderr.strip()}")


def newest() -> list[str]:
    """A pin of each framework at the newest release its extra admits."""
    wanted = requirements()
    with ThreadPoolExecutor(len(wanted)) as pool:
        releases = list(pool.map(released, (requirement.name for requirement in wanted)))
    pins = []
    for requirement, versions in zip(wanted, releases, strict=True):
        admitted = [version for version in versions if requirement.specifier.contains(version)]
        if not admitted:
            raise FrameworkError(f"{requirement}: no release on the index is admitted")
        pins.append(pin(requirement, max(admitted)))
    return pins


def mismatches(pins: Sequence[str]) -> list[str]:
    """For each pin the installed version does not match, what is installed instead."""
    found = []
    for text in pins:
        requirement = Requirement(text)
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{requirement.name}: not installed, {requirement.specifier} wanted")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            found.append(f"{requirement.name}: {installed} installed, {requirement.specifier} wanted")
    return found


def main(arguments: Sequence[str]) -> int:
    command, pins = (arguments[0], arguments[1:]) if arguments else ("", [])
    try:
        if command == "newest" and not pins:
            print(" ".join(newest()))
        elif command == "oldest" and not pins:
            print(" ".join(oldest()))
        elif command == "check":
            differences = mismatches(pins)
            for line in differences:
                print(line, file=sys.stderr)
            return 1 if differences else 0
        else:
            print(__doc__.strip().splitlines()[0], "Usage: newest | oldest | check PIN...", file=sys.stderr)
            return 2
    except FrameworkError as error:
        print(f"scripts/frameworks.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
