"""Polars' own Hive directory names, mapped to the Spark writer's: the fast route of the Polars writer.

Polars' partitioned sink names its files ``<column>=<value>/.../<index>.parquet`` when no ``file_path_provider``
names them, and calling a provider into Python once a file costs more than the rest of its write. So the Polars
writer lets Polars name the files in the task attempt directory and maps each to the name the Spark writer would
give it (``partitioning.partition_path``, with the task's unique file names) in the task commit's ``outputs``.

The two namings agree only in part, so the mapping is refused (``None``: the writer falls back to its provider)
wherever it is not certain:

* Polars percent-encodes control characters, space, ``%``, ``/``, ``:``, ``=``, DEL and every non-ASCII byte of a
  value (UTF-8) and leaves the rest of printable ASCII as it is (Polars 1.44 to 2.1); a value is decoded back
  only if it is made of exactly those, and re-escaped as Spark escapes it. A null value is
  ``__HIVE_DEFAULT_PARTITION__``, as in Spark; the empty string is empty (Spark: the default name too).
* Polars does not escape column names: a column is mapped only if Spark would not escape it either.
* The text of a value must be the text Spark's writer gives it: strings, integers, booleans and dates only
  (``ValueKind``), and each decoded value must look like its kind (a later Polars that wrote ``True`` would be
  refused, not mapped).
* Polars writes the null value and the string ``"__HIVE_DEFAULT_PARTITION__"`` to the same file: a path reported
  twice is refused (the writer then rewrites everything through its provider).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence

from .partitioning import DEFAULT_PARTITION_NAME, escape_path_name

POLARS_NULL_NAME = "__HIVE_DEFAULT_PARTITION__"
"""Polars' directory name of a null partition value."""
_POLARS_RAW = frozenset(chr(code) for code in range(0x21, 0x7F)) - frozenset("%/:=")
"""The characters Polars leaves as they are in a partition value; it percent-encodes every other byte."""
_RAW_TEXT = re.compile("[" + re.escape("".join(sorted(_POLARS_RAW))) + "]*")
_ESCAPE = re.compile("%([0-9A-Fa-f]{2})")


class ValueKind(enum.Enum):
    """A partition column's type whose values Polars and Spark's writer spell alike, with the form of its text."""

    STRING = re.compile(r".*", re.DOTALL)
    INTEGER = re.compile(r"-?[0-9]+")
    BOOLEAN = re.compile(r"true|false")
    DATE = re.compile(r"(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}")  # Python's dates: years 1 to 9999


def column_name_agrees(column: str) -> bool:
    """Whether Polars' unescaped directory name of ``column`` is also Spark's."""
    return escape_path_name(column) == column


def decode_polars_value(text: str) -> str | None:
    """The value Polars encoded as ``text`` in a directory name, or ``None`` if ``text`` is not its encoding."""
    if _RAW_TEXT.fullmatch(text):
        return text
    data = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            escape = _ESCAPE.match(text, index)
            if escape is None:
                return None
            data.append(int(escape.group(1), 16))
            index += 3
        elif char in _POLARS_RAW:
            data.append(ord(char))
            index += 1
        else:
            return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def spark_directory(polars_directory: str, columns: Sequence[str], kinds: Sequence[ValueKind]) -> str | None:
    """The Spark writer's partition directory for the one Polars named, or ``None`` where the two may differ."""
    if not all(column_name_agrees(column) for column in columns):
        return None
    return _spark_directory(polars_directory, columns, [kind.value for kind in kinds])


def _spark_directory(polars_directory: str, columns: Sequence[str], forms: Sequence[re.Pattern[str]]) -> str | None:
    """``spark_directory`` for ``columns`` that ``column_name_agrees`` admits, ``forms`` their kinds' patterns.

    Each segment is what ``partitioning.partition_segment`` makes of the decoded text (a string value; a column
    name with nothing to escape), spelled out: this runs once a partition directory.
    """
    segments = polars_directory.split("/") if polars_directory else []
    if len(segments) != len(columns):
        return None
    spark: list[str] = []
    for segment, column, form in zip(segments, columns, forms, strict=True):
        name, equals, text = segment.partition("=")
        if not equals or name != column:
            return None
        if text == POLARS_NULL_NAME:
            spark.append(f"{column}={DEFAULT_PARTITION_NAME}")
            continue
        value = decode_polars_value(text)
        if value is None or form.fullmatch(value) is None:
            return None
        spark.append(f"{column}={escape_path_name(value) if value else DEFAULT_PARTITION_NAME}")
    return "/".join(spark)


def map_polars_files(
    paths: Iterable[str], columns: Sequence[str], kinds: Sequence[ValueKind], file_prefix: str, extension: str
) -> dict[str, str] | None:
    """The task commit's ``outputs`` for the files Polars named (``paths``, relative to the attempt directory):
    each to its Spark partition directory, named ``<file_prefix>-c<i><extension>`` as the writer's files are.
    ``None`` if any path cannot be mapped with certainty, or was reported twice."""
    ordered = sorted(paths)
    if len(set(ordered)) != len(ordered) or not all(column_name_agrees(column) for column in columns):
        return None
    forms = [kind.value for kind in kinds]
    outputs: dict[str, str] = {}
    directories: dict[str, str | None] = {}
    for number, path in enumerate(ordered):
        polars_directory, _, file_name = path.rpartition("/")
        if not file_name:
            return None
        if polars_directory not in directories:
            directories[polars_directory] = _spark_directory(polars_directory, columns, forms)
        directory = directories[polars_directory]
        if directory is None:
            return None
        name = f"{file_prefix}-c{number:03d}{extension}"
        outputs[path] = f"{directory}/{name}" if directory else name
    return outputs
