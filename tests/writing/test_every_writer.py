"""Every writer (pyarrow, Polars, Dask, Ray, PySpark) without partition columns, in every format and every save
mode, on local disk and on Azurite: the rows read back after each step are exactly the rows the modes promise.
(``tests/cloud/test_frameworks_s3.py`` writes with each framework to S3, through the ``upload`` protocol.)

One destination per writer, format and store runs through the modes in turn: errorifexists, errorifexists again
(refused), ignore (nothing written), append, overwrite, and overwrite with ``partitionOverwriteMode=dynamic``,
which without partition columns replaces everything, as in Spark. Dask and Ray run on the module's clusters
(``tests.fixtures.frameworks``), PySpark on the session's ``spark``; their workers reach Azurite through the
storage options each write passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

import manifest_committer as mc
from manifest_committer.success_data import SuccessData
from manifest_committer.writing import DestinationExistsError
from tests.fixtures.emulators import Emulator, fresh_root
from tests.fixtures.writing import has_success, read_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ["x", "y"]


@dataclass(frozen=True)
class Writer:
    """One framework's ``write`` function, and how its data is made from a ``pyarrow.Table``."""

    write: Callable[..., SuccessData | None]
    data: Callable[[pa.Table], Any]


def rows(start: int, count: int) -> pa.Table:
    return pa.table({"x": list(range(start, start + count)), "y": [f"row {i}" for i in range(start, start + count)]})


def expected(*tables: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(((row["x"], row["y"]) for table in tables for row in table.to_pylist()), key=repr)  # as read_rows


def arrow_writer() -> Writer:
    import manifest_committer.arrow as mca

    return Writer(mca.write, lambda table: table)


def polars_writer() -> Writer:
    import polars as pl

    import manifest_committer.polars as mcp

    return Writer(mcp.write, pl.from_arrow)


def dask_writer() -> Writer:
    import dask.dataframe as dd

    import manifest_committer.dask as mcd

    return Writer(mcd.write, lambda table: dd.from_pandas(table.to_pandas(), npartitions=2))


def ray_writer() -> Writer:
    import ray

    import manifest_committer.ray as mcr

    return Writer(mcr.write, lambda table: ray.data.from_arrow(table).repartition(2))


def spark_writer(spark: SparkSession) -> Writer:
    import manifest_committer.spark as mcs

    return Writer(mcs.write, lambda table: spark.createDataFrame(table.to_pandas()).repartition(2))


WRITERS = [
    pytest.param("arrow"),
    pytest.param("polars"),
    pytest.param("dask", marks=pytest.mark.slow),
    pytest.param("ray", marks=pytest.mark.slow),
    pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow]),
]


@pytest.fixture(params=WRITERS)
def writer(request: pytest.FixtureRequest) -> Writer:
    """One framework's writer; the cluster or session it needs is up."""
    name = request.param
    if name == "dask":
        request.getfixturevalue("dask_client")
        return dask_writer()
    if name == "ray":
        request.getfixturevalue("ray_cluster")
        return ray_writer()
    if name == "spark":
        return spark_writer(request.getfixturevalue("spark"))
    return arrow_writer() if name == "arrow" else polars_writer()


@pytest.fixture(params=["local"])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh destination on local disk or Azurite (``azure``, where a test asks for it), and the storage options
    that reach it from any process."""
    if request.param == "local":
        yield str(tmp_path / "out"), {}
        return
    azurite: Emulator = request.getfixturevalue("azurite")
    with fresh_root(azurite) as container:
        yield f"abfs://{container}/out", dict(azurite.storage_options)


# Every format on local disk; on Azurite one format: how a writer's workers reach the store (the storage options
# each write passes) does not hang on the format, and the formats' bytes do not hang on the store.
@pytest.mark.parametrize(
    ("destination", "format"),
    [
        ("local", "parquet"),
        ("local", "csv"),
        ("local", "json"),
        pytest.param("azure", "parquet", marks=pytest.mark.azure),
    ],
    indirect=["destination"],
)
def test_unpartitioned_writes_in_every_save_mode(
    writer: Writer, destination: tuple[str, dict[str, Any]], format: str
) -> None:
    url, storage = destination
    committer = mc.ManifestCommitter.committer_name  # protocol "auto" is manifest on every store but S3

    def write(table: pa.Table, mode: str, options: Mapping[str, str] | None = None) -> SuccessData | None:
        data = writer.data(table)
        return writer.write(data, url, format=format, mode=mode, options=options, storage_options=storage)

    first, second, third, fourth = rows(0, 6), rows(100, 4), rows(200, 3), rows(300, 5)
    summary = write(first, "errorifexists")
    assert summary is not None and summary.success and summary.committer == committer
    assert read_rows(url, COLUMNS, format) == expected(first)
    assert has_success(url)
    with pytest.raises(DestinationExistsError, match="errorifexists"):
        write(second, "errorifexists")
    assert write(second, "ignore") is None
    assert read_rows(url, COLUMNS, format) == expected(first)
    summary = write(second, "append")
    assert summary is not None and summary.success
    assert read_rows(url, COLUMNS, format) == expected(first, second)
    write(third, "overwrite")
    assert read_rows(url, COLUMNS, format) == expected(third)
    summary = write(fourth, "overwrite", {"partitionOverwriteMode": "dynamic"})
    assert summary is not None and summary.success and summary.committer == committer
    assert read_rows(url, COLUMNS, format) == expected(fourth)
