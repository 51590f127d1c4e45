"""Credentials missing or refused: ``setup_job`` fails once, clearly, naming the destination, and creates nothing."""

from __future__ import annotations

import base64
from collections.abc import Callable

import fsspec
import pytest

import manifest_committer as mc
from manifest_committer.errors import CommitterError, ConfigError
from manifest_committer.store import Fault, FaultInjectingStore, gcs_http_error
from manifest_committer.store.azure import AzureBlobStore
from manifest_committer.store.gcs import GCSStore
from tests.fixtures.committing import FAST
from tests.fixtures.emulators import Emulator, azurite_connection_string

WRONG_KEY = base64.b64encode(b"not the account key of devstoreaccount1, but valid base64").decode("ascii")


@pytest.mark.azure
def test_a_wrong_azure_account_key_fails_setup_job_clearly(azurite: Emulator, azure_container: str) -> None:
    destination = f"abfs://{azure_container}/out"
    committer = mc.ManifestCommitter(
        destination,
        "job_wrong_key",
        config=FAST,
        storage_options={"connection_string": azurite_connection_string(azurite.port, WRONG_KEY)},
    )
    with pytest.raises(CommitterError, match="credentials") as raised:
        committer.setup_job()
    assert type(raised.value) is CommitterError
    assert f"abfs://{azure_container}@devstoreaccount1.dfs.core.windows.net/out" in str(raised.value)
    assert "AZURE_STORAGE_CONNECTION_STRING" in str(raised.value), "says where credentials come from"
    assert committer.store.is_auth_error(raised.value.__cause__ or raised.value)
    assert azurite.filesystem().find(azure_container) == []


@pytest.mark.azure
def test_azure_auth_errors_are_recognised_and_others_are_not() -> None:
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError

    store = AzureBlobStore(fsspec.filesystem("memory"))
    forbidden = HttpResponseError(message="AuthorizationFailure")
    forbidden.status_code = 403
    busy = HttpResponseError(message="ServerBusy")
    busy.status_code = 503
    wrapped = RuntimeError("Failed to remove")
    wrapped.__cause__ = forbidden
    assert store.is_auth_error(ClientAuthenticationError(message="Server failed to authenticate the request"))
    assert store.is_auth_error(forbidden)
    assert store.is_auth_error(wrapped)
    assert store.is_auth_error(PermissionError("denied"))
    assert not store.is_auth_error(busy)
    assert not store.is_auth_error(ResourceNotFoundError(message="not found"))


@pytest.mark.gcs
@pytest.mark.parametrize(
    "error",
    [gcs_http_error(401), lambda: OSError("Forbidden: b/bucket/o\nno storage.objects.get access")],
    ids=["http-401", "forbidden-403"],
)
def test_a_refused_gcs_credential_fails_setup_job_clearly(
    fake_gcs: Emulator, gcs_bucket: str, error: Callable[[], BaseException]
) -> None:
    # fake-gcs-server accepts any credential, so the refusal gcsfs would raise is injected on the first call.
    destination = f"gs://{gcs_bucket}/out"
    faults = [Fault(operation, error=error, times=None) for operation in ("info", "mkdirs")]
    committer = mc.ManifestCommitter(
        destination, "job_refused", config=FAST, store_wrapper=lambda inner: FaultInjectingStore(inner, faults)
    )
    with pytest.raises(CommitterError, match="credentials") as raised:
        committer.setup_job()
    assert destination in str(raised.value)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in str(raised.value), "says where credentials come from"
    assert isinstance(committer.store, FaultInjectingStore)
    assert committer.store.calls["info"] == 1
    assert committer.store.calls["mkdirs"] == 0
    assert fake_gcs.filesystem().find(gcs_bucket) == []


def test_gcs_auth_errors_are_recognised_and_others_are_not() -> None:
    store = GCSStore(fsspec.filesystem("memory"))
    assert store.is_auth_error(gcs_http_error(401)())
    assert store.is_auth_error(gcs_http_error(403)())
    assert store.is_auth_error(OSError("Forbidden: b/bucket/o"))
    assert not store.is_auth_error(gcs_http_error(503)())
    assert not store.is_auth_error(OSError("disk on fire"))
    assert not store.is_auth_error(FileNotFoundError("b/bucket/o"))


def test_a_permission_error_fails_setup_job_clearly_on_any_store() -> None:
    destination = "memory://credentials/out"
    faults = [Fault("info", error=lambda: PermissionError("denied"), times=None)]
    committer = mc.ManifestCommitter(
        destination, "job_denied", config=FAST, store_wrapper=lambda inner: FaultInjectingStore(inner, faults)
    )
    with pytest.raises(CommitterError, match="credentials") as raised:
        committer.setup_job()
    assert committer.destination_url in str(raised.value)  # memory:///credentials/out
    assert isinstance(raised.value.__cause__, PermissionError)
    assert not fsspec.filesystem("memory").exists("/credentials")


def test_other_errors_of_the_first_call_pass_through_unchanged() -> None:
    faults = [Fault("info", error=lambda: OSError("disk on fire"), times=None)]
    committer = mc.ManifestCommitter(
        "memory://credentials/out",
        "job_other",
        config=FAST,
        store_wrapper=lambda inner: FaultInjectingStore(inner, faults),
    )
    with pytest.raises(OSError, match="disk on fire"):
        committer.setup_job()


AZURE_CREDENTIAL_VARIABLES = (
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CLIENT_ID",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_STORAGE_TENANT_ID",
)


@pytest.mark.azure
def test_missing_azure_credentials_fail_at_construction_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in AZURE_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    for protocol in ("abfs", "abfss", "az"):  # the emulator fixtures make themselves fsspec's defaults
        monkeypatch.delitem(fsspec.config.conf, protocol, raising=False)
    destination = "abfs://container/out"
    with pytest.raises(ConfigError) as raised:
        mc.ManifestCommitter(destination, "job_no_credentials", config=FAST, storage_options={})
    message = str(raised.value)
    assert message.startswith(destination + ": ")
    for source in ("connection_string", "account_key", "sas_token", "AZURE_STORAGE_CONNECTION_STRING"):
        assert source in message
    assert isinstance(raised.value, CommitterError)
    assert isinstance(raised.value.__cause__, ValueError)


def test_each_store_says_where_its_credentials_come_from() -> None:
    assert "AZURE_STORAGE_ACCOUNT_KEY" in AzureBlobStore(fsspec.filesystem("memory")).credential_sources
    assert "GOOGLE_APPLICATION_CREDENTIALS" in GCSStore(fsspec.filesystem("memory")).credential_sources
