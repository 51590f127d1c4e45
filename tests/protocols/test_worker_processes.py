"""A job commit's per-file store calls made by worker processes (``io.processes``), on every store and protocol
that has them: the same output, journal and ``_SUCCESS`` as in one process; errors made in a worker settled by the
committer (evidence, retries, statistics); hostile manifests refused before anything moves; stores a worker cannot
reach (``memory://``), and wrappers that cannot travel, keep the calls in the committer's process."""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.protocols.base import CommitterBase
from manifest_committer.statistic_names import (
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_WORKER_PROCESS_START,
    STORE_IO_RETRY,
)
from manifest_committer.store import Fault, FaultInjectingStore, StoreOperations
from tests.fixtures.committing import FAST, edit_manifest, output, run_task, tree
from tests.fixtures.stores import protocol_cases

PROCESSES = 2
WORKERS = dataclasses.replace(FAST, io_processes=PROCESSES, io_threads=8, markers_type=mc.MarkerType.DIRECT)
"""Two worker processes; direct markers, so the upload protocol's job needs no marker server."""
TASKS = {
    f"task_{task}": {f"dt={n % 3}/part-{task}-{n}.csv": f"{task},{n}\n".encode() * (n + 1) for n in range(7)}
    for task in range(4)
}
EXPECTED = {name: data for files in TASKS.values() for name, data in files.items()}


def _job(destination: str, protocol: str, **options: Any) -> CommitterBase:
    committer = mc.create_committer(destination, "job-workers", protocol, config=WORKERS, **options)
    assert isinstance(committer, CommitterBase)
    committer.setup_job()
    for number, (task, files) in enumerate(TASKS.items()):
        run_task(committer, task, f"attempt_{number}_0", files)
    return committer


@protocol_cases("manifest")
def test_worker_processes_commit_exactly_what_one_process_would(protocol_destination: str, protocol: str) -> None:
    with _job(protocol_destination, protocol) as committer:
        success = committer.commit_job()
        assert output(committer) == EXPECTED
        assert not any(path.startswith("_temporary/job-workers") for path in tree(committer))
    counters = success.iostatistics.counters
    assert counters[COMMITTER_FILES_COMMITTED] == len(EXPECTED)
    started = counters.get(COMMITTER_WORKER_PROCESS_START, 0)
    assert started == (0 if protocol_destination.startswith("memory://") else PROCESSES)
    assert success.filenames == sorted(success.filenames) and len(success.filenames) == len(EXPECTED)


def test_on_a_store_of_this_process_only_the_calls_stay_here(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), _job("memory://workers/out", "manifest") as committer:
        committer.commit_job()
        assert output(committer) == EXPECTED
    assert "the store exists in this process only; mapreduce.manifest.committer.io.processes is ignored" in caplog.text


def test_a_wrapper_that_cannot_travel_keeps_the_calls_here(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    wrapped: list[StoreOperations] = []

    def closure(inner: StoreOperations) -> StoreOperations:
        wrapped.append(inner)
        return inner

    with caplog.at_level(logging.WARNING), _job(str(tmp_path), "manifest", store_wrapper=closure) as committer:
        success = committer.commit_job()
        assert output(committer) == EXPECTED
    assert "io.processes is ignored: the store's options, binding or wrapper cannot travel" in caplog.text
    assert COMMITTER_WORKER_PROCESS_START not in success.iostatistics.counters


def test_a_rename_that_failed_in_a_worker_after_taking_effect_is_recovered(tmp_path: object) -> None:
    """The worker's fault store (the committer's wrapper, applied there too) loses the answers of every rename of
    task 1; the committer finds each one moved by its evidence and counts it recovered in ``_SUCCESS``."""
    lost = Fault("rename_file", "part-1-", when="after", times=None)
    wrapper = functools.partial(FaultInjectingStore, faults=[lost])
    with _job(str(tmp_path), "manifest", store_wrapper=wrapper) as committer:
        success = committer.commit_job()
        assert output(committer) == EXPECTED
    assert success.iostatistics.counters[COMMIT_FILE_RENAME_RECOVERED] == len(TASKS["task_1"])


def test_a_transient_error_in_a_worker_is_retried_by_the_committers_policy(tmp_path: object) -> None:
    throttled = Fault("rename_file", "part-2-3", times=1)  # a timeout before the rename reaches the store
    wrapper = functools.partial(FaultInjectingStore, faults=[throttled])
    with _job(str(tmp_path), "manifest", store_wrapper=wrapper) as committer:
        success = committer.commit_job()
        assert output(committer) == EXPECTED
    assert success.iostatistics.counters[STORE_IO_RETRY] >= 1


def test_a_conflict_found_by_a_worker_fails_the_commit_naming_the_file_and_abort_undoes_it(tmp_path: object) -> None:
    with _job(str(tmp_path), "manifest") as committer:
        theirs = committer.paths.dest + "/dt=1/part-2-1.csv"
        committer.store.write_bytes(theirs, b"someone else's")
        with pytest.raises(mc.OutputConflictError, match=r"part-2-1\.csv.*nothing was overwritten"):
            committer.commit_job()
        committer.abort_job()
        assert output(committer) == {"dt=1/part-2-1.csv": b"someone else's"}


def test_a_hostile_manifest_is_refused_before_a_worker_moves_anything(tmp_path: object) -> None:
    with _job(str(tmp_path), "manifest") as committer:
        assert isinstance(committer, mc.ManifestCommitter)
        edit_manifest(committer, "task_2", lambda document: document["files"][0].update(d="file:///etc/passwd"))
        before = tree(committer)
        with pytest.raises(mc.ManifestError, match="task_2"):
            committer.commit_job()
        assert tree(committer) == before
