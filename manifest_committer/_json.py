"""JSON encoding (orjson) and reading of small documents from any fsspec URL."""

from __future__ import annotations

from typing import Any

import fsspec
import orjson

from .errors import ManifestError


def dump_json(document: dict[str, Any]) -> bytes:
    """Indented UTF-8 JSON, readable by people and by Hadoop's Jackson alike."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


def load_json_document(data: bytes, origin: str) -> Any:
    """Parse JSON; an empty or malformed document is a ``ManifestError`` naming ``origin``."""
    if not data or data.isspace():  # not strip(): that copies a document of megabytes
        raise ManifestError(f"{origin}: not a valid JSON document: the file is empty")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ManifestError(f"{origin}: failed to read JSON file: {error}") from error


def read_url(url: str, storage_options: dict[str, Any] | None = None) -> bytes:
    """Read a whole file from a plain path or fsspec URL; a missing file is a ``ManifestError`` naming it."""
    try:
        with fsspec.open(url, "rb", **(storage_options or {})) as handle:
            data: bytes = handle.read()
            return data
    except FileNotFoundError as error:
        raise ManifestError(f"{url}: file not found") from error
    except IsADirectoryError as error:
        raise ManifestError(f"{url}: is a directory, not a JSON file") from error
