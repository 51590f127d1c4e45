"""The Azure binding against Azurite: Hadoop's URL form and its account, definite answers of the rename, deletes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.errors import ConfigError, ManifestError, SourceChangedError
from manifest_committer.store import OpenedStore, RenameHint, open_store
from manifest_committer.store import azure as azure_module
from manifest_committer.store.azure import AzureBlobStore
from tests.fixtures.committing import FAST, edit_manifest, output, run_task
from tests.fixtures.stores import opened_as

pytestmark = pytest.mark.azure

HOST = "devstoreaccount1.dfs.core.windows.net"
"""Azurite's account, in the host form Hadoop's ABFS URLs carry."""


def _store(container: str) -> OpenedStore[AzureBlobStore]:
    return opened_as(f"abfs://{container}/out", AzureBlobStore)


# --- URLs --------------------------------------------------------------------------------------------------------


def test_urls_are_hadoops_abfs_form_and_round_trip(azure_container: str) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    path = f"{root}/dt=2024-01-01/part 0.csv"
    url = store.to_url(path)
    assert url == f"abfs://{azure_container}@{HOST}/out/dt=2024-01-01/part%200.csv"
    assert store.from_url(url) == path
    # adlfs's short form names no account, so it can only mean this one; wasb names the account's blob host.
    assert store.from_url(f"abfs://{azure_container}/out/a.csv") == f"{root}/a.csv"
    assert store.from_url(f"wasbs://{azure_container}@devstoreaccount1.blob.core.windows.net/out/a") == f"{root}/a"
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "abfs://{container}@otheraccount.dfs.core.windows.net/out/a.csv",
        "abfss://{container}@otheraccount.dfs.core.windows.net/out/a.csv",
        "abfs://{container}@devstoreaccount1.example.com/out/a.csv",
        "abfs://another-container@devstoreaccount1.dfs.core.windows.net/out/a.csv",
        "abfs://another-container/out/a.csv",
        "abfs://@devstoreaccount1.dfs.core.windows.net/out/a.csv",
        "gs://{container}/out/a.csv",
    ],
)
def test_a_url_of_another_account_or_container_is_refused(azure_container: str, url: str) -> None:
    store = _store(azure_container).store
    with pytest.raises(ValueError, match=r"account|container|not an Azure"):
        store.from_url(url.format(container=azure_container))
    store.close()


def test_a_manifest_naming_another_account_is_refused_and_nothing_changes(azure_container: str) -> None:
    committer = mc.ManifestCommitter(f"abfs://{azure_container}/out", "job_other_account", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"mine"})

    def elsewhere(document: dict[str, Any]) -> None:
        for entry in document["files"]:
            entry["d"] = entry["d"].replace(f"@{HOST}/", "@victimaccount.dfs.core.windows.net/")

    edit_manifest(committer, "task_00000", elsewhere)
    with pytest.raises(ManifestError, match=r"task_00000-manifest\.json.*victimaccount"):
        committer.commit_job()
    assert output(committer) == {}
    committer.close()


def test_a_manifest_written_with_hadoops_urls_commits(azure_container: str) -> None:
    """Hadoop's task commit writes ``abfs://container@account.dfs.core.windows.net/...``: accepted as this store's."""
    committer = mc.ManifestCommitter(f"abfs://{azure_container}/out", "job_hadoop_urls", config=FAST)
    committer.setup_job()
    task = run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"one"})
    assert task.work_url.startswith(f"abfs://{azure_container}@{HOST}/out/_temporary/")
    success = committer.commit_job()
    assert success.filenames == [f"abfs://{azure_container}@{HOST}/out/dt=1/a.csv"]
    assert output(committer) == {"dt=1/a.csv": b"one"}
    committer.close()


def test_a_destination_of_another_account_than_the_credentials_is_refused(azure_container: str) -> None:
    with pytest.raises(ConfigError, match=r"otheraccount.*devstoreaccount1"):
        open_store(f"abfs://{azure_container}@otheraccount.dfs.core.windows.net/out")


# --- rename: definite answers are not retried ------------------------------------------------------------------


def _patch_blob_client(monkeypatch: pytest.MonkeyPatch, method: str, before: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``before(blob_client)`` ahead of every call of ``BlobClient.<method>`` (async SDK)."""
    from azure.storage.blob.aio import BlobClient

    original = getattr(BlobClient, method)

    async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        await before(self)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(BlobClient, method, patched)


