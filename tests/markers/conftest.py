"""Marker tests: a store, the markers paths of one job attempt, and a retry policy without sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from manifest_committer.markers import MarkerPaths, MarkerServer
from manifest_committer.paths import JobPaths
from manifest_committer.retry import RetryPolicy
from manifest_committer.store import StoreOperations, open_store

JOB_ID = "job_markers_0001"


@dataclass
class MarkerJob:
    """What a marker component's caller hands it: the store, the job's marker paths and the retry policy."""

    store: StoreOperations
    paths: MarkerPaths
    retry: RetryPolicy

    def with_store(self, store: StoreOperations) -> MarkerJob:
        return MarkerJob(store, self.paths, fast_retry(store))

    def server(self, *, interval: int = 5, batch_threads: int = 20) -> MarkerServer:
        """A marker server of this job; 5 ms batches by default, to keep tests fast."""
        return MarkerServer(self.store, self.paths, self.retry, batch_interval_ms=interval, batch_threads=batch_threads)


def fast_retry(store: StoreOperations, attempts: int = 3) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_wait=0.001, max_wait=0.01, is_retryable=store.is_transient)


def marker_job(destination: str, job_id: str = JOB_ID) -> MarkerJob:
    opened = open_store(destination)
    store, dest = opened.store, opened.path
    return MarkerJob(store, MarkerPaths(JobPaths(dest, job_id, 0)), fast_retry(store))


@pytest.fixture
def job(destination: str) -> MarkerJob:
    """A job on memory and on local disk (the ``destination`` fixture's stores)."""
    return marker_job(destination)


@pytest.fixture
def server(job: MarkerJob) -> Iterator[MarkerServer]:
    """A started marker server of ``job`` (5 ms batches), stopped afterwards."""
    started = job.server().start()
    yield started
    started.stop()
