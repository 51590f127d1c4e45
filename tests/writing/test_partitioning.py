"""Hive-style partition paths, escaped as Spark escapes them."""

from __future__ import annotations

import datetime
import decimal

import pytest

from manifest_committer.writing.partitioning import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    partition_path,
    partition_segment,
    unescape_path_name,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("with space", "with space"),
        ("a/b", "a%2Fb"),
        ("k=v", "k%3Dv"),
        ("50%", "50%25"),
        ("x:y?*", "x%3Ay%3F%2A"),
        ("q\"#'\\{[]^", "q%22%23%27%5C%7B%5B%5D%5E"),
        ("tab\there\x7f", "tab%09here%7F"),
        ("ünïcödé", "ünïcödé"),
    ],
)
def test_escape_matches_spark(value: str, expected: str) -> None:
    assert escape_path_name(value) == expected
    assert unescape_path_name(expected) == value


def test_every_character_spark_escapes_is_escaped_alone_and_inside_a_name() -> None:
    """A name with nothing to escape is returned as it is (a regex decides): that check must miss no character."""
    escaped = {chr(code) for code in range(0x01, 0x20)} | set("\"#%'*/:=?\\\x7f{[]^")
    for code in range(0x3000):
        char = chr(code)
        expected = f"%{code:02X}" if char in escaped else char
        assert escape_path_name(char) == expected, repr(char)
        assert escape_path_name(f"a{char}b") == f"a{expected}b", repr(char)


def test_unescape_leaves_stray_percent() -> None:
    assert unescape_path_name("50%") == "50%"
    assert unescape_path_name("%zz%4") == "%zz%4"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, DEFAULT_PARTITION_NAME),
        ("", DEFAULT_PARTITION_NAME),
        (True, "true"),
        (7, "7"),
        (decimal.Decimal("1.50"), "1.50"),
        (datetime.date(2024, 1, 31), "2024-01-31"),
        (datetime.datetime(2024, 1, 31, 5, 6, 7), "2024-01-31 05%3A06%3A07"),
        (datetime.datetime(2024, 1, 31, 5, 6, 7, 120000), "2024-01-31 05%3A06%3A07.12"),
    ],
)
def test_segment_of_typed_values(value: object, expected: str) -> None:
    assert partition_segment("c", value) == f"c={expected}"


def test_partition_path_joins_columns_and_escapes_names() -> None:
    assert partition_path(["dt", "a=b"], ["2024-01-01", "x/y"]) == "dt=2024-01-01/a%3Db=x%2Fy"
    assert partition_path([], []) == ""
    with pytest.raises(ValueError, match="2 partition columns but 1 values"):
        partition_path(["a", "b"], [1])
