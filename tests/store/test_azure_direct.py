"""A rename's pinned copy and delete as direct requests on Azurite (``azure_direct``): the SDK's promises (never
overwriting, pinned to the manifest's etag, a pending copy waited for before any delete, definite answers), blob
names of any characters, Shared Key and SAS, and the SDK path for everything else."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest

from manifest_committer.errors import SourceChangedError
from manifest_committer.store import OpenedStore, RenameHint
from manifest_committer.store.azure import AzureBlobStore
from manifest_committer.store.azure_direct import Answer, DirectBlobRequests, SharedKey, service_error
from manifest_committer.store.operations import use_client_calls_only
from tests.fixtures.emulators import AZURITE_ACCOUNT, AZURITE_KEY, Emulator
from tests.fixtures.stores import opened_as

pytestmark = pytest.mark.azure

NAMES = ["a.csv", "dt=2024-01-01/a b+c%d~e.csv", "ünï/çø.csv", "x?y#z&w;v.csv", "and'quoted\".csv"]


def _store(container: str, options: dict[str, Any] | None = None) -> OpenedStore[AzureBlobStore]:
    return opened_as(f"abfs://{container}/out", AzureBlobStore, options)


def _sources(store: AzureBlobStore, root: str, names: list[str]) -> tuple[list[tuple[str, str]], list[RenameHint]]:
    pairs, hints = [], []
    for name in names:
        store.write_bytes(f"{root}/src/{name}", name.encode() * 2)
        status = store.info(f"{root}/src/{name}")
        assert status is not None
        pairs.append((f"{root}/src/{name}", f"{root}/dst/{name}"))
        hints.append(RenameHint(status.etag, dest_clear=True))
    return pairs, hints


def _no_blob_clients(store: AzureBlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("a BlobClient was built: the SDK path")

    monkeypatch.setattr(store, "_clients", refuse)


def test_a_shared_key_client_renames_directly_any_name_without_a_blob_client(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    assert store._direct is not None
    pairs, hints = _sources(store, root, NAMES)
    before = [store.info(source) for source, _ in pairs]
    _no_blob_clients(store, monkeypatch)
    assert store.rename_files(pairs, hints) == [None] * len(NAMES)
    monkeypatch.undo()
    for (source, dest), status in zip(pairs, before, strict=True):
        assert store.info(source) is None
        assert store.read_bytes(dest) == dest.rsplit("/dst/", 1)[1].encode() * 2
        moved = store.info(dest)
        assert moved is not None and status is not None and store.same_content(status, moved)
    store.close()


def test_with_direct_requests_off_renames_go_through_the_sdk(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store.direct.requests=false``: the SDK's own copy and delete, with the same outcome."""
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    use_client_calls_only(store)
    assert store._direct is None
    pairs, hints = _sources(store, root, NAMES)
    built: list[object] = []
    clients = store._clients

    def counted(*args: Any) -> Any:
        built.append(args)
        return clients(*args)

    monkeypatch.setattr(store, "_clients", counted)
    assert store.rename_files(pairs, hints) == [None] * len(NAMES)
    monkeypatch.undo()
    assert len(built) >= len(NAMES), "each rename built the SDK's blob clients"
    for source, dest in pairs:
        assert store.info(source) is None
        assert store.read_bytes(dest) == dest.rsplit("/dst/", 1)[1].encode() * 2
    store.close()


def test_a_direct_copy_that_is_refused_falls_back_to_the_sdks_probes_which_decide(azure_container: str) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    pairs, hints = _sources(store, root, ["taken.csv", "stale.csv", "gone.csv"])
    store.write_bytes(f"{root}/dst/taken.csv", b"theirs")
    hints[1] = RenameHint("0x8DEADBEEF0000", dest_clear=True)
    store.delete_file(pairs[2][0])
    outcomes = store.rename_files(pairs, hints)
    assert isinstance(outcomes[0], FileExistsError)
    assert store.read_bytes(f"{root}/dst/taken.csv") == b"theirs", "never overwritten"
    assert outcomes[1] is None and store.read_bytes(f"{root}/dst/stale.csv") == b"stale.csvstale.csv"
    assert isinstance(outcomes[2], FileNotFoundError)
    store.close()


