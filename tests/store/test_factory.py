"""The store factory: URLs it cannot serve are refused with the committer's own error, saying what would work."""

from __future__ import annotations

import sys

import pytest

import manifest_committer as mc
from manifest_committer.store import open_store


@pytest.mark.parametrize("url", ["gss://bucket/out", "nosuchscheme://x/y"])
def test_an_unknown_scheme_lists_the_supported_ones(url: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        open_store(url)
    message = str(raised.value)
    assert message.startswith(f"{url}: unknown scheme")
    assert "gs://" in message
    assert "pip install 'manifest-committer[azure]'" in message
    assert "Protocol not known" not in message


@pytest.mark.parametrize("url", ["hdfs://namenode:8020/out", "viewfs://cluster/out", "webhdfs://nn/out"])
def test_hdfs_is_refused_before_fsspec_loads_a_jvm(url: str, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match="HDFS is not supported") as raised:
        mc.ManifestCommitter(url, "job-1")
    assert url in str(raised.value)
    captured = capfd.readouterr()
    assert "libjvm" not in captured.out + captured.err


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [("abfs://container/out", "adlfs", "azure"), ("az://c/out", "adlfs", "azure"), ("gs://bucket/out", "gcsfs", "gcs")],
)
def test_a_missing_extra_says_what_to_install(
    url: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        open_store(url)
    message = str(raised.value)
    assert message.startswith(f"{url}: ")
    assert f"pip install 'manifest-committer[{extra}]'" in message
    assert module in message


def test_a_known_fsspec_filesystem_without_a_binding_is_refused_before_it_is_built() -> None:
    """sftp's backend (paramiko) need not be installed: the refusal comes first, says how to bind the store and
    lists what works."""
    with pytest.raises(mc.UnsupportedStoreError, match=r"sftp://h/out: no store binding for the sftp://") as raised:
        open_store("sftp://h/out")
    message = str(raised.value)
    assert "Registered: local (file://, local://, plain paths)" in message
    assert "register_store_binding" in message
    assert "manifest_committer.stores" in message


def test_local_and_memory_urls_still_open(tmp_path: object) -> None:
    assert open_store(f"file://{tmp_path}").path == str(tmp_path)
    assert open_store("memory://factory-test/out").path == "/factory-test/out"
