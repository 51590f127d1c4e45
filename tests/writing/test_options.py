"""Writer options are case-insensitive, as Spark's are; one that no writer knows is an error naming it, with the
option (or committer key) meant."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import manifest_committer as mc
import manifest_committer.arrow as mca
import manifest_committer.polars as mcp
from manifest_committer.spark.datasource import WriteSettings

TABLE = pa.table({"x": [1, 2, 3]})
MISTYPED = [
    ("maxrecordperfile", "maxRecordsPerFile"),
    ("MaxRecordPerFile", "maxRecordsPerFile"),
    ("partitionOverwriteMod", "partitionOverwriteMode"),
    ("maxOpenFile", "maxOpenFiles"),
    ("io.threads", "mapreduce.manifest.committer.io.threads"),
    ("mapreduce.manifest.commiter.io.threads", "mapreduce.manifest.committer.io.threads"),
]


@pytest.mark.parametrize(("option", "meant"), MISTYPED)
def test_an_unknown_writer_option_names_the_one_meant(tmp_path: Path, option: str, meant: str) -> None:
    dest = str(tmp_path / "out")
    with pytest.raises(mc.ConfigError, match=f"did you mean `{meant}`") as raised:
        mca.write(TABLE, dest, options={option: "1"})
    assert repr(option.lower()) in str(raised.value) and dest in str(raised.value)
    with pytest.raises(mc.ConfigError, match=f"did you mean `{meant}`"):
        mcp.write(pl.from_arrow(TABLE), dest, options={option: "1"})
    assert not Path(dest).exists()


@pytest.mark.parametrize(("option", "meant"), MISTYPED)
def test_an_unknown_data_source_option_names_the_one_meant(tmp_path: Path, option: str, meant: str) -> None:
    with pytest.raises(mc.ConfigError, match=f"did you mean `{meant}`"):
        WriteSettings.from_options({"path": str(tmp_path), option: "1"}, overwrite=False)


def test_an_option_in_any_case_is_the_option(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    mca.write(TABLE, dest, options={"MAXRECORDSPERFILE": "1"})
    assert len(list(Path(dest).glob("*.parquet"))) == 3
    assert pq.read_table(dest).num_rows == 3
