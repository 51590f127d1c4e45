"""One write on the standalone cluster, run as ``python -m tests.spark.cluster_job <master> <arguments JSON>``.

Its own process, because a process holds one SparkContext and the test process may hold the local one. Every
task records its attempts in ``markers`` (one JSON file per task attempt: partition, attempt number, Spark's
task attempt id, the Python worker's pid and the worker host); tasks of the listed ``slow_partitions`` sleep
``sleep_seconds`` in their first attempt, halfway through their rows. The rows read back go to ``result``.

With ``writes`` (a list of such arguments: ``out``, ``markers``, ``result``, ``slow_partitions``,
``sleep_seconds``, ``protocol``), one application runs every write in turn, on the same executors: the cluster's
start-up is paid once. A write that fails writes its error to its ``result`` and the next one still runs.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import functions
from pyspark.sql.types import LongType, StringType, StructField, StructType

import manifest_committer.spark as mcs
from tests.fixtures.spark_cluster import WORKER_HOSTS, cluster_session_builder

SCHEMA = StructType(
    [StructField("id", LongType()), StructField("name", StringType()), StructField("country", StringType())]
)
PARTITIONS = 4
ROWS_PER_PARTITION = 200


def rows() -> list[tuple[Any, ...]]:
    return [(i, f"name {i}", ["DE", "FR", "a b/c=d%", None][i % 4]) for i in range(PARTITIONS * ROWS_PER_PARTITION)]


def pace(markers: str, slow_partitions: list[int], sleep_seconds: float) -> Any:
    """A UDF passing ``id`` through that records each task attempt and slows down chosen first attempts."""

    def paced(value: int) -> int:
        context = TaskContext.get()
        assert context is not None
        seen: dict[int, int] = sys.__dict__.setdefault("_manifest_committer_rows_seen", {})
        attempt = context.taskAttemptId()
        seen[attempt] = seen.get(attempt, 0) + 1
        if seen[attempt] == 1:
            record = {
                "partition": context.partitionId(),
                "attempt_number": context.attemptNumber(),
                "task_attempt_id": attempt,
                "pid": os.getpid(),
                "host": os.environ.get("SPARK_LOCAL_IP"),
            }
            Path(markers, f"{attempt}.json").write_text(json.dumps(record))
        slow = context.partitionId() in slow_partitions and context.attemptNumber() == 0
        if slow and seen[attempt] == ROWS_PER_PARTITION // 2:
            Path(markers, f"{attempt}.sleeping").touch()
            time.sleep(sleep_seconds)
        return value

    return functions.udf(paced, LongType())


def run_write(session: Any, write: dict[str, Any], started: float) -> None:
    """One write of the application and its read back; the outcome goes to the write's ``result`` file."""
    timings = {"start": time.monotonic() - started}
    try:
        udf = pace(write["markers"], write["slow_partitions"], write["sleep_seconds"])
        frame = session.createDataFrame(rows(), SCHEMA).repartition(PARTITIONS).withColumn("id", udf("id"))
        protocol = write.get("protocol", "auto")
        mcs.write(frame, write["out"], partition_by=["country"], mode="append", protocol=protocol)
        timings["write"] = time.monotonic() - started
        read = mcs.read(session, write["out"], schema=SCHEMA)  # the committed files, under every protocol
        rows_read = [list(row) for row in read.select("id", "name", "country").collect()]
        Path(write["result"]).write_text(json.dumps({"rows": rows_read, "timings": timings}))
    except Exception:
        Path(write["result"]).write_text(json.dumps({"error": traceback.format_exc(), "timings": timings}))


def wait_for_executors(session: Any, timeout: float = 120.0) -> None:
    """Waits (bounded) until an executor on every worker host is registered.

    A session starts once both executors registered or ``maxRegisteredResourcesWaitingTime`` passed; on a busy
    machine, or when a worker still frees the cores of the application before, one executor can come later, and
    the first write would then run on one host alone."""
    status = session.sparkContext._jsc.sc().getExecutorMemoryStatus()  # the driver's block manager too
    deadline = time.monotonic() + timeout
    while status.size() < len(WORKER_HOSTS) + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        status = session.sparkContext._jsc.sc().getExecutorMemoryStatus()


def main(master_url: str, arguments: dict[str, Any]) -> None:
    started = time.monotonic()
    session = cluster_session_builder(master_url, "manifest-committer-cluster-test", arguments["conf"]).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    wait_for_executors(session)
    try:
        for write in arguments.get("writes", [arguments]):
            run_write(session, write, started)
    finally:
        session.stop()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
