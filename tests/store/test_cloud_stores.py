"""The Azure and GCS store bindings against real emulators: rename semantics, directories, errors, whole jobs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import (
    Fault,
    OpenedStore,
    StoreOperations,
    azure_operation_timed_out,
    azure_server_busy,
    gcs_http_error,
    is_transient_azure,
    open_store,
)
from manifest_committer.store.azure import AzureBlobStore
from manifest_committer.store.faults import OPERATIONS
from manifest_committer.store.gcs import GCSStore, is_transient_gcs
from tests.fixtures.committing import FAST, FaultCapture, output, run_task


def _store(cloud_destination: str) -> OpenedStore:
    return open_store(cloud_destination)


def test_the_factory_binds_each_scheme_to_its_store(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, path = opened.store, opened.path
    expected = AzureBlobStore if cloud_destination.startswith("abfs://") else GCSStore
    assert type(store) is expected
    assert not store.capabilities.atomic_rename
    assert store.capabilities.checksums_preserved_in_rename
    if isinstance(store, AzureBlobStore):  # Hadoop's form, naming the account
        container = path.split("/")[0]
        assert store.to_url(path) == f"abfs://{container}@devstoreaccount1.dfs.core.windows.net/out"
    else:
        assert store.to_url(path) == cloud_destination
    assert store.from_url(store.to_url(path)) == path
    assert store.from_url(cloud_destination) == path


def test_rename_moves_the_file_and_keeps_its_checksum(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"hello")
    before = store.info(f"{root}/src/a.csv")
    store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    after = store.info(f"{root}/dst/a.csv")
    assert store.info(f"{root}/src/a.csv") is None
    assert store.read_bytes(f"{root}/dst/a.csv") == b"hello"
    assert before is not None and after is not None and before.checksum is not None
    assert store.same_content(before, after)


def test_rename_never_replaces_an_existing_file(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"new data")
    store.write_bytes(f"{root}/dst/a.csv", b"old data")
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    assert store.read_bytes(f"{root}/dst/a.csv") == b"old data"
    assert store.read_bytes(f"{root}/src/a.csv") == b"new data"


def test_rename_refuses_a_directory_at_the_destination(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"x")
    store.write_bytes(f"{root}/dst/a.csv/inner", b"y")
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    assert store.read_bytes(f"{root}/src/a.csv") == b"x"
    assert store.read_bytes(f"{root}/dst/a.csv/inner") == b"y"


def test_a_batch_of_renames_is_in_flight_at_once_with_one_outcome_each(cloud_destination: str) -> None:
    """Both stores take a batch on their event loop; each rename keeps its own promise and its own error."""
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    assert store.capabilities.concurrent_calls
    for name in ("a", "b", "c"):
        store.write_bytes(f"{root}/src/{name}.csv", name.encode())
    store.write_bytes(f"{root}/dst/b.csv", b"theirs")
    pairs = [(f"{root}/src/{name}.csv", f"{root}/dst/{name}.csv") for name in ("a", "b", "c", "missing")]
    outcomes = store.rename_files(pairs)
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], FileExistsError)
    assert isinstance(outcomes[3], FileNotFoundError)
    assert store.read_bytes(f"{root}/dst/a.csv") == b"a"
    assert store.read_bytes(f"{root}/dst/c.csv") == b"c"
    assert store.read_bytes(f"{root}/dst/b.csv") == b"theirs"
    assert store.read_bytes(f"{root}/src/b.csv") == b"b"
    assert store.info(f"{root}/src/a.csv") is None


def test_a_batch_of_reads_is_in_flight_at_once_with_one_outcome_each(
    cloud_destination: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both stores read a batch on their event loop: every read in flight before any answers, each its own bytes or
    its own error."""
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    for name in ("a", "b", "c"):
        store.write_bytes(f"{root}/{name}.json", name.encode() * 3)
    paths = [f"{root}/a.json", f"{root}/missing.json", f"{root}/b.json", f"{root}/c.json"]
    real = store.fs._cat_file
    waiting: list[str] = []
    everyone = asyncio.Event()

    async def meeting(path: str, **options: Any) -> Any:
        waiting.append(path)
        if len(waiting) == len(paths):
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 5)  # one after another would time out here
        return await real(path, **options)

    monkeypatch.setattr(store.fs, "_cat_file", meeting)
    outcomes = store.read_files(paths)
    assert outcomes[0] == b"aaa" and outcomes[2] == b"bbb" and outcomes[3] == b"ccc"
    assert isinstance(outcomes[1], FileNotFoundError)


