"""The GCS binding against fake-gcs-server: renames with the job's knowledge (``RenameHint``)."""

from __future__ import annotations

from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import OpenedStore, RenameHint
from manifest_committer.store.gcs import GCSStore
from tests.fixtures.committing import FAST, output, run_task
from tests.fixtures.stores import opened_as

pytestmark = pytest.mark.gcs


def _store(bucket: str) -> OpenedStore[GCSStore]:
    return opened_as(f"gs://{bucket}/out", GCSStore)


def _count_requests(store: GCSStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every JSON API request of ``store``'s client, as ``METHOD path-template``."""
    requests: list[str] = []
    original = store.fs._call

    async def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        requests.append(f"{method} {path} {' '.join(str(a) for a in args)}")
        return await original(method, path, *args, **kwargs)

    monkeypatch.setattr(store.fs, "_call", counted)
    direct = store._direct
    if direct is not None:
        send = direct._send

        async def counted_direct(method: str, template: str, args: tuple[str, ...], *rest: Any) -> bytes:
            requests.append(f"{method} {template} {' '.join(args)}")
            return await send(method, template, args, *rest)

        monkeypatch.setattr(direct, "_send", counted_direct)
    return requests


def test_a_batch_with_clear_destinations_is_one_listing_then_a_rewrite_and_a_delete_a_file(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    names = [f"p={n % 2}/f{n}.csv" for n in range(6)]
    for name in names:
        store.write_bytes(f"{root}/src/{name}", name.encode())
    store.write_bytes(f"{root}/src/p=0/other.csv", b"not renamed")
    requests = _count_requests(store, monkeypatch)
    pairs = [(f"{root}/src/{name}", f"{root}/dst/{name}") for name in names]
    outcomes = store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * len(pairs))
    monkeypatch.undo()
    assert outcomes == [None] * len(pairs)
    assert [request for request in requests if request.startswith("GET")] == [f"GET b/{{}}/o {gcs_bucket}"]
    assert sum(request.startswith("POST") for request in requests) == len(pairs)
    assert sum(request.startswith("DELETE") for request in requests) == len(pairs)
    for name in names:
        assert store.read_bytes(f"{root}/dst/{name}") == name.encode()
        assert store.info(f"{root}/src/{name}") is None
    assert store.read_bytes(f"{root}/src/p=0/other.csv") == b"not renamed"
    store.close()


def test_a_source_the_listing_did_not_show_is_still_not_found(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"a")
    pairs = [(f"{root}/src/a.csv", f"{root}/dst/a.csv"), (f"{root}/src/missing.csv", f"{root}/dst/missing.csv")]
    outcomes = store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * 2)
    assert outcomes[0] is None
    assert isinstance(outcomes[1], FileNotFoundError)
    assert store.info(f"{root}/dst/missing.csv") is None
    store.close()


def test_without_the_hint_an_object_at_the_destination_is_refused(gcs_bucket: str) -> None:
    """fake-gcs-server ignores the rewrite's precondition: the probe the hint spares is the guard here."""
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    store.write_bytes(f"{root}/src/a.csv", b"new")
    store.write_bytes(f"{root}/dst/a.csv", b"theirs")
    outcomes = store.rename_files([(f"{root}/src/a.csv", f"{root}/dst/a.csv")], [RenameHint(None, dest_clear=False)])
    assert isinstance(outcomes[0], FileExistsError)
    assert store.read_bytes(f"{root}/dst/a.csv") == b"theirs"
    store.close()


def test_a_job_commit_makes_no_probe_of_a_file(gcs_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    committer = mc.ManifestCommitter(f"gs://{gcs_bucket}/out", "job-hints", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"p=1/a.csv": b"a", "p=1/b.csv": b"b", "p=2/c.csv": b"c"})
    run_task(committer, "task_00001", "attempt_00001_0", {"p=2/d.csv": b"d"})
    seen: list[str] = []
    from manifest_committer.store import gcs as gcs_module

    original = gcs_module.GCSStore._get

    async def counted_get(self: GCSStore, bucket: str, key: str) -> Any:
        seen.append(key)
        return await original(self, bucket, key)

    monkeypatch.setattr(gcs_module.GCSStore, "_get", counted_get)
    committer.commit_job()
    monkeypatch.undo()
    assert not [key for key in seen if key.endswith(".csv")], seen
    assert output(committer) == {"p=1/a.csv": b"a", "p=1/b.csv": b"b", "p=2/c.csv": b"c", "p=2/d.csv": b"d"}
