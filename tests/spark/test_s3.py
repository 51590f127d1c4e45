"""PySpark writes to S3 (moto) through the ``upload`` protocol: the helper and the ``manifest`` data source.

Spark's Python workers never see the test process's fsspec defaults, so each write passes moto's
``storage_options`` as a user passes an endpoint and credentials; ``protocol`` is left at ``auto``, which is
``upload`` on ``s3://``. The pyspark wheel has no S3 connector, so the rows are read back with pyarrow through s3fs.
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
from manifest_committer.store.s3 import open_s3_store
from tests.fixtures.emulators import Emulator
from tests.spark.test_write import ROWS, fail_first_attempt, frame

pytestmark = [pytest.mark.spark, pytest.mark.s3]

register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


def _read_back(moto: Emulator, url: str) -> list[tuple[Any, ...]]:
    """Every row under ``url``, ``country`` taken from the Hive-style partition directories."""
    dataset = ds.dataset(
        url.removeprefix("s3://"), filesystem=moto.filesystem(), format="parquet", partitioning="hive",
        exclude_invalid_files=False, ignore_prefixes=["_", "."],
    )  # fmt: skip
    table = dataset.to_table(columns=["id", "name", "country"])
    rows = zip(*(table.column(name).to_pylist() for name in ("id", "name", "country")), strict=True)
    return sorted(rows, key=lambda row: row[0])


def _leftovers(moto: Emulator, bucket: str, url: str) -> tuple[list[str], list[str]]:
    """The job state under ``_temporary`` and the incomplete uploads of the bucket: both must be empty."""
    opened = open_s3_store(url, moto.storage_options)
    store, root = opened.store, opened.path
    fs = moto.filesystem()
    state = list(fs.find(f"{root}/_temporary")) if fs.exists(f"{root}/_temporary") else []
    return state, [upload.path for upload in store.list_uploads(f"{bucket}/")]


def test_helper_with_a_retried_task_commits_exactly_once_with_no_upload_left(
    spark: SparkSession, moto_s3: Emulator, s3_bucket: str
) -> None:
    """``mcs.write`` on S3: one task's first attempt fails after writing rows (its upload must be aborted)."""
    url = f"s3://{s3_bucket}/events"
    df = frame(spark).withColumn("id", functions.udf(fail_first_attempt, LongType())("id"))
    success = mcs.write(
        df,
        url,
        partition_by=["country"],
        mode="errorifexists",
        storage_options=moto_s3.storage_options,
        options={"maxRecordsPerFile": "4"},
    )
    assert success is not None and success.success and success.committer == "upload"
    assert _read_back(moto_s3, url) == sorted(ROWS)
    data_files = [path for path in moto_s3.filesystem().find(f"{s3_bucket}/events") if path.endswith(".parquet")]
    assert len(data_files) == len(success.filenames) >= 10  # 40 rows, at most 4 per file
    assert _leftovers(moto_s3, s3_bucket, url) == ([], [])
    with pytest.raises(mcs.DestinationExistsError, match=url):
        mcs.write(frame(spark), url, storage_options=moto_s3.storage_options)


def test_data_source_appends_then_overwrites_on_s3(spark: SparkSession, moto_s3: Emulator, s3_bucket: str) -> None:
    """``df.write.format("manifest")`` with ``storage_options`` as an option: append, then overwrite."""
    url = f"s3://{s3_bucket}/table"
    mcs.register(spark)

    def save(rows: list[tuple[Any, ...]], mode: str) -> None:
        (
            frame(spark, rows)
            .write.format("manifest")
            .option("format", "parquet")
            .option("partitionBy", "country")
            .option("storage_options", orjson.dumps(moto_s3.storage_options).decode())
            .mode(mode)
            .save(url)
        )

    save(ROWS, "append")
    assert _read_back(moto_s3, url) == sorted(ROWS)
    success = mc.SuccessData.load(f"{url}/_SUCCESS", storage_options=moto_s3.storage_options)
    assert success.success and success.committer == "upload"
    save(ROWS[:8], "overwrite")
    assert _read_back(moto_s3, url) == sorted(ROWS[:8])
    assert _leftovers(moto_s3, s3_bucket, url) == ([], [])
