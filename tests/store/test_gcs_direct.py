"""A rename's rewrite and delete as direct requests on gcsfs's session (``gcs_direct``): on fake-gcs-server the
route is taken for names of any characters and a whole job commit lands byte for byte; a source gone and a
destination in the way are judged as before; every error status becomes exactly gcsfs's exception (against a
scripted server, for the statuses fake-gcs-server never answers); anything else stays on gcsfs's path."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import gcsfs
import pytest
from fsspec.asyn import sync

import manifest_committer as mc
from manifest_committer.store import OpenedStore, RenameHint, open_store
from manifest_committer.store.gcs import GCSStore, without_client_retries
from manifest_committer.store.gcs_direct import DirectObjectRequests
from tests.fixtures.committing import FAST, output, run_task

pytestmark = pytest.mark.gcs

NAMES = ["a.csv", "dt=2024-01-01/a b+c%d~e.csv", "ünï/çø.csv", "x?y#z&w;v.csv", "and'quoted\".csv"]


def _store(bucket: str) -> OpenedStore[GCSStore]:
    opened = open_store(f"gs://{bucket}/out")
    assert isinstance(opened.store, GCSStore)
    return OpenedStore(opened.store, opened.path)


def _gcsfs_calls(store: GCSStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods of every request that goes through gcsfs's ``_call``."""
    methods: list[str] = []
    original = store.fs._call

    async def spied(method: str, *args: Any, **kwargs: Any) -> Any:
        methods.append(method)
        return await original(method, *args, **kwargs)

    monkeypatch.setattr(store.fs, "_call", spied)
    return methods


