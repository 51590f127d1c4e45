"""Markers across hosts, for real: the driver on one simulated host (a network namespace), tasks on another, a
third host with no route to the driver; one local-disk destination, as a shared file system (docs/markers.md,
"Across hosts" and "Authenticated")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from manifest_committer.markers import MarkerPaths, read_markers
from manifest_committer.paths import JobPaths
from manifest_committer.protocols.transactional.readers import committed_files, store_retry_policy
from manifest_committer.store import open_store
from tests.fixtures.network_namespaces import DRIVER_ADDRESS, SimulatedHosts, simulated_hosts

__all__ = ["simulated_hosts"]

JOB = "job-hosts"
CONFIG = "mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, markers_batch_interval_ms=5)"

DRIVER = f"""
import json, sys, manifest_committer as mc
committer = mc.create_committer(sys.argv[1], "{JOB}", "transactional", config={CONFIG})
committer.setup_job()
print(json.dumps(list(committer.marker_server.address)), flush=True)
sys.stdin.readline()
summary = committer.commit_job()
committer.close()
print(json.dumps(len(summary.filenames)), flush=True)
"""

TASK = f"""
import logging, sys, threading, manifest_committer as mc
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
destination, attempt, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
with mc.create_committer(destination, "{JOB}", "transactional", config={CONFIG}) as committer:
    task = committer.setup_task("task_" + attempt, "attempt_" + attempt)
    def write(thread):
        for n in range(thread, files, 4):
            with task.fs.open(f"{{task.work_path}}/d={{n % 3}}/part-{{attempt}}-{{n}}.csv", "wb") as handle:
                handle.write(b"x")
    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    committer.commit_task(task)
"""

UNAUTHENTICATED = """
import http.client, json, sys
connection = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)
connection.request("POST", "/v1/markers/create", json.dumps({"marker": "forged.csv.marker.CREATE"}))
answer = connection.getresponse()
print(answer.status, answer.read().decode())
"""


def markers_of(dest: str) -> tuple[int, int, int]:
    """(markers, of which direct, MARKERS<i> files) of the job."""
    opened = open_store(dest)
    store, root = opened.store, opened.path
    found = read_markers(store, MarkerPaths(JobPaths(root, JOB, 0)), store_retry_policy(store))
    return len(found.markers), found.direct_count, len(found.batched_files)


def test_tasks_on_another_host_batch_through_the_driver_and_a_host_without_route_falls_back(
    simulated_hosts: SimulatedHosts, tmp_path: Path
) -> None:
    dest = str(tmp_path / "out")
    hosts = simulated_hosts
    driver = hosts.driver.python(DRIVER, dest, stdin=subprocess.PIPE)
    try:
        assert driver.stdout is not None and driver.stdin is not None
        host, port = json.loads(driver.stdout.readline())
        assert host == DRIVER_ADDRESS, "unset, the server publishes the driver host's primary address"

        workers = [hosts.worker.python(TASK, dest, str(attempt), "60") for attempt in range(2)]
        outcomes = [worker.communicate(timeout=120) for worker in workers]
        assert [worker.returncode for worker in workers] == [0, 0], outcomes
        assert all("WARNING" not in stderr for _, stderr in outcomes), outcomes
        markers, direct, files = markers_of(dest)
        assert (markers, direct) == (120, 0), "every marker of the other host went through the server"
        assert files >= 1

        forged = hosts.worker.run_python(UNAUTHENTICATED, host, str(port))
        assert forged.stdout.startswith("401 "), forged
        assert markers_of(dest)[0] == 120, "the request without the secret recorded nothing"

        isolated = hosts.isolated.run_python(TASK, dest, "9", "5")
        assert isolated.returncode == 0, isolated.stderr
        warnings = [line for line in isolated.stderr.splitlines() if line.startswith("WARNING")]
        assert len(warnings) == 1 and f"{DRIVER_ADDRESS}:{port}" in warnings[0], isolated.stderr
        assert markers_of(dest)[:2] == (125, 5), "the host without a route wrote direct markers"

        driver.stdin.write("commit\n")
        driver.stdin.flush()
        assert json.loads(driver.stdout.readline()) == 100  # _SUCCESS lists at most 100 of the 125 files
        assert driver.wait(60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait(10)
    assert len(committed_files(dest)) == 125
