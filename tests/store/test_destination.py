"""Destinations that are refused before anything is written or deleted: empty, blank, a store's root, a mistyped
URL, not a string; and ids too long for a file name. Each runs in a working directory holding a file of its own,
which every refused call must leave alone."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import manifest_committer as mc
import manifest_committer.arrow as mca
import manifest_committer.dask as mcd
import manifest_committer.polars as mcp
from manifest_committer.cli import main
from manifest_committer.store import store_bindings

SENTINEL = "the-users-own-file.txt"
EMPTY_OR_ROOT = ["", "   ", "\t", "/", "//", "/tmp/..", "file:///", "file:/", "local://", "s3://", "gs://", "memory://"]
MISTYPED = [
    "s3:/bucket/x",
    "s3a:/bucket/x",
    "gs:/bucket/x",
    "abfs:/container/x",
    "s3:bucket/x",
    "file//tmp/x",
    "gs//b/x",
]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory holding one file of the user's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / SENTINEL).write_text("keep me")
    yield tmp_path
    assert untouched(tmp_path), f"the working directory changed: {sorted(p.name for p in tmp_path.iterdir())}"


def untouched(directory: Path) -> bool:
    return [p.name for p in directory.iterdir()] == [SENTINEL] and (directory / SENTINEL).read_text() == "keep me"


def test_an_empty_destination_of_an_overwrite_deletes_nothing(cwd: Path) -> None:
    table = pa.table({"x": [1, 2]})
    with pytest.raises(mc.ConfigError, match="empty"):
        mca.write(table, "", mode="overwrite")
    with pytest.raises(mc.ConfigError, match="empty"):
        mcp.write(pl.DataFrame({"x": [1]}), "", mode="overwrite")
    frame = dd.from_pandas(pd.DataFrame({"x": [1]}), npartitions=1)  # type: ignore[no-untyped-call]
    with pytest.raises(mc.ConfigError, match="empty"):
        mcd.write(frame, "", mode="overwrite")
    with pytest.raises(mc.ConfigError, match="empty"):
        mc.create_committer("", "job-1")


@pytest.mark.parametrize("url", EMPTY_OR_ROOT)
@pytest.mark.parametrize("protocol", ["manifest", "transactional", "v1", "auto"])
def test_an_empty_blank_or_root_destination_is_refused(cwd: Path, url: str, protocol: str) -> None:
    with pytest.raises(mc.ConfigError, match=r"empty|root") as raised:
        mc.create_committer(url, "job-1", protocol=protocol)
    assert repr(url) in str(raised.value)


@pytest.mark.parametrize("url", MISTYPED)
def test_a_mistyped_url_is_refused_saying_what_to_write(cwd: Path, url: str) -> None:
    with pytest.raises(mc.ConfigError, match="looks like") as raised:
        mc.create_committer(url, "job-1", protocol="manifest")
    message = str(raised.value)
    assert repr(url) in message and "://" in message and f"./{url}" in message
    with pytest.raises(mc.ConfigError, match="looks like"):
        mca.write(pa.table({"x": [1]}), url, mode="append")


@pytest.mark.parametrize(
    "call",
    [
        mc.committed_files,
        lambda url: mc.vacuum(url, 0.0),
        mc.rollback,
        lambda url: mc.ManifestCommitter(url, "job-1"),
        lambda url: mc.create_committer(url, "job-1", protocol="upload"),
    ],
    ids=["committed_files", "vacuum", "rollback", "ManifestCommitter", "upload"],
)
@pytest.mark.parametrize("url", ["", "/", "s3:/bucket/x", "file//tmp/x"])
def test_every_entry_refuses_them(cwd: Path, url: str, call: Callable[[str], Any]) -> None:
    with pytest.raises(mc.ConfigError):
        call(url)


@pytest.mark.parametrize("command", [["status"], ["commit", "--job", "j1"], ["abort", "--job", "j1"], ["rollback"]])
@pytest.mark.parametrize("url", ["", "s3:/bucket/x"])
def test_the_command_line_refuses_them_in_one_line(
    cwd: Path, url: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command[0], url, *command[1:]]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and repr(url) in error


def test_a_destination_that_is_not_a_string_is_a_type_error_naming_the_parameter(cwd: Path) -> None:
    with pytest.raises(TypeError, match="destination: expected a path or URL") as raised:
        mc.create_committer(None, "job-1")  # type: ignore[arg-type]
    assert isinstance(raised.value, mc.ConfigError)
    with pytest.raises(TypeError, match="url: expected a path or URL"):
        mca.write(pa.table({"x": [1]}), None, mode="append")  # type: ignore[arg-type]


def test_an_unknown_scheme_says_first_which_one_was_meant(cwd: Path) -> None:
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        mc.create_committer("s4://bucket/x", "job-1")
    first_line = str(raised.value).splitlines()[0]
    assert first_line == "s4://bucket/x: unknown scheme s4://; did you mean s3://?"


def test_a_job_id_too_long_for_a_file_name_is_refused_naming_it(cwd: Path) -> None:
    job_id = "j" * 300
    with pytest.raises(
        mc.ConfigError, match=r"job id 'j+'\.\.\. \(300 characters\) is not a valid id: use at most 200"
    ):
        mc.create_committer(str(cwd / "out"), job_id).setup_job()
    assert not (cwd / "out").exists()
    committer = mc.create_committer(str(cwd / "out"), "j" * 200)  # the longest id allowed works end to end
    committer.setup_job()
    committer.abort_job()
    shutil.rmtree(cwd / "out")


@pytest.mark.parametrize(
    "url",
    ["s3://bucket", "s3://bucket/", "gs://bucket/x", "memory://x", "file:/tmp/x", "file:///tmp/x", "./s3:/x", "."],
)
def test_legitimate_destinations_pass(url: str) -> None:
    """A bucket's root is a destination, as in Hadoop; a local directory named like a URL is written with ./."""
    assert store_bindings().check(url) == url