@pytest.mark.parametrize("when", ["during the copy", "before its delete"])
def test_a_source_changed_during_the_rename_is_a_definite_answer(
    azure_container: str, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    source, dest = f"{root}/src/a.csv", f"{root}/dst/a.csv"
    store.write_bytes(source, b"first version")

    async def rewrite_source(client: Any) -> None:
        # The copy is a call on the destination's client, the delete one on the source's.
        if client.blob_name in (source.split("/", 1)[1], dest.split("/", 1)[1]):
            writer = store.fs.service_client.get_blob_client(azure_container, source.split("/", 1)[1])
            await writer.upload_blob(b"rewritten by someone else", overwrite=True)

    _patch_blob_client(
        monkeypatch, "start_copy_from_url" if when == "during the copy" else "delete_blob", rewrite_source
    )
    with pytest.raises(SourceChangedError, match=r"src/a\.csv") as raised:
        store.rename_file(source, dest)
    assert isinstance(raised.value, mc.CommitterError)
    assert store.to_url(source) in str(raised.value)
    assert not store.is_transient(raised.value), "the store's answer is definite: a retry cannot change it"
    monkeypatch.undo()
    assert store.read_bytes(source) == b"rewritten by someone else"
    store.close()


def _answer_412_for_an_existing_destination(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make Azurite answer as real Azure may: 412 ConditionNotMet where Azurite says 409 BlobAlreadyExists."""
    from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
    from azure.storage.blob.aio import BlobClient

    original = BlobClient.start_copy_from_url

    async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except ResourceExistsError as error:
            precondition_failed: Any = ResourceModifiedError(
                message="The condition specified using HTTP headers is not met"
            )
            precondition_failed.status_code = 412
            precondition_failed.error_code = "ConditionNotMet"
            raise precondition_failed from error

    monkeypatch.setattr(BlobClient, "start_copy_from_url", patched)


def test_azurite_answers_409_for_an_existing_destination(azure_container: str) -> None:
    """The measurement behind the comment in ``_rename``: Azurite says 409 where real Azure may say 412."""
    from azure.core.exceptions import ResourceExistsError

    opened = _store(azure_container)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"new")
    store.write_bytes(f"{root}/dst/a.csv", b"old")
    seen: list[BaseException] = []

    async def copy() -> None:
        from azure.core import MatchConditions

        service = store.fs.service_client
        source = service.get_blob_client(azure_container, "out/src/a.csv")
        try:
            await service.get_blob_client(azure_container, "out/dst/a.csv").start_copy_from_url(
                source.url, match_condition=MatchConditions.IfMissing
            )
        except ResourceExistsError as error:
            seen.append(error)

    from fsspec.asyn import sync

    sync(store.fs.loop, copy)
    assert len(seen) == 1 and getattr(seen[0], "status_code", None) == 409
    store.close()


def test_a_412_for_an_existing_destination_is_file_exists(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"new data")
    store.write_bytes(f"{root}/dst/a.csv", b"old data")
    _answer_412_for_an_existing_destination(monkeypatch)
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/src/a.csv", f"{root}/dst/a.csv")
    assert store.read_bytes(f"{root}/dst/a.csv") == b"old data"
    assert store.read_bytes(f"{root}/src/a.csv") == b"new data"
    store.close()


def test_a_412_for_the_renames_own_copy_finishes_the_rename(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    source, dest = f"{root}/src/a.csv", f"{root}/dst/a.csv"
    store.write_bytes(source, b"payload")

    _answer_412_for_an_existing_destination(monkeypatch)
    store.copy_file(source, dest)  # what an interrupted rename leaves: both, the destination a server-side copy
    store.rename_file(source, dest)
    assert store.info(source) is None
    assert store.read_bytes(dest) == b"payload"
    store.close()


# --- renames with the job's knowledge (RenameHint) -----------------------------------------------------------


def _count_probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every probe a rename may make: a HEAD of a blob, a listing below a path."""
    from azure.storage.blob.aio import BlobClient, ContainerClient

    probes: list[str] = []
    head, listing = BlobClient.get_blob_properties, ContainerClient.list_blobs

    async def counted_head(self: Any, *args: Any, **kwargs: Any) -> Any:
        probes.append(f"HEAD {self.blob_name}")
        return await head(self, *args, **kwargs)

    def counted_listing(self: Any, *args: Any, **kwargs: Any) -> Any:
        probes.append(f"LIST {kwargs.get('name_starts_with')}")
        return listing(self, *args, **kwargs)

    monkeypatch.setattr(BlobClient, "get_blob_properties", counted_head)
    monkeypatch.setattr(ContainerClient, "list_blobs", counted_listing)
    return probes


def test_a_rename_with_the_tasks_etag_and_a_clear_destination_makes_no_probe(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    names = ("a", "b", "c")
    for name in names:
        store.write_bytes(f"{root}/src/{name}.csv", name.encode())
    etags = {name: store.info(f"{root}/src/{name}.csv").etag for name in names}  # type: ignore[union-attr]
    probes = _count_probes(monkeypatch)
    pairs = [(f"{root}/src/{name}.csv", f"{root}/dst/{name}.csv") for name in names]
    outcomes = store.rename_files(pairs, [RenameHint(etags[name], dest_clear=True) for name in names])
    assert outcomes == [None, None, None]
    assert probes == [], "a copy pinned to the task's etag and a delete: no HEAD, no listing"
    monkeypatch.undo()
    for name in names:
        assert store.read_bytes(f"{root}/dst/{name}.csv") == name.encode()
        assert store.info(f"{root}/src/{name}.csv") is None
    store.close()


def test_a_hint_that_does_not_hold_changes_nothing_of_the_renames_answers(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale etag, a destination taken after all, an interrupted rename of this very copy: the probing path
    decides each, exactly as without a hint."""
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    for name in ("stale", "taken", "interrupted"):
        store.write_bytes(f"{root}/src/{name}.csv", name.encode())
    store.write_bytes(f"{root}/dst/taken.csv", b"theirs")
    store.copy_file(f"{root}/src/interrupted.csv", f"{root}/dst/interrupted.csv")
    etags = {name: store.info(f"{root}/src/{name}.csv").etag for name in ("taken", "interrupted")}  # type: ignore[union-attr]
    probes = _count_probes(monkeypatch)
    pairs = [(f"{root}/src/{name}.csv", f"{root}/dst/{name}.csv") for name in ("stale", "taken", "interrupted")]
    hints = [
        RenameHint("0x8DEADBEEF0000", dest_clear=True),
        RenameHint(etags["taken"], dest_clear=True),
        RenameHint(etags["interrupted"], dest_clear=True),
    ]
    outcomes = store.rename_files(pairs, hints)
    monkeypatch.undo()
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], FileExistsError)
    assert {probe.split()[0] for probe in probes} == {"HEAD", "LIST"}, "each fell back to the probes"
    assert store.read_bytes(f"{root}/dst/stale.csv") == b"stale"
    assert store.read_bytes(f"{root}/dst/taken.csv") == b"theirs", "never overwritten"
    assert store.read_bytes(f"{root}/src/taken.csv") == b"taken"
    assert store.read_bytes(f"{root}/dst/interrupted.csv") == b"interrupted"
    assert store.info(f"{root}/src/interrupted.csv") is None, "the interrupted rename was finished"
    store.close()


def test_a_job_commit_renames_with_two_requests_a_file(azure_container: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole protocol: the manifests' etags and the directories the job found missing spare every probe of
    the renames (the job's own probes of its directories and records remain)."""
    committer = mc.ManifestCommitter(f"abfs://{azure_container}/out", "job-hints", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"p=1/a.csv": b"a", "p=1/b.csv": b"b", "p=2/c.csv": b"c"})
    run_task(committer, "task_00001", "attempt_00001_0", {"p=2/d.csv": b"d"})
    probes = _count_probes(monkeypatch)
    committer.commit_job()
    monkeypatch.undo()
    assert any(probe == "HEAD out/p=1" for probe in probes), "the job probes its directories, once each"
    assert not [probe for probe in probes if ".csv" in probe], "no probe for any file"
    assert output(committer) == {"p=1/a.csv": b"a", "p=1/b.csv": b"b", "p=2/c.csv": b"c", "p=2/d.csv": b"d"}


def test_the_client_skips_environment_lookups_unless_one_applies(azurite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp's per-request reads of ``.netrc`` and the proxy variables are left out only when what they would
    find is nothing for the account's host."""
    import adlfs

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/.netrc")

    def transport_trusts_environment() -> bool:
        fs = adlfs.AzureBlobFileSystem(skip_instance_cache=True, **azurite.storage_options)
        azure_module.without_environment_lookups(fs)
        return bool(fs.service_client._pipeline._transport._use_env_settings)

    assert not transport_trusts_environment()
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert transport_trusts_environment(), "a proxy applies to the account's host: looked up as before"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert not transport_trusts_environment()


# --- deletes ---------------------------------------------------------------------------------------------------


def test_delete_dir_holds_a_bounded_number_of_coroutines(azure_container: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.storage.blob.aio import ContainerClient

    opened = _store(azure_container)
    store, root = opened.store, opened.path
    for index in range(40):
        store.write_bytes(f"{root}/tree/d{index % 4}/f{index}", b"x")
    monkeypatch.setattr(azure_module, "DELETE_BATCH", 7)
    monkeypatch.setattr(azure_module, "DELETE_CONCURRENCY", 3)
    original = ContainerClient.delete_blob
    most_tasks = 0

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal most_tasks
        most_tasks = max(most_tasks, len(asyncio.all_tasks()))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(ContainerClient, "delete_blob", counting)
    assert store.delete_dir(f"{root}/tree")
    assert store.info(f"{root}/tree") is None
    assert store.fs.find(f"{root}/tree") == []
    # Three workers and the call that runs them: not one coroutine per blob (40 here).
    assert 1 <= most_tasks <= 3 + 2
    store.close()


# --- resources ---------------------------------------------------------------------------------------------------


def test_a_store_of_no_client_closes_quietly() -> None:
    import fsspec

    store = AzureBlobStore(fsspec.filesystem("memory"))
    store.close()
    store.close()
    assert store.to_url("c/x") == "abfs://c/x"  # no account known: adlfs's short form
