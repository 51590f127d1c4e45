"""SIGKILL a worker process of an ``upload`` job commit (``io.processes``) in the middle of its batch of
completions on S3 (moto); a fresh committer's rerun then completes exactly the chosen uploads, or its aborts leave
nothing of the job (the job is the kill harness's upload scenario, ``tests/fixtures/killing/upload.py``)."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.errors import WorkerProcessError
from tests.fixtures.emulators import Emulator
from tests.fixtures.killing.listing import outside_temporary
from tests.fixtures.killing.upload import FOLLOW_UP_CONFIG, UploadScenario
from tests.fixtures.worker_stores import KillingStore

pytestmark = pytest.mark.s3

WORKERS = dataclasses.replace(FOLLOW_UP_CONFIG, io_processes=2, io_threads=4)


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
def test_a_worker_killed_among_its_completions_is_finished_by_a_rerun_or_undone_by_an_abort(
    moto_s3: Emulator, s3_bucket: str, tmp_path: Path, follow_up: str
) -> None:
    scenario = UploadScenario(tmp_path, f"s3://{s3_bucket}/out", moto_s3.storage_options)
    before = scenario.prepare()
    expected = scenario.expected_after_commit(before)
    dying = functools.partial(KillingStore, nth=2, committer_pid=os.getpid())
    job = mc.create_committer(
        scenario.url, scenario.job_id, "upload", config=WORKERS, storage_options=scenario.options, store_wrapper=dying
    )
    with job, pytest.raises(WorkerProcessError, match="was killed by SIGKILL"):
        job.commit_job(scenario.accepted)
    assert scenario.listing() != expected, "the commit stopped before every upload was completed"
    if follow_up == "rerun":
        assert scenario.use(scenario.commit).success
    else:
        scenario.use(lambda fresh: (fresh.abort_job(), fresh.abort_job()))
    everything = scenario.listing(temporary=True)
    destination = outside_temporary(everything)
    if follow_up == "rerun":
        assert scenario.committed(), "the rerun's _SUCCESS is the job's"
        destination.pop("_SUCCESS")
    assert destination == (expected if follow_up == "rerun" else before)
    assert scenario.leftovers(everything) == {}, "no incomplete upload and no job state left"
