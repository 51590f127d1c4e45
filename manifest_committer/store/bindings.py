"""Store bindings: what binds a URL scheme to a store, and the helpers bindings share."""

from __future__ import annotations

from typing import Any

import fsspec


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
