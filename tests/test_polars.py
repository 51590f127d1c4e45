"""manifest_committer.polars.write: Polars frames through the committer, read back with Polars and pyarrow; its
two routes (Polars' own file names mapped at task commit, or a ``file_path_provider``) commit the same files."""

from __future__ import annotations

import datetime
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

import manifest_committer.polars as mcp
from manifest_committer.statistic_names import COMMITTER_DIRECTORIES_MOVED
from manifest_committer.writing import job as job_module
from tests.fixtures.writing import (
    NASTY_COLUMNS,
    NASTY_DIRECTORIES,
    NASTY_ROWS,
    PROTOCOLS,
    data_files,
    has_success,
    partition_directories,
    read_rows,
)

FRAME = pl.DataFrame({"dt": ["2026-11-22", "x=y", None], "x": [1, 2, 3]})
ROWS = sorted([("2026-11-22", 1), ("x=y", 2), (None, 3)], key=repr)
OWN_NAMES, PROVIDER, FELL_BACK = "own names", "provider", "own names, then provider"
FILE_NAME = re.compile(r"part-00000-polars-[0-9a-f-]{36}-a[0-9]+-c[0-9]{3}\.snappy\.parquet")
"""Every committed file's name, whichever route wrote it."""


class Routes:
    """Records the route each write of a test took. Local disk counts as a tmpfs (the tests' own temporary
    directory may lie elsewhere); ``provider_only`` turns Polars' own names off."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken: list[str] = []
        self._monkeypatch = monkeypatch
        own, provider = mcp._write_with_own_names, mcp._write_through_provider

        def with_own_names(*args: Any) -> Any:
            self.taken.append(OWN_NAMES)
            written = own(*args)
            if written is None:
                self.taken[-1] = "own names failed"
            return written

        def through_provider(*args: Any) -> Any:
            tried_own = bool(self.taken) and self.taken[-1] == "own names failed"
            if tried_own:
                self.taken[-1] = FELL_BACK
            else:
                self.taken.append(PROVIDER)
            return provider(*args)

        monkeypatch.setattr(mcp, "_write_with_own_names", with_own_names)
        monkeypatch.setattr(mcp, "_write_through_provider", through_provider)

    def provider_only(self) -> None:
        self._monkeypatch.setattr(mcp, "_own_names_agree", lambda: False)


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> Routes:
    return Routes(monkeypatch)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_data_and_lazy_frames_read_back_with_pyarrow(destination: str, protocol: str) -> None:
    summary = mcp.write(FRAME, destination, partition_by=["dt"], protocol=protocol)
    assert summary is not None and summary.success and summary.committer
    mcp.write(FRAME.lazy().filter(pl.col("x") > 1), destination, partition_by=["dt"], mode="overwrite",
              options={"partitionOverwriteMode": "dynamic"}, protocol=protocol)  # fmt: skip
    assert read_rows(destination, ["dt", "x"]) == ROWS
    assert "dt=x%3Dy" in {path.split("/")[0] for path in data_files(destination)}


def test_polars_reads_its_own_output_back(tmp_path: Path) -> None:
    url = str(tmp_path / "out")
    mcp.write(FRAME, url, partition_by=["dt"])
    back = pl.read_parquet(f"{url}/**/*.parquet", hive_partitioning=True).select("dt", "x")
    assert sorted(back.rows(), key=repr) == ROWS


@pytest.mark.parametrize("route", [OWN_NAMES, PROVIDER])
def test_a_failed_write_leaves_the_destination_as_it_was(
    destination: str, monkeypatch: pytest.MonkeyPatch, routes: Routes, route: str
) -> None:
    """Polars fails once it has written its files (on memory://, the provider route: the only one there). Own names
    are the route into a destination without partitions yet: there the old output is unpartitioned."""
    if route == PROVIDER:
        routes.provider_only()
    mcp.write(FRAME, destination, partition_by=["dt"] if route == PROVIDER else [])
    before = data_files(destination)
    original = mcp._sink

    def sink_then_fail(*args: Any) -> None:
        original(*args)
        raise OSError("injected failure after Polars wrote its files")

    monkeypatch.setattr(mcp, "_sink", sink_then_fail)
    with pytest.raises(OSError, match="injected failure"):
        mcp.write(FRAME, destination, partition_by=["dt"], mode="overwrite")
    assert data_files(destination) == before
    assert read_rows(destination, ["dt", "x"]) == ROWS
    assert routes.taken == [route if destination.startswith("/") else PROVIDER] * 2


def test_not_a_frame_is_refused(destination: str) -> None:
    with pytest.raises(TypeError, match="got dict"):
        mcp.write({"x": [1]}, destination)
    assert not has_success(destination)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_nasty_partition_values_make_the_spark_writers_directories(destination: str, protocol: str) -> None:
    """Whoever names the files, the directories are the Spark writer's: Polars' own naming never reaches the
    destination."""
    mcp.write(pl.DataFrame(NASTY_COLUMNS), destination, partition_by=["country", "day"], protocol=protocol)
    assert partition_directories(destination) == NASTY_DIRECTORIES
    assert read_rows(destination, ["country", "day", "x"]) == NASTY_ROWS


EVERY_CHARACTER = [f"v{chr(code)}w" for code in range(1, 0x80)] + ["é", "€", "😀", "\u3000", "", " ", "..", "."]
"""Every ASCII character inside a value, some that are not, and values that are path segments of their own."""
EQUIVALENCE_CASES: dict[str, tuple[pl.DataFrame, list[str], dict[str, str], str]] = {
    "nasty values, string and integer": (pl.DataFrame(NASTY_COLUMNS), ["country", "day"], {}, OWN_NAMES),
    "every character": (pl.DataFrame({"k": EVERY_CHARACTER, "x": range(len(EVERY_CHARACTER))}), ["k"], {}, OWN_NAMES),
    "integers of every width": (
        pl.DataFrame(
            {
                "i8": pl.Series([-128, 127, None, 0], dtype=pl.Int8),
                "u64": pl.Series([0, 2**64 - 1, 7, None], dtype=pl.UInt64),
                "x": [1, 2, 3, 4],
            }
        ),
        ["i8", "u64"],
        {},
        OWN_NAMES,
    ),
    "booleans, dates, categorical, enum, all null": (
        pl.DataFrame(
            {
                "b": [True, False, None, True],
                "d": [datetime.date(2026, 11, 22), datetime.date(1, 1, 1), datetime.date(9999, 12, 31), None],
                "c": pl.Series(["a/b", None, "x", "a/b"], dtype=pl.Categorical),
                "e": pl.Series(["p:q", "r", None, "r"], dtype=pl.Enum(["p:q", "r"])),
                "n": pl.Series([None] * 4, dtype=pl.Null),
                "x": [1, 2, 3, 4],
            }
        ),
        ["b", "d", "c", "e", "n"],
        {},
        OWN_NAMES,
    ),
    "a column name with spaces and non-ASCII": (
        pl.DataFrame({"the é key": ["a b", "c"], "x": [1, 2]}),
        ["the é key"],
        {},
        OWN_NAMES,
    ),
    "unpartitioned, rolled every two rows": (pl.DataFrame({"x": range(5)}), [], {"maxRecordsPerFile": "2"}, OWN_NAMES),
    "rolled within partitions": (
        pl.DataFrame({"k": ["a"] * 3 + ["b"], "x": range(4)}),
        ["k"],
        {"maxRecordsPerFile": "2"},
        OWN_NAMES,
    ),
    # Polars writes the null value and this string into one file of one name: it reports that file twice.
    "null and the string __HIVE_DEFAULT_PARTITION__": (
        pl.DataFrame({"k": [None, "__HIVE_DEFAULT_PARTITION__", "a"], "x": [1, 2, 3]}),
        ["k"],
        {},
        FELL_BACK,
    ),
    "floats": (pl.DataFrame({"f": [1.0, 0.1, float("nan"), None], "x": [1, 2, 3, 4]}), ["f"], {}, PROVIDER),
    "datetimes": (
        pl.DataFrame(
            {"t": [datetime.datetime(2026, 1, 2, 3, 4, 5, 120000), datetime.datetime(2026, 1, 2)], "x": [1, 2]}
        ),
        ["t"],
        {},
        PROVIDER,
    ),
    "a column name Spark escapes": (pl.DataFrame({"a=b": ["x", "y/z"], "x": [1, 2]}), ["a=b"], {}, PROVIDER),
}


def committed_layout(url: str) -> dict[str, list[list[int]]]:
    """Partition directory -> the ``x`` values of each of its files (sorted); every file name checked."""
    layout: dict[str, list[list[int]]] = {}
    for path in data_files(url):
        directory, _, name = path.rpartition("/")
        assert FILE_NAME.fullmatch(name), name
        layout.setdefault(directory, []).append(sorted(pq.read_table(f"{url}/{path}").column("x").to_pylist()))
    return {directory: sorted(files) for directory, files in layout.items()}


@pytest.mark.parametrize("case", list(EQUIVALENCE_CASES))
def test_both_routes_commit_the_same_files(tmp_path: Path, routes: Routes, case: str) -> None:
    """Polars' own names, mapped at task commit, give exactly the directories, files and rows of the provider
    route; where the namings may differ the writer takes (or falls back to) the provider."""
    frame, columns, options, expected_route = EQUIVALENCE_CASES[case]
    mcp.write(frame, str(tmp_path / "default"), partition_by=columns, options=options)
    mcp.write(frame.lazy(), str(tmp_path / "default-lazy"), partition_by=columns, options=options)
    routes.provider_only()
    mcp.write(frame, str(tmp_path / "provider"), partition_by=columns, options=options)
    assert routes.taken == [expected_route, expected_route, PROVIDER]
    expected = committed_layout(str(tmp_path / "provider"))
    assert sum(len(files) for files in expected.values()) >= 2
    assert committed_layout(str(tmp_path / "default")) == expected
    assert committed_layout(str(tmp_path / "default-lazy")) == expected


def test_own_names_leave_no_polars_name_behind(tmp_path: Path, routes: Routes, monkeypatch: pytest.MonkeyPatch) -> None:
    """By the task commit Polars' files bear their unique names, each in its partition's directory; the job
    commit moves each directory of one file into the destination whole, and the attempt directory Polars filled
    is gone after it."""
    results: list[Any] = []
    commit_write = job_module.commit_write

    def recording(job: Any, delivered: list[Any]) -> Any:
        results.extend(delivered)
        return commit_write(job, delivered)

    monkeypatch.setattr(job_module, "commit_write", recording)
    url = str(tmp_path / "out")
    summary = mcp.write(FRAME, url, partition_by=["dt"])
    assert routes.taken == [OWN_NAMES]
    [result] = results
    assert all(
        source.rpartition("/")[2] == destination.rpartition("/")[2] for source, destination in result.outputs.items()
    )
    assert {path.rpartition("/")[0] for path in result.outputs.values()} == set(result.partitions)
    assert summary is not None and len(summary.filenames) == 3
    assert summary.iostatistics.counters[COMMITTER_DIRECTORIES_MOVED] == 3
    assert not (tmp_path / "out" / "_temporary").exists()
    assert all(FILE_NAME.fullmatch(path.rpartition("/")[2]) for path in data_files(url))


def test_a_destination_with_partitions_already_takes_the_provider(tmp_path: Path, routes: Routes) -> None:
    """Partitions there already (an append): their files are renamed into them one by one, where the provider's
    flat files cost less than Polars' own directories left for the cleanup."""
    url = str(tmp_path / "out")
    mcp.write(FRAME, url, partition_by=["dt"])
    mcp.write(FRAME, url, partition_by=["dt"], mode="append")
    assert routes.taken == [OWN_NAMES, PROVIDER]
    assert read_rows(url, ["dt", "x"]) == sorted(ROWS * 2, key=repr)


def test_the_probe_of_polars_names_finds_this_polars_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """This Polars names directories as ``writing.polars_naming`` reads them; a Polars that did not is caught."""
    assert mcp._own_names_agree.__wrapped__()
    monkeypatch.setattr(mcp, "map_polars_files", lambda paths, *rest: {path: f"k=other/{path}" for path in paths})
    assert not mcp._own_names_agree.__wrapped__()


@pytest.fixture
def no_probe_cache() -> Iterator[None]:
    mcp._own_names_agree.cache_clear()
    yield
    mcp._own_names_agree.cache_clear()


@pytest.mark.usefixtures("no_probe_cache")
def test_a_failed_probe_means_the_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, routes: Routes) -> None:
    def no_temporary_directory(**_: Any) -> Any:
        raise OSError("no temporary directory")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_temporary_directory)
    mcp.write(FRAME, str(tmp_path / "out"), partition_by=["dt"])
    assert routes.taken == [PROVIDER]
    assert read_rows(str(tmp_path / "out"), ["dt", "x"]) == ROWS


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_polars_own_sinks_write_every_format(tmp_path: Path, format: str) -> None:
    url = str(tmp_path / "out")
    summary = mcp.write(FRAME.lazy(), url, format=format, partition_by=["dt"], options={"maxRecordsPerFile": "1"})
    assert summary is not None and len(summary.filenames) == 3
    assert read_rows(url, ["dt", "x"], format) == ROWS
    extension = {"parquet": ".snappy.parquet", "csv": ".csv", "json": ".json"}[format]
    assert all(path.endswith(extension) and "-a" in path for path in data_files(url))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_on_the_cloud_emulators(cloud_destination: str, protocol: str) -> None:
    """Polars writes each file into an fsspec file of Azurite or fake-gcs-server that its provider hands it."""
    mcp.write(FRAME, cloud_destination, partition_by=["dt"], protocol=protocol)
    replacement = pl.DataFrame({"dt": ["x=y"], "x": [20]})
    mcp.write(replacement.lazy(), cloud_destination, partition_by=["dt"], mode="overwrite", protocol=protocol,
              options={"partitionOverwriteMode": "dynamic"})  # fmt: skip
    assert read_rows(cloud_destination, ["dt", "x"]) == sorted([("2026-11-22", 1), ("x=y", 20), (None, 3)], key=repr)
    assert has_success(cloud_destination)


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_unpartitioned_frames_are_written_in_every_format(destination: str, format: str) -> None:
    """Polars 1.44 and 2 refuse a ``PartitionBy`` with neither a key nor a limit: one file, all the rows."""
    frame = pl.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    summary = mcp.write(frame, destination, format=format)
    assert summary is not None and len(summary.filenames) == 1
    mcp.write(frame.lazy().filter(pl.col("x") > 1), destination, format=format, mode="append")
    assert read_rows(destination, ["x", "y"], format) == [(1, "a"), (2, "b"), (2, "b"), (3, "c"), (3, "c")]
