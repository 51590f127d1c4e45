"""The Spark helper on a standalone cluster whose worker runs on another (simulated) host: the master and the
driver in one network namespace (192.0.2.1), the worker, its executor and the executor's Python workers in
another (192.0.2.2). The helper passes ``spark.driver.host`` on, so the tasks' markers cross to the driver's
marker server: batched, not one direct marker per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.markers import MarkerPaths, read_markers
from manifest_committer.paths import JobPaths
from manifest_committer.protocols.transactional.readers import store_retry_policy
from manifest_committer.store import open_store
from tests.fixtures.network_namespaces import DRIVER_ADDRESS, WORKER_ADDRESS, SimulatedHosts, create_hosts
from tests.fixtures.spark_cluster import CLUSTER_ID_VARIABLE, SPARK_HOME, _java, _stop

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MASTER_PORT = 7077
START_TIMEOUT = 120.0

DRIVER = f"""
import json, os, sys
from pyspark.sql import SparkSession
import manifest_committer.spark as mcs
master, out, result = sys.argv[1:4]
session = (
    SparkSession.builder.master(master).appName("manifest-committer-hosts")
    .config("spark.driver.host", "{DRIVER_ADDRESS}").config("spark.driver.bindAddress", "{DRIVER_ADDRESS}")
    .config("spark.executor.cores", "1").config("spark.cores.max", "1").config("spark.executor.memory", "512m")
    .config("spark.driver.memory", "512m").config("spark.ui.enabled", "false")
    .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
    .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "90s")
    .config("spark.sql.shuffle.partitions", "4").config("spark.sql.adaptive.enabled", "false")
    .config("spark.pyspark.python", sys.executable)
    .getOrCreate()
)
session.sparkContext.setLogLevel("ERROR")
hosts = sorted(set(session.sparkContext.parallelize(range(4), 4).map(
    lambda _: os.environ.get("SPARK_LOCAL_IP")).collect()))
frame = session.createDataFrame([(i, "c%d" % (i % 3)) for i in range(400)], "id long, c string").repartition(4)
summary = mcs.write(frame, out, partition_by=["c"], mode="append", protocol="transactional",
                    options={{"mapreduce.fileoutputcommitter.cleanup.skipped": "true"}})
with open(result, "w") as handle:
    json.dump({{"task_hosts": hosts, "success": summary.success, "files": len(summary.filenames)}}, handle)
session.stop()
"""


def _wait_for(log: Path, text: str, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        failed = [process.args for process in processes if process.poll() is not None]
        assert not failed, f"a Spark daemon exited at start-up: {failed}\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} not in {log} after {START_TIMEOUT} s")


@pytest.fixture
def cluster_on_two_hosts(tmp_path: Path) -> Iterator[tuple[SimulatedHosts, str, str]]:
    """A master on the driver's host and one worker on the other; (hosts, master URL, cluster id)."""
    cluster_id = uuid.uuid4().hex
    base = {**os.environ, "SPARK_HOME": str(SPARK_HOME), CLUSTER_ID_VARIABLE: cluster_id}
    base.update(PYSPARK_PYTHON=sys.executable, SPARK_SCALA_VERSION="2.13")
    processes: list[subprocess.Popen[bytes]] = []
    with create_hosts() as hosts:

        def launch(name: str, namespace: str, address: str, command: list[str]) -> Path:
            log = tmp_path / f"{name}.log"
            with log.open("wb") as handle:
                processes.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", namespace, *command],
                        env={**base, "SPARK_LOCAL_IP": address},
                        stdout=handle,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        cwd=tmp_path,
                    )
                )
            return log

        master_url = f"spark://{DRIVER_ADDRESS}:{MASTER_PORT}"
        try:
            master = launch(
                "master",
                hosts.driver.namespace,
                DRIVER_ADDRESS,
                _java(
                    "org.apache.spark.deploy.master.Master",
                    *("--host", DRIVER_ADDRESS, "--port", str(MASTER_PORT), "--webui-port", "8080"),
                ),
            )
            _wait_for(master, "I have been elected leader", processes)
            worker = launch(
                "worker",
                hosts.worker.namespace,
                WORKER_ADDRESS,
                _java(
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", WORKER_ADDRESS, "--cores", "1", "--memory", "1g", "--webui-port", "0"),
                    *("--work-dir", str(tmp_path / "work"), master_url),
                ),
            )
            _wait_for(worker, "Successfully registered with master", processes)
            yield hosts, master_url, cluster_id
        finally:
            _stop(cluster_id, processes)


def test_the_spark_helper_batches_the_markers_of_executors_on_another_host(
    cluster_on_two_hosts: tuple[SimulatedHosts, str, str], tmp_path: Path
) -> None:
    hosts, master_url, cluster_id = cluster_on_two_hosts
    out, result = tmp_path / "out", tmp_path / "result.json"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        CLUSTER_ID_VARIABLE: cluster_id,
    }
    environment.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    driver = subprocess.run(
        hosts.driver.command([sys.executable, "-c", DRIVER, master_url, str(out), str(result)]),
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr[-5000:]

    outcome = json.loads(result.read_text())
    assert outcome["task_hosts"] == [WORKER_ADDRESS], "every task ran on the other host"
    assert outcome["success"] is True
    (job_dir,) = (out / "_temporary").iterdir()
    published = orjson.loads((job_dir / "00" / "markers" / "server.json").read_bytes())
    assert published["host"] == DRIVER_ADDRESS, "the helper passed spark.driver.host on"
    opened = open_store(str(out))
    store, root = opened.store, opened.path
    found = read_markers(store, MarkerPaths(JobPaths(root, job_dir.name, 0)), store_retry_policy(store))
    committed = mc.committed_files(str(out))
    assert found.batched and found.direct_count == 0, "no task fell back to direct markers"
    assert len(found.markers) >= len(committed) == outcome["files"] > 0
