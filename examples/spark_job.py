"""A real PySpark job: generate events with ``spark.range``, write them partitioned by day and country through
``manifest_committer.spark.write``, read them back with Spark's own Parquet reader and print the ``_SUCCESS``
summary.

Run: ``python examples/spark_job.py [--rows N] [--dest DIR]`` (exit status 1 if the read-back count differs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from pyspark.sql import DataFrame, SparkSession, functions

import manifest_committer as mc
import manifest_committer.spark as mcs
from manifest_committer.cli import format_success

COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "GB", "ES")
DAYS = 7
FIRST_DAY = "2026-11-15"


def events(spark: SparkSession, rows: int) -> DataFrame:
    """``rows`` events spread over ``DAYS`` days and ``len(COUNTRIES)`` countries, computed from the row id."""
    ident = functions.col("id")
    countries = functions.array(*[functions.lit(country) for country in COUNTRIES])
    return spark.range(rows).select(
        ident.alias("event_id"),
        functions.date_add(functions.lit(FIRST_DAY).cast("date"), (ident % DAYS).cast("int"))
        .cast("string")
        .alias("dt"),
        functions.element_at(
            countries, functions.pmod(functions.xxhash64(ident), functions.lit(len(COUNTRIES))).cast("int") + 1
        ).alias("country"),
        functions.pmod(functions.xxhash64(ident, functions.lit("user")), functions.lit(100_000)).alias("user_id"),
        functions.round(functions.rand(seed=42) * 500 + 1, 2).alias("amount"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows to generate (default 3,000,000)")
    parser.add_argument("--dest", default="example-output/spark-events", help="destination directory or URL")
    args = parser.parse_args(argv)
    dest = args.dest if "://" in args.dest else os.path.abspath(args.dest)
    # Spark's Python workers run `python3` from PATH unless told otherwise; this interpreter has the library.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("manifest-committer example")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        df = events(spark, args.rows)
        print(f"Writing {args.rows:,} rows to {dest}, partitioned by dt and country")
        started = time.monotonic()
        mcs.write(df, dest, format="parquet", partition_by=["dt", "country"], mode="overwrite")
        print(f"Committed in {time.monotonic() - started:.1f} s")
        read = spark.read.parquet(dest).count()
    finally:
        spark.stop()

    print(f"Read back {read:,} rows with spark.read.parquet (expected {args.rows:,})")
    success_path = dest.rstrip("/") + "/_SUCCESS"
    print(format_success(mc.SuccessData.load(success_path), success_path, max_filenames=5))
    if read != args.rows:
        print(f"row count mismatch: wrote {args.rows:,}, read {read:,}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
