"""Spark writes through the ``manifest`` data source into Azurite and fake-gcs-server.

Spark's Python workers are separate processes that never see the test process's fsspec defaults, so every
write passes the emulator's ``storage_options`` explicitly, the way a user passes credentials and endpoints:
these tests show that they reach the driver and every executor. Spark itself has no Azure or GCS connector in
the pyspark wheel, so the output is read back with pyarrow through the emulator's fsspec filesystem.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
import pyarrow.dataset as ds
import pytest
from pyspark.cloudpickle import register_pickle_by_value
from pyspark.sql import SparkSession, functions
from pyspark.sql.types import LongType

import manifest_committer as mc
import manifest_committer.spark as mcs
from manifest_committer.store import open_store
from tests.fixtures.emulators import Emulator
from tests.spark.test_write import ROWS, fail_first_attempt, frame

pytestmark = pytest.mark.spark

register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


def _emulator(request: pytest.FixtureRequest, url: str) -> Emulator:
    emulator: Emulator = request.getfixturevalue("azurite" if url.startswith("abfs://") else "fake_gcs")
    return emulator


def _read_back(emulator: Emulator, url: str) -> list[tuple[Any, ...]]:
    """Every row under ``url``, its ``country`` column taken from the Hive-style partition directories."""
    fs = emulator.filesystem()
    root = open_store(url).path
    dataset = ds.dataset(
        root, filesystem=fs, format="parquet", partitioning="hive", exclude_invalid_files=False,
        ignore_prefixes=["_", "."],
    )  # fmt: skip
    table = dataset.to_table(columns=["id", "name", "country"])
    rows = zip(*(table.column(name).to_pylist() for name in ("id", "name", "country")), strict=True)
    return sorted(rows, key=lambda row: row[0])


def _job_state(emulator: Emulator, url: str) -> list[str]:
    fs = emulator.filesystem()
    temporary = f"{open_store(url).path}/_temporary"
    return list(fs.find(temporary)) if fs.exists(temporary) else []


def test_partitioned_append_then_overwrite_through_the_format(
    spark: SparkSession, cloud_destination: str, request: pytest.FixtureRequest
) -> None:
    """``df.write.format("manifest")`` with ``storage_options`` as an option, on each emulator."""
    emulator = _emulator(request, cloud_destination)
    mcs.register(spark)

    def save(rows: list[tuple[Any, ...]], mode: str) -> None:
        (
            frame(spark, rows)
            .write.format("manifest")
            .option("format", "parquet")
            .option("partitionBy", "country")
            .option("storage_options", orjson.dumps(emulator.storage_options).decode())
            .mode(mode)
            .save(cloud_destination)
        )

    save(ROWS[:20], "append")
    save(ROWS[20:], "append")
    assert _read_back(emulator, cloud_destination) == sorted(ROWS)
    opened = open_store(cloud_destination)
    store, root = opened.store, opened.path
    partitions = {entry.path.rsplit("/", 1)[-1] for entry in store.list_dir(root) if entry.is_dir}
    assert "country=a b%2Fc%3Dd%25" in partitions and "country=__HIVE_DEFAULT_PARTITION__" in partitions
    success = mc.SuccessData.load(f"{cloud_destination}/_SUCCESS")
    assert success.success and success.job_id.startswith("spark-")

    save(ROWS[:8], "overwrite")
    assert _read_back(emulator, cloud_destination) == sorted(ROWS[:8])
    assert _job_state(emulator, cloud_destination) == []


def test_helper_with_a_retried_task_writes_exactly_once(
    spark: SparkSession, cloud_destination: str, request: pytest.FixtureRequest
) -> None:
    """``mcs.write`` with ``storage_options``; one task's first attempt fails after writing some rows."""
    emulator = _emulator(request, cloud_destination)
    df = frame(spark).withColumn("id", functions.udf(fail_first_attempt, LongType())("id"))
    mcs.write(
        df,
        cloud_destination,
        partition_by=["country"],
        mode="errorifexists",
        storage_options=emulator.storage_options,
        options={"maxRecordsPerFile": "4"},
    )
    assert _read_back(emulator, cloud_destination) == sorted(ROWS)
    fs = emulator.filesystem()
    data_files = [path for path in fs.find(open_store(cloud_destination).path) if path.endswith(".parquet")]
    success = mc.SuccessData.load(f"{cloud_destination}/_SUCCESS")
    assert len(data_files) == len(success.filenames) >= 10  # 40 rows, at most 4 per file
    assert _job_state(emulator, cloud_destination) == []
    with pytest.raises(mcs.DestinationExistsError, match=cloud_destination):
        mcs.write(frame(spark), cloud_destination, storage_options=emulator.storage_options)
