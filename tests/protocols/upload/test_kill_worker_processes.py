"""SIGKILL a worker process of an ``upload`` job commit (``io.processes``) in the middle of its batch of
completions on S3 (moto); a fresh committer's rerun then completes exactly the chosen uploads, or its aborts leave
nothing of the job (the job and its checks are ``test_kill``'s)."""

from __future__ import annotations

import dataclasses
import functools
import os

import pytest

import manifest_committer as mc
from manifest_committer.errors import WorkerProcessError
from tests.fixtures.emulators import Emulator
from tests.fixtures.worker_stores import KillingStore
from tests.protocols.upload.test_kill import CHOSEN, CONFIG, EXPECTED, JOB, _bucket_state, _prepare

pytestmark = pytest.mark.s3

WORKERS = dataclasses.replace(CONFIG, io_processes=2, io_threads=4)


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
def test_a_worker_killed_among_its_completions_is_finished_by_a_rerun_or_undone_by_an_abort(
    moto_s3: Emulator, s3_bucket: str, follow_up: str
) -> None:
    url = f"s3://{s3_bucket}/out"
    _prepare(url, moto_s3)
    dying = functools.partial(KillingStore, nth=2, committer_pid=os.getpid())
    options = moto_s3.storage_options
    job = mc.create_committer(url, JOB, "upload", config=WORKERS, storage_options=options, store_wrapper=dying)
    with job, pytest.raises(WorkerProcessError, match="was killed by SIGKILL"):
        job.commit_job(CHOSEN)
    assert _bucket_state(url, moto_s3)[0] != EXPECTED, "the commit stopped before every upload was completed"
    with mc.create_committer(url, JOB, "upload", config=CONFIG, storage_options=options) as fresh:
        if follow_up == "rerun":
            assert fresh.commit_job(CHOSEN).success
        else:
            fresh.abort_job()
            fresh.abort_job()
    data, state, uploads = _bucket_state(url, moto_s3)
    assert data == (EXPECTED if follow_up == "rerun" else {})
    assert (state, uploads) == ([], [])