def test_a_batch_of_directory_deletes_is_in_flight_at_once_with_one_outcome_each(
    cloud_destination: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    for name in ("a", "b"):
        store.write_bytes(f"{root}/{name}/x/f.csv", b"1")
        store.write_bytes(f"{root}/{name}/g.csv", b"2")
    store.write_bytes(f"{root}/kept/h.csv", b"3")
    paths = [f"{root}/a", f"{root}/missing", f"{root}/b"]
    kind: Any = type(store)
    on_loop = kind._delete_dir_on_loop
    waiting: list[str] = []
    everyone = asyncio.Event()

    def meeting(self: Any, path: str) -> Any:
        delete = on_loop(self, path)

        async def after_all_started() -> bool:
            waiting.append(path)
            if len(waiting) == len(paths):
                everyone.set()
            await asyncio.wait_for(everyone.wait(), 5)  # one after another would time out here
            return bool(await delete())

        return after_all_started

    monkeypatch.setattr(kind, "_delete_dir_on_loop", meeting)
    assert store.delete_dirs(paths) == [True, False, True]
    assert store.list_dir(root) and [s.path.rstrip("/").rsplit("/", 1)[-1] for s in store.list_dir(root)] == ["kept"]
    assert store.read_bytes(f"{root}/kept/h.csv") == b"3"


def test_rename_of_a_missing_source_is_file_not_found(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    with pytest.raises(FileNotFoundError):
        store.rename_file(f"{root}/src/missing.csv", f"{root}/dst/a.csv")
    assert store.info(f"{root}/dst/a.csv") is None


def test_a_half_done_rename_is_finished(cloud_destination: str) -> None:
    """Copy done, delete not: the next rename of the same file deletes the source and succeeds."""
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"payload")
    store.copy_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    assert store.info(f"{root}/src/a.csv") is None
    assert store.read_bytes(f"{root}/dst/a.csv") == b"payload"


def test_different_content_at_the_destination_is_never_taken_for_a_half_done_rename(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"ours...")
    store.write_bytes(f"{root}/dst/a.csv", b"theirs!")  # same size, other bytes
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    assert store.read_bytes(f"{root}/src/a.csv") == b"ours..."
    assert store.read_bytes(f"{root}/dst/a.csv") == b"theirs!"


def test_directories_are_markers_that_list_and_remove(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.mkdirs(f"{root}/job/manifests")
    status = store.info(f"{root}/job/manifests")
    assert status is not None and status.is_dir
    assert store.list_dir(f"{root}/job/manifests") == []
    assert [child.path for child in store.list_dir(f"{root}/job")] == [f"{root}/job/manifests"]
    store.mkdirs(f"{root}/job/manifests")  # exists: fine
    store.write_bytes(f"{root}/job/manifests/m.json", b"{}")
    assert not store.remove_empty_dir(f"{root}/job/manifests")
    assert [child.path for child in store.list_dir(f"{root}/job/manifests")] == [f"{root}/job/manifests/m.json"]
    store.delete_file(f"{root}/job/manifests/m.json")
    assert store.remove_empty_dir(f"{root}/job/manifests")
    assert store.info(f"{root}/job/manifests") is None


def test_mkdirs_over_a_file_is_file_exists(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/taken", b"file")
    with pytest.raises(FileExistsError):
        store.mkdirs(f"{root}/taken")
    assert store.read_bytes(f"{root}/taken") == b"file"


def test_job_commit_on_the_emulator(cloud_destination: str) -> None:
    committer = mc.ManifestCommitter(cloud_destination, "job-1", config=FAST)
    committer.setup_job()
    files = {f"dt={i % 3}/part-{i:05d}.csv": f"row {i}\n".encode() for i in range(30)}
    items = list(files.items())
    for index in range(3):
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", dict(items[index::3]))
    summary = committer.commit_job()
    store, root = committer.store, committer.paths.dest
    assert summary.success
    assert len(summary.filenames) == 30
    assert summary.iostatistics.counters["committer_files_committed"] == 30
    for relative, data in files.items():
        assert store.read_bytes(f"{root}/{relative}") == data
    assert store.info(f"{root}/_temporary") is None
    assert mc.SuccessData.from_json(store.read_bytes(f"{root}/_SUCCESS"), "_SUCCESS").success


@pytest.mark.parametrize("error", ["busy", "timeout"])
def test_throttling_storm_on_renames_still_commits_everything(cloud_destination: str, error: str) -> None:
    """30 % of renames fail with the backend's own throttling error before taking effect; retries finish the job."""
    if cloud_destination.startswith("abfs://"):
        make = azure_server_busy if error == "busy" else azure_operation_timed_out
    else:
        make = gcs_http_error(503 if error == "busy" else 429)
    capture = FaultCapture([Fault("rename_file", error=make, times=None, rate=0.3)], seed=7)
    config = mc.CommitterConfig(io_threads=4, store_retry_attempts=20, store_retry_interval=0, save_retry_interval=0)
    committer = mc.ManifestCommitter(cloud_destination, f"job-{uuid.uuid4().hex[:6]}", config=config)
    committer.setup_job()
    committer_with_faults = mc.ManifestCommitter(
        cloud_destination, committer.job_id, config=config, store_wrapper=capture
    )
    files = {f"p={i % 4}/f{i}.bin": bytes([i]) * (i + 1) for i in range(24)}
    run_task(committer, "task_00000", "attempt_00000_0", files)
    summary = committer_with_faults.commit_job()
    injected = capture.injecting.injected["rename_file"]
    assert injected > 0
    # Every injected failure cost exactly one more rename call (the +1 is _SUCCESS), none was taken as recovered.
    assert capture.injecting.calls["rename_file"] == len(files) + 1 + injected
    assert summary.iostatistics.counters.get("commit_file_rename_recovered", 0) == 0
    # The stage counts a file's first transient failure outside the retry policy (see the report).
    assert 0 < summary.iostatistics.counters["store_io_retry"] <= injected
    store, root = committer.store, committer.paths.dest
    for relative, data in files.items():
        assert store.read_bytes(f"{root}/{relative}") == data


def test_throttling_storm_on_every_store_call_still_commits_exactly(cloud_destination: str) -> None:
    """30 % of every kind of store call of the job commit throttled (before taking effect): exact output, retries
    counted in ``_SUCCESS``."""
    make = azure_server_busy if cloud_destination.startswith("abfs://") else gcs_http_error(503)
    capture = FaultCapture([Fault(operation, error=make, times=None, rate=0.3) for operation in OPERATIONS], seed=11)
    config = mc.CommitterConfig(
        io_threads=4, store_retry_attempts=30, store_retry_interval=0, save_retry_interval=0, manifest_save_attempts=30
    )
    committer = mc.ManifestCommitter(cloud_destination, f"job-{uuid.uuid4().hex[:6]}", config=config)
    committer.setup_job()
    files = {f"p={i % 4}/q={i % 3}/f{i}.bin": bytes([i]) * (i + 1) for i in range(24)}
    for index in range(3):
        chunk = dict(list(files.items())[index::3])
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", chunk)
    committer_with_faults = mc.ManifestCommitter(
        cloud_destination, committer.job_id, config=config, store_wrapper=capture
    )
    summary = committer_with_faults.commit_job()
    injected = sum(capture.injecting.injected.values())
    assert injected >= 10
    assert len(capture.injecting.injected) >= 4, f"only {sorted(capture.injecting.injected)} were throttled"
    store, root = committer.store, committer.paths.dest
    assert output(committer) == files
    success = mc.SuccessData.from_json(store.read_bytes(f"{root}/_SUCCESS"), "_SUCCESS")
    assert success.success and success.iostatistics.counters["store_io_retry"] > 0
    assert summary.iostatistics.counters["store_io_retry"] >= success.iostatistics.counters["store_io_retry"]
    assert store.info(f"{root}/_temporary") is None


def test_backend_errors_are_classified() -> None:
    assert is_transient_azure(azure_server_busy())
    assert is_transient_azure(azure_operation_timed_out())
    assert not is_transient_azure(FileNotFoundError("x"))
    assert is_transient_gcs(gcs_http_error(503)())
    assert is_transient_gcs(gcs_http_error(429)())
    assert not is_transient_gcs(gcs_http_error(404)())
    assert not is_transient_gcs(gcs_http_error(412)())
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ServiceRequestError

    forbidden = HttpResponseError(message="forbidden")
    forbidden.status_code = 403
    assert not is_transient_azure(forbidden)
    assert not is_transient_azure(ClientAuthenticationError(message="bad key"))
    assert is_transient_azure(ServiceRequestError(message="connection refused"))
    # adlfs wraps a failed delete of a rename in RuntimeError, with the service error as its cause.
    wrapped = RuntimeError("Failed to remove a/b")
    wrapped.__cause__ = azure_server_busy()
    store = AzureBlobStore(fs=None)
    assert store.is_transient(wrapped)
    assert not store.is_transient(RuntimeError("something else"))


@pytest.mark.parametrize("url", ["s3://bucket/out", "s3a://bucket/out", "s3n://bucket/out"])
def test_s3_is_refused_with_a_reason(url: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match="S3 has no rename") as raised:
        mc.ManifestCommitter(url, "job-1")
    assert url in str(raised.value)


def test_a_filesystem_without_a_binding_is_refused() -> None:
    with pytest.raises(mc.UnsupportedStoreError, match=r"http://.*no store binding"):
        open_store("http://127.0.0.1:1/out")


def _http_session(store: StoreOperations) -> Any:
    """The aiohttp session behind a store's private client."""
    if isinstance(store, AzureBlobStore):
        return store.fs.service_client._client._client._pipeline._transport.session
    return store.fs._session


def test_close_releases_the_private_client_and_keeps_the_shared_one(cloud_destination: str) -> None:
    opened = _store(cloud_destination)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/a.csv", b"x")
    session = _http_session(store)
    assert session is not None and not session.closed
    store.close()
    assert session.closed
    store.close()  # idempotent
    assert store.data_fs.cat_file(f"{root}/a.csv") == b"x", "tasks' shared filesystem stays open"


def test_a_committer_closes_its_store(cloud_destination: str) -> None:
    with mc.ManifestCommitter(cloud_destination, "job_close", config=FAST) as committer:
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
        committer.commit_job()
        session = _http_session(committer.store)
        assert not session.closed
    assert session.closed
    committer.close()
