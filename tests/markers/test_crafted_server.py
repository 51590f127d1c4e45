"""A crafted ``server.json`` that points the tasks at another host: markers must not be lost to it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

import manifest_committer as mc
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from tests.fixtures.committing import run_task


class _Impostor(BaseHTTPRequestHandler):
    """Answers every request as a marker server that recorded it; it holds no job's secret."""

    protocol_version = "HTTP/1.1"
    identity: ClassVar[dict[str, Any]] = {}
    received: ClassVar[list[bytes]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, body: Any) -> None:
        data = orjson.dumps(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(self.identity)

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self._answer({"created": True})


@pytest.fixture
def impostor() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_server_record_pointing_elsewhere_loses_no_marker(tmp_path: Path, impostor: ThreadingHTTPServer) -> None:
    """Suspected: a crafted server record can point clients at any host, which then answers for the markers."""
    dest = str(tmp_path / "out")
    config = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, heartbeat_expiry_seconds=0.2)
    driver = mc.create_committer(dest, "job-1", "transactional", config=config)
    assert isinstance(driver, TransactionalCommitter)
    driver.setup_job()
    state_path = Path(driver.marker_paths.server_state)
    state = orjson.loads(state_path.read_bytes())
    _Impostor.identity = {key: state.get(key) for key in ("token", "jobId", "markersDir", "serverId")}
    state["host"], state["port"] = impostor.server_address[0], impostor.server_address[1]
    state_path.write_bytes(orjson.dumps(state))
    with mc.create_committer(dest, "job-1", "transactional", config=config) as task_side:
        run_task(task_side, "task_0", "attempt_0", {"a.csv": b"a"}, commit=False)
    assert driver.marker_server is not None
    driver.marker_server.stop(flush=False)
    driver.close()  # the driver dies; only the markers can find the task's file now
    time.sleep(0.3)

    (rolled,) = mc.rollback(dest)

    assert len(rolled.deleted) == 1
    assert [p.name for p in Path(dest).iterdir() if not p.name.startswith("_")] == []
