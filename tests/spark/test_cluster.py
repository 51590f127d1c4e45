"""Writes on a Spark standalone cluster: executors in their own JVMs and Python processes, on two hosts.

Each application runs in its own driver process (``tests/spark/cluster_job.py``); the test process watches the
attempt markers the tasks leave, kills executors, and checks the destination. Starting an application (a driver
JVM, two executor JVMs and their Python workers) costs more than a write, so the writes that need no executor
killed share one application (``speculation_writes``); the write whose executor is killed has its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.parse
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from tests.fixtures.committing import task_side_name
from tests.fixtures.spark_cluster import (
    WORKER_HOSTS,
    SparkCluster,
    executor_of,
    finish_cluster_job,
    start_cluster_job,
)
from tests.spark.cluster_job import rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILE_NAME = re.compile(r"^part-(?P<partition>\d{5})-.+-a(?P<attempt>\d+)-c\d{3}\.[a-z.]+$")
JOB_MODULE = "tests.spark.cluster_job"
PROTOCOLS = ("manifest", "v1", "v2", "transactional")
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "1s",
    "spark.speculation.interval": "100ms",
    # Without delay scheduling a free executor takes the next task at once: the partitioned write's short tasks
    # would otherwise all wait for (and run on) the one executor that holds the shuffle output.
    "spark.locality.wait": "0s",
}
SHARED_TIMEOUT = 540.0
"""The shared application's five writes (four wait for a speculative copy), on two busy cores."""


def run_arguments(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    markers = tmp_path / "markers"
    markers.mkdir(parents=True)
    arguments: dict[str, Any] = {
        "out": str(tmp_path / "out"),
        "markers": str(markers),
        "result": str(tmp_path / "result.json"),
        "slow_partitions": [],
        "sleep_seconds": 0,
        "conf": {},
    }
    arguments.update(overrides)
    return arguments


def attempts(markers: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in markers.glob("*.json")]


def attempts_in_output(out: Path) -> dict[int, set[int]]:
    """Spark task attempt ids whose files are in the destination, by partition; fails on unknown files."""
    found: dict[int, set[int]] = defaultdict(set)
    # What a reader may read: every data file, or under the transactional protocol the committed ones (a killed
    # copy may still add an uncommitted straggler after the job commit), by the name the task wrote.
    data = [urllib.parse.unquote(url).rsplit("/", 1)[1] for url in mc.committed_files(str(out))]
    assert data
    for name in data:
        path = Path(task_side_name(name))
        match = FILE_NAME.match(path.name)
        assert match, f"unexpected file in the destination: {path}"
        found[int(match["partition"])].add(int(match["attempt"]))
    return dict(found)


def assert_row_exact(result: dict[str, object]) -> None:
    read = result["rows"]
    assert isinstance(read, list)
    assert sorted(tuple(row) for row in read) == sorted(rows())


# The executor is killed in an application of its own, before the shared one: what a killed speculative attempt
# leaves running (a Python worker asleep) cannot delay its start.
def test_executor_killed_while_tasks_write(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    arguments = run_arguments(tmp_path, slow_partitions=[0, 1, 2, 3], sleep_seconds=4)
    markers = Path(arguments["markers"])
    process = start_cluster_job(spark_cluster, JOB_MODULE, arguments)
    deadline = time.monotonic() + 90
    victim: dict[str, Any] | None = None
    while victim is None and time.monotonic() < deadline and process.poll() is None:
        sleeping = [markers / f"{path.stem}.json" for path in markers.glob("*.sleeping")]
        if sleeping:
            victim = json.loads(sleeping[0].read_text())
        else:
            time.sleep(0.1)
    assert victim is not None, "no first attempt reached its sleep"
    executor = executor_of(victim["pid"])
    os.kill(executor, signal.SIGKILL)
    job = finish_cluster_job(process, Path(arguments["result"]))

    assert_row_exact(job.result)
    ran = attempts(markers)
    # Killing the executor also loses the shuffle output it held, so Spark may rerun the write as a new stage
    # attempt (attempt numbers start at 0 again) rather than as a second attempt of the task: compare ids.
    retries = [a for a in ran if a["partition"] == victim["partition"] and a != victim]
    assert retries, f"Spark never relaunched partition {victim['partition']}: {ran}"
    in_output = attempts_in_output(Path(arguments["out"]))
    assert sorted(in_output) == [0, 1, 2, 3]
    assert all(len(ids) == 1 for ids in in_output.values()), in_output
    assert victim["task_attempt_id"] not in in_output[victim["partition"]]


@pytest.fixture(scope="module")
def speculation_writes(spark_cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One application with speculation on, on the cluster: the partitioned write, then for each protocol a write
    whose first attempt of partition 0 sleeps until Spark launches a copy. Name -> (arguments, result)."""
    root = tmp_path_factory.mktemp("cluster-writes")
    writes = {"partitioned": run_arguments(root / "partitioned")}
    for protocol in PROTOCOLS:
        writes[protocol] = run_arguments(root / protocol, slow_partitions=[0], sleep_seconds=40, protocol=protocol)
    process = start_cluster_job(spark_cluster, JOB_MODULE, {"conf": SPECULATION, "writes": list(writes.values())})
    last = Path(writes[PROTOCOLS[-1]]["result"])
    finish_cluster_job(process, last, timeout=SHARED_TIMEOUT)
    return {name: (arguments, json.loads(Path(arguments["result"]).read_text())) for name, arguments in writes.items()}


def shared_write(speculation_writes: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, object]]:
    """The arguments and the result of one write of the shared application; fails if that write failed."""
    arguments, result = speculation_writes[name]
    assert "error" not in result, f"the {name} write failed:\n{result['error']}"
    return arguments, result


@pytest.mark.timeout(SHARED_TIMEOUT + 120)
def test_partitioned_write_on_the_cluster(speculation_writes: dict[str, Any]) -> None:
    arguments, result = shared_write(speculation_writes, "partitioned")
    assert_row_exact(result)
    out = Path(arguments["out"])
    assert (out / "_SUCCESS").is_file()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "country=DE",
        "country=FR",
        "country=__HIVE_DEFAULT_PARTITION__",
        "country=a b%2Fc%3Dd%25",
    ]
    ran = attempts(Path(arguments["markers"]))
    assert {attempt["host"] for attempt in ran} == set(WORKER_HOSTS), f"not both executors wrote: {ran}"
    assert {p: len(ids) for p, ids in attempts_in_output(out).items()} == {0: 1, 1: 1, 2: 1, 3: 1}


@pytest.mark.timeout(SHARED_TIMEOUT + 120)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_speculative_copy_on_the_other_host(speculation_writes: dict[str, Any], protocol: str) -> None:
    arguments, result = shared_write(speculation_writes, protocol)

    assert_row_exact(result)
    ran = [a for a in attempts(Path(arguments["markers"])) if a["partition"] == 0]
    assert sorted(a["attempt_number"] for a in ran) == [0, 1], ran
    assert len({a["host"] for a in ran}) == 2, f"the copy ran on the host of the original: {ran}"
    in_output = attempts_in_output(Path(arguments["out"]))
    assert sorted(in_output) == [0, 1, 2, 3]
    assert all(len(ids) == 1 for ids in in_output.values()), in_output
    copy = next(a for a in ran if a["attempt_number"] == 1)
    assert in_output[0] == {copy["task_attempt_id"]}
