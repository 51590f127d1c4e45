"""The paths adlfs keeps for the paths it is given (``StoreCapabilities.kept_name`` of Azure).

adlfs reads every path as a URL (``fsspec.utils.infer_storage_options``): an empty query or fragment is dropped
(``b.csv?`` and ``h#`` are written, listed and deleted as ``b.csv`` and ``h``), a fragment after a query moves in
front of it (``a?b#c`` is kept as ``a#c?b``), and tabs and line breaks are removed; ``a?b.csv``, ``x#y.csv``,
``q?/x.csv`` and ``z??`` are kept as written. The client's own parser decides, so the declaration follows the
client release in use; the store contract suite checks it against the service.
"""

from __future__ import annotations


def adlfs_kept_name(path: str) -> str:
    """The path adlfs sends to the service for the store path ``path`` (``container/blob``)."""
    from adlfs import AzureBlobFileSystem

    kept: str = AzureBlobFileSystem._strip_protocol(path)
    return kept