@pytest.mark.parametrize("ends_as", ["success", "aborted"])
def test_a_pending_copy_is_waited_for_and_the_source_deleted_only_after_success(
    azure_container: str, monkeypatch: pytest.MonkeyPatch, ends_as: str
) -> None:
    """Azurite copies at once; real Azure answers ``pending`` for large blobs: the answer is made pending here."""
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    pairs, hints = _sources(store, root, ["big.csv"])
    direct = store._direct
    assert direct is not None
    copy, waited = direct.copy, []

    async def pending_copy(*arguments: Any) -> Answer:
        answer = await copy(*arguments)
        return Answer(answer.status, None, "pending")

    async def wait(client: Any, dest: str) -> str:
        waited.append(dest)
        assert await store.fs._exists(pairs[0][0]), "the source is still there while its copy is pending"
        return ends_as

    monkeypatch.setattr(direct, "copy", pending_copy)
    monkeypatch.setattr(store, "_wait_for_copy", wait)
    (outcome,) = store.rename_files(pairs, hints)
    assert waited == [pairs[0][1]]
    if ends_as == "success":
        assert outcome is None and store.info(pairs[0][0]) is None
    else:
        assert isinstance(outcome, OSError) and "aborted" in str(outcome)
        assert store.read_bytes(pairs[0][0]) == b"big.csvbig.csv", "a copy that did not succeed deletes nothing"
    store.close()


def test_a_source_changed_after_its_copy_is_kept_and_the_answer_is_definite(
    azure_container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(azure_container)
    store, root = opened.store, opened.path
    pairs, hints = _sources(store, root, ["busy.csv"])
    direct = store._direct
    assert direct is not None
    copy = direct.copy

    async def copy_then_someone_writes(*arguments: Any) -> Answer:
        answer = await copy(*arguments)
        await store.fs._pipe_file(pairs[0][0], b"rewritten by someone")
        return answer

    monkeypatch.setattr(direct, "copy", copy_then_someone_writes)
    (outcome,) = store.rename_files(pairs, hints)
    assert isinstance(outcome, SourceChangedError)
    assert not store.is_transient(outcome)
    assert store.read_bytes(pairs[0][0]) == b"rewritten by someone"
    store.close()


def test_a_sas_client_renames_directly_with_its_token(azurite: Emulator, azure_container: str) -> None:
    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    token = generate_account_sas(
        AZURITE_ACCOUNT,
        AZURITE_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
        expiry=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
    )
    endpoint = f"http://127.0.0.1:{azurite.port}/{AZURITE_ACCOUNT}"
    opened = _store(
        azure_container,
        {
            "connection_string": f"BlobEndpoint={endpoint};SharedAccessSignature={token}",
            "account_name": AZURITE_ACCOUNT,
        },
    )
    store, root = opened.store, opened.path
    assert store._direct is not None and store._direct._key is None
    pairs, hints = _sources(store, root, NAMES[:3])
    assert store.rename_files(pairs, hints) == [None, None, None]
    assert [store.info(source) for source, _ in pairs] == [None, None, None]
    store.close()


def test_a_client_of_another_credential_keeps_the_sdk_path() -> None:
    class TokenCredential:
        async def get_token(self, *scopes: str) -> Any: ...

    class Client:
        url = "https://acct.blob.core.windows.net/"
        api_version = "2025-01-05"
        credential = TokenCredential()
        _pipeline = type("Pipeline", (), {"_transport": type("T", (), {"session": None, "connection_config": None})})()

    assert DirectBlobRequests.of(Client()) is None


def test_shared_key_signs_as_the_sdk_does() -> None:
    """The string to sign of Microsoft's documentation, compared with the SDK's own policy on one request."""
    from azure.core.pipeline import PipelineRequest
    from azure.core.pipeline.transport import HttpRequest
    from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

    headers = {
        "if-none-match": "*",
        "x-ms-copy-source": "https://acct.blob.core.windows.net/c/src/a%20b.csv",
        "x-ms-source-if-match": '"0x8DC"',
        "x-ms-date": "Fri, 27 Nov 2026 06:20:01 GMT",
        "x-ms-version": "2025-01-05",
    }
    url = "https://acct.blob.core.windows.net/c/dst/a%20b.csv"
    request = HttpRequest("PUT", url, headers=dict(headers))
    policy: Any = SharedKeyCredentialPolicy  # untyped: the SDK's own signer, called as it calls it
    policy = policy("acct", AZURITE_KEY)
    pipeline_request: Any = PipelineRequest(request, type("Context", (), {"transport": None})())
    policy.on_request(pipeline_request)
    ours = SharedKey("acct", base64.b64decode(AZURITE_KEY)).authorization("PUT", "/c/dst/a%20b.csv", headers)
    assert ours == request.headers["Authorization"]


def test_answers_become_azure_cores_errors_judged_as_the_sdks(azure_container: str) -> None:
    store = _store(azure_container).store
    busy = service_error(Answer(503, "ServerBusy", None), "copy")
    assert store.is_transient(busy)
    assert not store.is_transient(service_error(Answer(412, "ConditionNotMet", None), "copy"))
    assert store.is_auth_error(service_error(Answer(403, "AuthorizationFailure", None), "copy"))
    assert store.is_transient(service_error(Answer(500, "OperationTimedOut", None), "copy"))
    store.close()
