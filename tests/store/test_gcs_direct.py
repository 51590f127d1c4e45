"""A rename's rewrite and delete as direct requests on gcsfs's session (``gcs_direct``): on fake-gcs-server the
route is taken for names of any characters and a whole job commit lands byte for byte; a source gone and a
destination in the way are judged as before; every error status becomes exactly gcsfs's exception (against a
scripted server, for the statuses fake-gcs-server never answers); anything else stays on gcsfs's path."""

from __future__ import annotations

import asyncio
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
from manifest_committer.store import OpenedStore, RenameHint
from manifest_committer.store.gcs import GCSStore, is_transient_gcs, without_client_retries
from manifest_committer.store.gcs_direct import DirectObjectRequests
from tests.fixtures.committing import FAST, output, run_task
from tests.fixtures.stores import opened_as

pytestmark = pytest.mark.gcs

NAMES = ["a.csv", "dt=2024-01-01/a b+c%d~e.csv", "ünï/çø.csv", "x?y#z&w;v.csv", "and'quoted\".csv"]


def _store(bucket: str) -> OpenedStore[GCSStore]:
    return opened_as(f"gs://{bucket}/out", GCSStore)


def _gcsfs_calls(store: GCSStore, monkeypatch: pytest.MonkeyPatch, path_contains: str = "") -> list[str]:
    """The methods of the requests that go through gcsfs's ``_call`` (those whose path holds ``path_contains``)."""
    methods: list[str] = []
    original = store.fs._call

    async def spied(method: str, *args: Any, **kwargs: Any) -> Any:
        if path_contains in str(args[0] if args else ""):
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
    assert through_gcsfs == []
    assert sorted(direct) == ["DELETE"] * len(NAMES) + ["GET"] + ["POST"] * len(NAMES)  # GET: the sources listed
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
    seen = _gcsfs_calls(store, monkeypatch, "rewriteTo")
    direct = _direct_sends(store, monkeypatch)
    committer.commit_job()
    monkeypatch.undo()
    assert seen == []
    assert direct.count("POST") >= len(files)  # every file, and the job's own renames
    assert output(committer) == files