def _direct_sends(store: GCSStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    direct = store._direct
    assert direct is not None
    methods: list[str] = []
    send = direct._send

    async def spied(method: str, *args: Any) -> bytes:
        methods.append(method)
        return await send(method, *args)

    monkeypatch.setattr(direct, "_send", spied)
    return methods


def test_a_batch_of_any_names_renames_directly_not_through_gcsfs(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    for name in NAMES:
        store.write_bytes(f"{root}/src/{name}", name.encode() * 3)
    pairs = [(f"{root}/src/{name}", f"{root}/dst/{name}") for name in NAMES]
    through_gcsfs = _gcsfs_calls(store, monkeypatch)
    direct = _direct_sends(store, monkeypatch)
    assert store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * len(pairs)) == [None] * len(NAMES)
    monkeypatch.undo()
    assert through_gcsfs == ["GET"]  # the one listing of the sources' generations
    assert sorted(direct) == ["DELETE"] * len(NAMES) + ["POST"] * len(NAMES)
    for name in NAMES:
        assert store.info(f"{root}/src/{name}") is None
        assert store.read_bytes(f"{root}/dst/{name}") == name.encode() * 3
    store.close()


def test_a_job_commit_lands_byte_for_byte_with_no_rewrite_or_delete_through_gcsfs(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    committer = mc.ManifestCommitter(f"gs://{gcs_bucket}/out", "job-direct", config=FAST)
    committer.setup_job()
    files = {f"p={n % 3}/{name}": f"{n}:{name}".encode() * 50 for n, name in enumerate(NAMES * 4)}
    items = sorted(files.items())
    run_task(committer, "task_00000", "attempt_00000_0", dict(items[: len(items) // 2]))
    run_task(committer, "task_00001", "attempt_00001_0", dict(items[len(items) // 2 :]))
    store = committer.store
    assert isinstance(store, GCSStore)
    assert store._direct is not None
    original = store.fs._call
    seen: list[str] = []

    async def spied(method: str, *args: Any, **kwargs: Any) -> Any:
        if "rewriteTo" in str(args[0] if args else ""):
            seen.append(method)
        return await original(method, *args, **kwargs)

    monkeypatch.setattr(store.fs, "_call", spied)
    direct = _direct_sends(store, monkeypatch)
    committer.commit_job()
    monkeypatch.undo()
    assert seen == []
    assert direct.count("POST") >= len(files)  # every file, and the job's own renames
    assert output(committer) == files


def test_a_source_gone_is_not_found_and_the_destination_stays_clear(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    source, dest = f"{root}/src/a.csv", f"{root}/dst/a.csv"
    store.write_bytes(source, b"a")
    bucket, key, _ = store.fs.split_path(source)
    listed = sync(store.fs.loop, store.fs._call, "GET", "b/{}/o/{}", bucket, key, json_out=True)
    store.fs.rm_file(source)
    assert store._direct is not None
    with pytest.raises(FileNotFoundError):
        sync(store.fs.loop, store._rename, source, dest, RenameHint(None, dest_clear=True), listed)
    assert store.info(dest) is None
    store.close()


def test_an_interrupted_rename_is_finished_by_a_direct_delete(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    source, dest = f"{root}/src/a.csv", f"{root}/dst/a.csv"
    store.write_bytes(source, b"same bytes")
    store.fs.cp_file(source, dest)  # the rewrite of an earlier attempt landed, its delete did not
    store.rename_file(source, dest)
    assert store.info(source) is None
    assert store.read_bytes(dest) == b"same bytes"
    store.close()


def test_a_destination_in_the_way_is_never_overwritten(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    source, dest = f"{root}/src/a.csv", f"{root}/dst/a.csv"
    store.write_bytes(source, b"new")
    store.write_bytes(dest, b"someone else's")
    [outcome] = store.rename_files([(source, dest)])
    assert isinstance(outcome, FileExistsError)
    assert store.read_bytes(dest) == b"someone else's"
    assert store.read_bytes(source) == b"new"
    store.close()


# --- answers fake-gcs-server never gives, from a scripted server -------------------------------------------------


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, body) of ``server.script``; records the request lines."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        server: Any = self.server
        server.seen.append((self.command, self.path, dict(self.headers)))
        status, body = server.script.pop(0)
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def log_message(self, *_: Any) -> None:
        pass


@contextlib.contextmanager
def _scripted_server() -> Iterator[Any]:
    server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.script, server.seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _scripted_fs(server: Any, **options: Any) -> Any:
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    return gcsfs.GCSFileSystem(endpoint_url=endpoint, token="anon", project="test", skip_instance_cache=True, **options)


def _raised(call: Any) -> BaseException:
    try:
        call()
    except Exception as error:
        return error
    raise AssertionError("no error")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 412, 429, 500, 502, 503, 504])
def test_every_error_status_is_gcsfs_own_exception(status: int) -> None:
    body = {"error": {"code": status, "message": f"scripted {status}"}}
    with _scripted_server() as server:
        fs = without_client_retries(_scripted_fs(server))
        direct = DirectObjectRequests.of(fs)
        assert direct is not None
        server.script = [(status, body)] * 4
        through_gcsfs = [
            _raised(lambda: sync(fs.loop, fs._call, "DELETE", "b/{}/o/{}", "bk", "a/b", generation="7")),
            _raised(
                lambda: sync(
                    fs.loop,
                    fs._call,
                    "POST",
                    "b/{}/o/{}/rewriteTo/b/{}/o/{}",
                    "bk",
                    "a/b",
                    "bk",
                    "c d",
                    headers={"Content-Type": "application/json"},
                    json_out=True,
                    sourceGeneration="7",
                    ifGenerationMatch=0,
                )
            ),
        ]
        directly = [
            _raised(lambda: sync(fs.loop, direct.delete, "bk", "a/b", "7")),
            _raised(lambda: sync(fs.loop, direct.rewrite, ("bk", "a/b"), ("bk", "c d"), "7", None)),
        ]
        sync(fs.loop, fs._session.close)
    for expected, got in zip(through_gcsfs, directly, strict=True):
        assert type(got) is type(expected)
        assert str(got) == str(expected)
        assert getattr(got, "code", None) == getattr(expected, "code", None)
    gcsfs_lines = [(method, path) for method, path, _ in server.seen[:2]]
    direct_lines = [(method, path) for method, path, _ in server.seen[2:]]
    assert direct_lines == gcsfs_lines  # the same request lines, byte for byte
    assert [headers.get("Content-Type") for _, _, headers in server.seen] == [None, "application/json"] * 2


def test_a_rewrite_not_done_is_continued_with_its_token_before_the_delete() -> None:
    with _scripted_server() as server:
        fs = without_client_retries(_scripted_fs(server))
        store = GCSStore(fs)
        assert store._direct is not None
        server.script = [
            (200, {"done": False, "rewriteToken": "tok/1"}),
            (200, {"done": True, "resource": {"name": "d"}}),
            (204, None),
        ]
        sync(fs.loop, store._rename, "bk/s", "bk/d", RenameHint(None, dest_clear=True), {"generation": "5"})
        store.close()
    paths = [(method, path) for method, path, _ in server.seen]
    assert paths == [
        ("POST", "/storage/v1/b/bk/o/s/rewriteTo/b/bk/o/d?sourceGeneration=5&ifGenerationMatch=0"),
        ("POST", "/storage/v1/b/bk/o/s/rewriteTo/b/bk/o/d?sourceGeneration=5&ifGenerationMatch=0&rewriteToken=tok%2F1"),
        ("DELETE", "/storage/v1/b/bk/o/s?generation=5"),
    ]


def test_requester_pays_sends_its_user_project_directly() -> None:
    with _scripted_server() as server:
        fs = without_client_retries(_scripted_fs(server, requester_pays="payer"))
        direct = DirectObjectRequests.of(fs)
        assert direct is not None
        server.script = [(204, None)]
        sync(fs.loop, direct.delete, "bk", "k", "3")
        sync(fs.loop, fs._session.close)
    assert server.seen[0][1] == "/storage/v1/b/bk/o/k?generation=3&userProject=payer"


# --- gcsfs's path for everything the direct requests do not reproduce --------------------------------------------


class _OwnCall(gcsfs.GCSFileSystem):  # type: ignore[misc]
    async def _call(self, *args: Any, **kwargs: Any) -> Any:
        return await super()._call(*args, **kwargs)


def test_clients_it_does_not_reproduce_stay_on_gcsfs_path(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    options = dict(endpoint_url=opened.store.fs._endpoint, token="anon", project="test", skip_instance_cache=True)
    with_retries = gcsfs.GCSFileSystem(**options)
    assert DirectObjectRequests.of(with_retries) is None
    assert DirectObjectRequests.of(without_client_retries(_OwnCall(**options))) is None
    patched = without_client_retries(gcsfs.GCSFileSystem(**options))
    assert DirectObjectRequests.of(patched) is not None
    patched._get_headers = lambda headers, **_: headers or {}
    assert DirectObjectRequests.of(patched) is None
    assert DirectObjectRequests.of(object()) is None
    opened.store.close()


def test_the_gcsfs_path_renames_as_before(gcs_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    monkeypatch.setattr(store, "_direct", None)
    for name in NAMES[:2]:
        store.write_bytes(f"{root}/src/{name}", name.encode())
    pairs = [(f"{root}/src/{name}", f"{root}/dst/{name}") for name in NAMES[:2]]
    through_gcsfs = _gcsfs_calls(store, monkeypatch)
    assert store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * 2) == [None, None]
    assert through_gcsfs.count("POST") == 2 and through_gcsfs.count("DELETE") == 2
    for name in NAMES[:2]:
        assert store.read_bytes(f"{root}/dst/{name}") == name.encode()
    store.close()
