"""The cloud clients do not retry on their own: the committer's policy alone bounds a store call.

The Azure SDK would wait 15, 18 and 24 s between its own retries, gcsfs about 31 s over six attempts, before
an error even reached the committer. An endpoint where nothing listens shows the difference within seconds.
"""

from __future__ import annotations

import time
from typing import Any

import fsspec
import pytest

import manifest_committer as mc
from manifest_committer.store import open_store
from tests.fixtures.emulators import azurite_connection_string, free_port

DEAD_ENDPOINTS = [
    pytest.param("abfs", marks=pytest.mark.azure),
    pytest.param("gs", marks=pytest.mark.gcs),
]


def dead_endpoint(scheme: str) -> tuple[str, dict[str, Any]]:
    """A URL and storage options for a loopback port nothing listens on."""
    port = free_port()
    if scheme == "abfs":
        return "abfs://container/out", {"connection_string": azurite_connection_string(port)}
    return "gs://bucket/out", {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "test"}


@pytest.mark.parametrize("scheme", DEAD_ENDPOINTS)
def test_a_store_call_fails_at_once_with_a_transient_error(scheme: str) -> None:
    url, options = dead_endpoint(scheme)
    opened = open_store(url, options)
    store, path = opened.store, opened.path
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        store.info(f"{path}/file")
    assert store.is_transient(raised.value), "a refused connection is worth retrying, by the committer"
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("scheme", DEAD_ENDPOINTS)
def test_task_output_keeps_the_clients_own_retries(scheme: str) -> None:
    """Tasks write through fsspec's shared instance; the committer's private one is never handed out."""
    url, options = dead_endpoint(scheme)
    store = open_store(url, options).store
    shared, _ = fsspec.core.url_to_fs(url, **options, use_listings_cache=False)
    assert store.data_fs is shared
    assert store.fs is not shared
    committer = mc.ManifestCommitter(url, "job_1", storage_options=options)
    assert committer.task_attempt("task_1", "attempt_1").fs is shared


@pytest.mark.parametrize("scheme", DEAD_ENDPOINTS)
def test_the_retry_time_limit_bounds_a_job_setup(scheme: str) -> None:
    """1,000 attempts allowed, but ``store.retry.max.time`` of 1 s: the job setup gives up within seconds."""
    url, options = dead_endpoint(scheme)
    config = mc.CommitterConfig.from_hadoop_conf(
        {
            "mapreduce.manifest.committer.store.retry.attempts": "1000",
            "mapreduce.manifest.committer.store.retry.interval": "0.05",
            "mapreduce.manifest.committer.store.retry.max.wait": "0.1",
            "mapreduce.manifest.committer.store.retry.max.time": "1",
        }
    )
    committer = mc.ManifestCommitter(url, "job_1", config=config, storage_options=options)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"Cannot connect to host 127\.0\.0\.1"):
        committer.setup_job()
    assert time.monotonic() - started < 6.0
