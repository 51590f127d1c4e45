"""A job's set-up is its first store call: without credentials it fails there, naming the destination and where
the store looks for credentials, whatever the protocol (no emulator: botocore refuses before it sends anything)."""

from __future__ import annotations

import os

import fsspec.config
import pytest
import s3fs

import manifest_committer as mc
from manifest_committer.cli import main

URL = "s3://no-such-bucket/table"


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # The moto fixture makes its server fsspec's default for s3:// while it runs, and fsspec keeps one
    # S3FileSystem per set of options: either would answer with the emulator's credentials.
    for protocol in ("s3", "s3a"):
        monkeypatch.delitem(fsspec.config.conf, protocol, raising=False)
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.usefixtures("no_aws_credentials")
def test_upload_setup_without_credentials_names_the_destination() -> None:
    committer = mc.create_committer(URL, "job-1", protocol="upload")
    with pytest.raises(mc.CommitterError) as raised:
        committer.setup_job()
    message = str(raised.value)
    assert message.startswith(f"{URL}: the store refused the credentials, or none were found (NoCredentialsError")
    assert "AWS_ACCESS_KEY_ID" in message


@pytest.mark.usefixtures("no_aws_credentials")
def test_status_without_credentials_says_where_s3_finds_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", URL]) == 1
    error = capsys.readouterr().err
    assert "(credentials from storage_options key and secret" in error and "AWS_ACCESS_KEY_ID" in error
    assert "credentials from )" not in error