def test_with_direct_requests_off_a_job_commit_renames_through_gcsfs_alone(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store.direct.requests=false``: every rewrite goes through gcsfs's own call, in the committer's process and
    in its worker processes, and the job lands as on the direct route."""
    config = mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.store.direct.requests": "false"},
        save_retry_interval=0,
        store_retry_interval=0,
    )
    committer = mc.ManifestCommitter(f"gs://{gcs_bucket}/out", "job-gcsfs", config=config)
    committer.setup_job()
    files = {f"p={n % 3}/{name}": f"{n}:{name}".encode() * 50 for n, name in enumerate(NAMES * 2)}
    run_task(committer, "task_00000", "attempt_00000_0", files)
    store = committer.store
    assert isinstance(store, GCSStore)
    assert store._direct is None
    setup = committer._worker_setup()
    assert setup is not None and not setup.direct_requests
    worker_store = setup.open_store()
    assert isinstance(worker_store, GCSStore) and worker_store._direct is None
    worker_store.close()
    rewrites = _gcsfs_calls(store, monkeypatch, "rewriteTo")
    committer.commit_job()
    monkeypatch.undo()
    assert len(rewrites) >= len(files)  # every file, and the job's own renames
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
        content_type = "application/json"
        if isinstance(body, tuple):  # (content type, raw bytes): a batch answer
            content_type, payload = body
        else:
            payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
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


# --- batches ------------------------------------------------------------------------------------------------------


def test_a_batch_of_renames_is_one_batch_request_of_rewrites_then_one_of_deletes(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    direct = store._direct
    assert direct is not None
    for name in NAMES:
        store.write_bytes(f"{root}/src/{name}", name.encode() * 2)
    batches: list[list[str]] = []
    send_batch = direct._send_batch

    async def spied(requests: list[Any]) -> Any:
        batches.append([request.method for request in requests])
        return await send_batch(requests)

    monkeypatch.setattr(direct, "_send_batch", spied)
    pairs = [(f"{root}/src/{name}", f"{root}/dst/{name}") for name in NAMES]
    assert store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * len(pairs)) == [None] * len(NAMES)
    monkeypatch.undo()
    assert batches == [["POST"] * len(NAMES), ["DELETE"] * len(NAMES)]
    for name in NAMES:
        assert store.info(f"{root}/src/{name}") is None
        assert store.read_bytes(f"{root}/dst/{name}") == name.encode() * 2
    store.close()


def test_in_a_batch_a_source_gone_fails_only_its_own_rename(gcs_bucket: str) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    for name in NAMES:
        store.write_bytes(f"{root}/src/{name}", name.encode())
    bucket = store.fs.split_path(root)[0]
    listed = {
        name: sync(
            store.fs.loop,
            store.fs._call,
            "GET",
            "b/{}/o/{}",
            bucket,
            store.fs.split_path(f"{root}/src/{name}")[1],
            json_out=True,
        )
        for name in NAMES
    }
    store.fs.rm_file(f"{root}/src/{NAMES[1]}")

    async def all_renames() -> list[Any]:
        renames = [
            store._rename(f"{root}/src/{name}", f"{root}/dst/{name}", RenameHint(None, dest_clear=True), listed[name])
            for name in NAMES
        ]
        return await asyncio.gather(*renames, return_exceptions=True)

    outcomes = sync(store.fs.loop, all_renames)
    assert [type(outcome) for outcome in outcomes] == [type(None), FileNotFoundError] + [type(None)] * (len(NAMES) - 2)
    assert store.info(f"{root}/dst/{NAMES[1]}") is None
    for name in NAMES[:1] + NAMES[2:]:
        assert store.read_bytes(f"{root}/dst/{name}") == name.encode()
    store.close()


def _batch_answer(parts: list[tuple[int, int, dict[str, Any] | None]]) -> tuple[str, bytes]:
    """A multipart batch answer as the JSON API writes it: (response index, status, JSON body) a part."""
    boundary = "batch_scripted"
    text = "".join(
        f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{index}>\r\n\r\n"
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\r\n{json.dumps(body) if body else ''}\r\n"
        for index, status, body in parts
    )
    return f"multipart/mixed; boundary={boundary}", (text + f"--{boundary}--\r\n").encode()


def _errors_of_deletes(fs: Any, direct: DirectObjectRequests, keys: list[str]) -> list[Any]:
    async def deletes() -> list[Any]:
        return await asyncio.gather(*(direct.delete("bk", key, "7") for key in keys), return_exceptions=True)

    return list(sync(fs.loop, deletes))


def test_each_part_of_a_batch_answer_is_judged_as_its_request_alone() -> None:
    statuses = [204, 404, 412, 403, 429, 503, 502, 500]
    keys = [f"k{status}" for status in statuses]
    error = {"error": {"code": 0, "message": "scripted"}}
    with _scripted_server() as server:
        fs = without_client_retries(_scripted_fs(server))
        direct = DirectObjectRequests.of(fs)
        assert direct is not None
        answer = _batch_answer([(i, status, error if status >= 400 else None) for i, status in enumerate(statuses)])
        server.script = [(200, answer)] + [(status, error) for status in statuses if status >= 400]
        batched = _errors_of_deletes(fs, direct, keys)
        alone = [
            _raised(lambda key=key: sync(fs.loop, direct.delete, "bk", key, "7")) if status >= 400 else None
            for key, status in zip(keys, statuses, strict=True)
        ]
        sync(fs.loop, fs._session.close)
    assert server.seen[0][0] == "POST" and server.seen[0][1].startswith("/batch/storage/v1")
    assert len(server.seen) == len(statuses)  # the batch, then each error alone
    for got, expected in zip(batched, alone, strict=True):
        assert type(got) is type(expected)
        assert str(got) == str(expected)


def test_a_part_missing_from_a_batch_answer_is_a_lost_answer_and_a_failed_batch_fails_each() -> None:
    with _scripted_server() as server:
        fs = without_client_retries(_scripted_fs(server))
        direct = DirectObjectRequests.of(fs)
        assert direct is not None
        server.script = [
            (200, _batch_answer([(0, 204, None)])),
            (503, {"error": {"code": 503, "message": "busy"}}),
        ]
        lost = _errors_of_deletes(fs, direct, ["a", "b"])
        failed = _errors_of_deletes(fs, direct, ["a", "b"])
        sync(fs.loop, fs._session.close)
    assert lost[0] is None
    assert type(lost[1]).__name__ == "ClientPayloadError" and is_transient_gcs(lost[1])
    assert [getattr(error, "code", None) for error in failed] == [503, 503]
    assert all(is_transient_gcs(error) for error in failed)


def test_sources_far_apart_in_the_listing_are_all_found_on_its_later_pages(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _store(gcs_bucket)
    store, root = opened.store, opened.path
    sources = [f"{root}/src/f{n}.csv" for n in range(3)]
    for n, source in enumerate(sources):
        store.write_bytes(source, f"{n}".encode())
        for other in range(20):  # names sorting between the sources: more than the first page holds
            store.write_bytes(f"{root}/src/f{n}.csv.other{other:02d}", b"x")
    sends = _direct_sends(store, monkeypatch)
    pairs = [(source, source.replace("/src/", "/dst/")) for source in sources]
    assert store.rename_files(pairs, [RenameHint(None, dest_clear=True)] * len(pairs)) == [None] * len(pairs)
    monkeypatch.undo()
    assert sends.count("GET") == 2  # a first page of 12 names, then a full page; no probe of a source
    for n, (_, dest) in enumerate(pairs):
        assert store.read_bytes(dest) == f"{n}".encode()
    store.close()
