"""What a manifest may name: the whole-list checks give the same answer as the path-by-path rules."""

from __future__ import annotations

import itertools

import pytest

from manifest_committer.admission import (
    all_destination_relatives_admitted,
    all_relatives_admitted,
    destination_relative_problem,
    relative_problem,
)

ODD_PATHS = [
    "a",
    "a/b.parquet",
    "dt=2024-01-01/part-0.parquet",
    ".hidden",
    "a/.hidden",
    "a..b",
    "a/..b",
    "",
    "/",
    "/a",
    "a/",
    "a//b",
    ".",
    "..",
    "a/.",
    "a/..",
    "./a",
    "../a",
    "a/./b",
    "a/../b",
    "a\0b",
    "_temporary",
    "_temporary/x",
    "_temporaryish",
    "x/_temporary/y",
    "a\n_temporary",
    "a\nb",
]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_the_whole_list_answer_is_the_answer_path_by_path(size: int) -> None:
    for relatives in itertools.product(ODD_PATHS, repeat=size):
        expected = all(relative_problem(relative) is None for relative in relatives)
        assert all_relatives_admitted(list(relatives)) is expected, relatives


@pytest.mark.parametrize("size", [1, 2, 3])
def test_destinations_are_never_admitted_when_one_is_refused(size: int) -> None:
    """A refused path is always caught; a ``False`` for admitted paths (a false alarm) only costs the slow path."""
    for relatives in itertools.product(ODD_PATHS, repeat=size):
        expected = all(destination_relative_problem(relative) is None for relative in relatives)
        if not expected:
            assert all_destination_relatives_admitted(list(relatives)) is False, relatives
        elif not any("\n" in relative or relative.startswith("_temporary") for relative in relatives):
            assert all_destination_relatives_admitted(list(relatives)) is True, relatives


def test_an_empty_list_is_admitted() -> None:
    assert all_relatives_admitted([]) and all_destination_relatives_admitted([])
