"""Polars' own Hive directory names mapped to the Spark writer's, and refused wherever they might differ."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from manifest_committer.writing.partitioning import partition_segment
from manifest_committer.writing.polars_naming import (
    ValueKind,
    decode_polars_value,
    map_polars_files,
    spark_directory,
)

STRING = (ValueKind.STRING,)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("plain", "plain"),
        ("a%20b%2Fc%3Dd%25", "a b/c=d%"),  # as Polars writes "a b/c=d%"
        ("a%252Fb", "a%2Fb"),
        ("x%3Ay?*", "x:y?*"),
        ("q\"'#[]^{}\\+&;,~!@$()", "q\"'#[]^{}\\+&;,~!@$()"),  # Polars leaves these as they are
        ("tab%09%0A%7F%01", "tab\t\n\x7f\x01"),
        ("%C3%A9%E2%82%AC%F0%9F%98%80", "é€😀"),  # non-ASCII: its UTF-8 bytes
        ("", ""),
    ],
)
def test_polars_encoding_is_decoded(text: str, value: str) -> None:
    assert decode_polars_value(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "50%",  # a % that escapes nothing
        "%zz",
        "a b",  # Polars encodes a space
        "a:b",
        "é",  # Polars encodes non-ASCII
        "tab\there",
        "%C3",  # not UTF-8
        "%FF%FE",
    ],
)
def test_text_polars_would_not_write_is_refused(text: str) -> None:
    assert decode_polars_value(text) is None


POLARS_LEAVES = "".join(chr(code) for code in range(0x21, 0x7F) if chr(code) not in "%/:=")
"""What Polars leaves unencoded in a value (``tests/test_polars.py`` checks this against Polars itself)."""


def test_every_character_maps_to_the_segment_the_spark_writer_makes() -> None:
    """A value of each character up to U+0800 (and one beyond the BMP), encoded as Polars encodes it, maps to
    exactly ``partition_segment``'s directory name."""
    for value in [*(f"a{chr(code)}b" for code in range(1, 0x800)), "😀", "", " "]:
        polars_directory = f"k={quote(value, safe=POLARS_LEAVES)}"
        assert spark_directory(polars_directory, ("k",), STRING) == partition_segment("k", value), repr(value)


@pytest.mark.parametrize(
    ("polars_directory", "columns", "kinds", "expected"),
    [
        ("", (), (), ""),
        ("k=a%20b%2Fc%3Dd%25", ("k",), STRING, "k=a b%2Fc%3Dd%25"),
        ("k=x%3Ay?*", ("k",), STRING, "k=x%3Ay%3F%2A"),
        ("k=__HIVE_DEFAULT_PARTITION__", ("k",), STRING, "k=__HIVE_DEFAULT_PARTITION__"),
        ("k=", ("k",), STRING, "k=__HIVE_DEFAULT_PARTITION__"),  # the empty string: Spark's null name
        ("k=%C3%A9", ("k",), STRING, "k=é"),
        ("a b=x/n=-12", ("a b", "n"), (ValueKind.STRING, ValueKind.INTEGER), "a b=x/n=-12"),
        ("b=true/d=2026-11-22", ("b", "d"), (ValueKind.BOOLEAN, ValueKind.DATE), "b=true/d=2026-11-22"),
        ("n=__HIVE_DEFAULT_PARTITION__", ("n",), (ValueKind.INTEGER,), "n=__HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_directories_map_to_the_spark_writers(
    polars_directory: str, columns: tuple[str, ...], kinds: tuple[ValueKind, ...], expected: str
) -> None:
    assert spark_directory(polars_directory, columns, kinds) == expected


@pytest.mark.parametrize(
    ("polars_directory", "columns", "kinds"),
    [
        ("k=a", (), ()),  # deeper than the partition columns
        ("k=a", ("k", "j"), (ValueKind.STRING, ValueKind.STRING)),
        ("j=a", ("k",), STRING),  # another column
        ("k", ("k",), STRING),
        ("k=a b", ("k",), STRING),  # not Polars' encoding
        ("b=True", ("b",), (ValueKind.BOOLEAN,)),  # not Spark's text of a boolean
        ("n=1.0", ("n",), (ValueKind.INTEGER,)),
        ("n=", ("n",), (ValueKind.INTEGER,)),
        ("d=0000-01-01", ("d",), (ValueKind.DATE,)),  # no Python date
        ("d=2026-1-2", ("d",), (ValueKind.DATE,)),
        ("d=+12026-01-01", ("d",), (ValueKind.DATE,)),
    ],
)
def test_directories_that_may_differ_are_refused(
    polars_directory: str, columns: tuple[str, ...], kinds: tuple[ValueKind, ...]
) -> None:
    assert spark_directory(polars_directory, columns, kinds) is None


def test_files_get_the_writers_unique_names_in_their_spark_directories() -> None:
    paths = ["k=b/00000001.parquet", "k=a%2Fb/00000000.parquet", "k=b/00000000.parquet"]
    outputs = map_polars_files(paths, ["k"], STRING, "part-00000-job-a7", ".snappy.parquet")
    assert outputs == {
        "k=a%2Fb/00000000.parquet": "k=a%2Fb/part-00000-job-a7-c000.snappy.parquet",
        "k=b/00000000.parquet": "k=b/part-00000-job-a7-c001.snappy.parquet",
        "k=b/00000001.parquet": "k=b/part-00000-job-a7-c002.snappy.parquet",
    }
    assert map_polars_files(["00000000.parquet"], [], (), "part-1", ".parquet") == {
        "00000000.parquet": "part-1-c000.parquet"
    }


@pytest.mark.parametrize(
    ("paths", "columns"),
    [
        (["k=__HIVE_DEFAULT_PARTITION__/00000000.parquet"] * 2, ["k"]),  # null and the string: one file, twice
        (["k=a/00000000.parquet", "k=a b/00000000.parquet"], ["k"]),  # one path cannot be mapped: none is
        (["k=a/"], ["k"]),
        (["a=b/00000000.parquet"], ["a=b"]),  # Spark escapes this column name; Polars does not
        (["../00000000.parquet"], []),
    ],
)
def test_a_task_whose_files_cannot_all_be_mapped_is_refused(paths: list[str], columns: list[str]) -> None:
    assert map_polars_files(paths, columns, STRING * len(columns), "part", ".parquet") is None
