"""create_committer: the protocol names, ``auto``, and refusals that name the protocol and the store."""

from __future__ import annotations

import pytest

import manifest_committer as mc
from manifest_committer.protocols.file_output.committer import FileOutputCommitterV1, FileOutputCommitterV2
from manifest_committer.protocols.registry import resolve_protocol
from manifest_committer.success_data import COMMITTER_NAME
from tests.fixtures.committing import FAST, run_task, success_file


def test_auto_is_manifest_off_s3(destination: str) -> None:
    committer: mc.Committer = mc.create_committer(destination, "job-1")
    assert isinstance(committer, mc.ManifestCommitter)
    assert committer.protocol == "manifest"


@pytest.mark.parametrize(
    ("protocol", "kind"),
    [
        ("manifest", mc.ManifestCommitter),
        ("v1", FileOutputCommitterV1),
        ("v2", FileOutputCommitterV2),
        ("transactional", mc.TransactionalCommitter),
    ],
)
def test_each_built_protocol(destination: str, protocol: str, kind: type) -> None:
    with mc.create_committer(destination, "job-1", protocol, config=FAST) as committer:
        assert type(committer) is kind
        assert committer.protocol == protocol


@pytest.mark.parametrize("url", ["s3://bucket/table", "s3a://bucket/table"])
def test_auto_on_s3_is_upload(url: str) -> None:
    assert resolve_protocol(url) == "upload"
    with mc.create_committer(url, "job-1") as committer:  # no store call until the job is set up
        assert type(committer) is mc.UploadCommitter
        assert committer.protocol == "upload"


def test_upload_off_s3_is_refused_naming_the_store(destination: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match=r"protocol 'upload' cannot commit.*needs S3") as raised:
        mc.create_committer(destination, "job-1", "upload")
    assert destination in str(raised.value)


@pytest.mark.parametrize("protocol", ["v3", "", "Manifest", "magic"])
def test_an_unknown_protocol_is_named(destination: str, protocol: str) -> None:
    with pytest.raises(mc.CommitterError, match=f"unknown commit protocol '{protocol}'"):
        mc.create_committer(destination, "job-1", protocol)


@pytest.mark.parametrize("protocol", ["manifest", "v1", "v2", "transactional"])
def test_a_rename_protocol_on_s3_names_protocol_and_store(protocol: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match=f"protocol '{protocol}' cannot commit") as raised:
        mc.create_committer("s3://bucket/table", "job-1", protocol)
    assert "s3://bucket/table" in str(raised.value)
    assert "no rename" in str(raised.value)
    assert "`upload` protocol" in str(raised.value)


@pytest.mark.parametrize(
    ("protocol", "name"),
    [("manifest", COMMITTER_NAME), ("v1", "v1"), ("v2", "v2"), ("transactional", "transactional")],
)
def test_success_names_the_protocol(destination: str, protocol: str, name: str) -> None:
    """The manifest protocol keeps the class name Hadoop's own ManifestCommitter writes (tools key on it);
    the others write the protocol's name, as S3A's committers write theirs (``magic``, ``staging``)."""
    committer = mc.create_committer(destination, "job-1", protocol, config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})

    assert committer.commit_job().committer == name
    assert success_file(committer).committer == name
    committer.close()
