"""Hive-style partition directories (``dt=2024-01-01/country=DE``), escaped exactly as Spark escapes them.

Spark's readers unescape ``%XX`` in partition directory names and read ``__HIVE_DEFAULT_PARTITION__`` as null,
so the same escaping here makes the output readable by ``spark.read`` with partition discovery.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
"""The directory name of a null (or empty string) partition value, as Hive and Spark write it."""

# Spark's ExternalCatalogUtils.charToEscape (the non-Windows set): control characters and these.
_CHARACTERS_TO_ESCAPE = frozenset(chr(code) for code in range(0x01, 0x20)) | frozenset("\"#%'*/:=?\\\x7f{[]^")


_ANY_TO_ESCAPE = re.compile("[" + re.escape("".join(sorted(_CHARACTERS_TO_ESCAPE))) + "]")


def escape_path_name(text: str) -> str:
    """Escape one path segment as ``%XX`` (upper-case hex) for every character Spark escapes; spaces stay."""
    if _ANY_TO_ESCAPE.search(text) is None:  # most names: a writer names a directory per file it opens
        return text
    return "".join(f"%{ord(char):02X}" if char in _CHARACTERS_TO_ESCAPE else char for char in text)


def unescape_path_name(text: str) -> str:
    """The inverse of ``escape_path_name``; a ``%`` not followed by two hex digits stays as it is."""
    result: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%" and index + 2 < len(text) and _is_hex(text[index + 1 : index + 3]):
            result.append(chr(int(text[index + 1 : index + 3], 16)))
            index += 3
        else:
            result.append(char)
            index += 1
    return "".join(result)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(char in "0123456789abcdefABCDEF" for char in text)


def partition_value_to_string(value: object) -> str | None:
    """The text Spark would put into a partition directory name for ``value``; ``None`` means null."""
    text: str | None
    if value is None:
        text = None
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text = f"{text}.{value.microsecond:06d}".rstrip("0")
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    elif isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    else:
        text = str(value)
    return text


def partition_segment(column: str, value: object) -> str:
    """``column=value`` for one partition column, both escaped; null and empty values become the default name."""
    text = partition_value_to_string(value)
    escaped = DEFAULT_PARTITION_NAME if text is None or text == "" else escape_path_name(text)
    return f"{escape_path_name(column)}={escaped}"


def partition_path(columns: Sequence[str], values: Sequence[object]) -> str:
    """The relative directory of one partition: ``a=1/b=x%2Fy``; the empty string when there are no columns."""
    if len(columns) != len(values):
        raise ValueError(f"{len(columns)} partition columns but {len(values)} values")
    return "/".join(partition_segment(column, value) for column, value in zip(columns, values, strict=True))
