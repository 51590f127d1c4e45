"""What may be a destination: one check, made before a store is opened, so nothing is written or deleted first.

fsspec takes any string: ``""`` is the working directory, ``s3:/bucket/x`` (one slash) and ``file//tmp/x`` are
local relative paths, ``/`` is the whole disk. A committer deletes under its destination (``abort_job``,
overwrite), so each of these is refused here, with the way to write what was meant:

- a value that is not a string (``None``): ``TypeError`` naming the parameter;
- an empty or blank value, or one with spaces around it;
- the root of a store: ``/`` (or a path that resolves to it), ``file:///``, ``s3://``, ``memory://``. A bucket or
  container root (``s3://bucket``) is a destination, as in Hadoop;
- a mistyped URL: ``<scheme>:`` followed by anything but ``//`` (``s3:/bucket``, ``gs:bucket``; ``file:/x`` is
  Hadoop's form of a local path and stays), or a served scheme followed by ``//`` without its colon
  (``file//tmp/x``). A local directory with such a name is written ``./s3:/x``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from ..errors import ConfigError

_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LOCAL_SCHEMES = frozenset({"file", "local"})


class DestinationTypeError(ConfigError, TypeError):
    """A destination that is not a string: a ``ConfigError`` that is also the ``TypeError`` Python would raise."""


def check_destination(url: object, served_schemes: Iterable[str], parameter: str = "destination") -> str:
    """``url`` if it may be a destination (see the module); else a ``ConfigError`` naming it and what to write.

    ``served_schemes``: the schemes with a store binding, whose names followed by ``//`` are a URL missing its
    colon. A chained URL (``simplecache::gs://b/p``) is judged by its last layer, the store written to.
    """
    if not isinstance(url, str):
        raise DestinationTypeError(f"{parameter}: expected a path or URL (a string), got {url!r}")
    if not url.strip():
        raise ConfigError(f"{parameter} {url!r}: empty; name the directory to write, such as ./out or s3://bucket/out")
    if url != url.strip():
        raise ConfigError(f"{parameter} {url!r}: begins or ends with white space; write {url.strip()!r}")
    target = url.rsplit("::", 1)[-1]
    match = _SCHEME_PREFIX.match(target)
    if match is not None:
        return _check_url(url, target, match.group(1), parameter)
    scheme = target.split("//", 1)[0] if "//" in target else None
    if scheme is not None and scheme.lower() in {served.lower() for served in served_schemes}:
        rest = target[len(scheme) + 2 :].lstrip("/")
        raise ConfigError(
            f"{parameter} {url!r} looks like a URL without its colon: write {_url(scheme, rest)!r}, "
            f"or ./{target} for a local directory of that name"
        )
    if not os.path.abspath(target).strip("/"):  # every spelling of the local root: "/", "//", "/tmp/.."
        raise ConfigError(f"{parameter} {url!r} is the root of the local filesystem: name a directory below it")
    return url


def _check_url(url: str, target: str, scheme: str, parameter: str) -> str:
    rest = target[len(scheme) + 1 :]
    local = scheme.lower() in _LOCAL_SCHEMES
    if not rest.startswith("//") and not (local and rest.startswith("/")):
        raise ConfigError(
            f"{parameter} {url!r} looks like a mistyped URL: write {_url(scheme, rest.lstrip('/'))!r}, "
            f"or ./{target} for a local directory of that name"
        )
    path = rest[2:] if rest.startswith("//") else rest
    if local:
        if not os.path.abspath("/" + path).strip("/"):
            raise ConfigError(f"{parameter} {url!r} is the root of the local filesystem: name a directory below it")
    elif not path.strip("/"):
        raise ConfigError(f"{parameter} {url!r} is the root of the {scheme}:// store: name a bucket or directory")
    return url


def _url(scheme: str, rest: str) -> str:
    """``scheme://rest``, with the third slash of a local path (``file:///tmp/x``)."""
    return f"{scheme}:///{rest}" if scheme.lower() in _LOCAL_SCHEMES else f"{scheme}://{rest}"
