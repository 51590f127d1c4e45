"""The formats of the marker state and the commit record, against their JSON Schemas in schemas/ (written by a
real job), and the names of the upload protocol's started-upload records."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import transaction_id
from manifest_committer.protocols.upload.records import (
    MAX_ENCODED_ID,
    started_record,
    started_record_id,
    started_record_name,
    upload_id_of_record,
)
from tests.fixtures.committing import run_task
from tests.fixtures.stage_context import load_schema


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(name: str, document: Any) -> list[str]:
    return [error.message for error in validator(name).iter_errors(document)]


def test_a_jobs_marker_state_and_commit_record_match_their_schemas(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    config = mc.CommitterConfig(mark_successful_jobs=True, cleanup_skipped=True)
    with mc.create_committer(dest, "job-1", "transactional", config=config) as committer:
        assert isinstance(committer, TransactionalCommitter)
        committer.setup_job()
        run_task(committer, "task_0", "attempt_0", {"dt=1/a.csv": b"a", "b.csv": b"b"})
        markers = Path(committer.marker_paths.markers_dir)
        server = orjson.loads((markers / "server.json").read_bytes())
        lease = orjson.loads((markers / "heartbeat").read_bytes())
        committer.commit_job()
    record = orjson.loads(Path(dest, f"_committed_{transaction_id('job-1')}").read_bytes())

    assert errors("marker-server-state.schema.json", server) == []
    assert errors("heartbeat.schema.json", lease) == []
    assert errors("committed-record.schema.json", record) == []
    assert lease["expirySeconds"] == 120.0 and "token" not in server and "secret" not in server


@pytest.mark.parametrize(
    ("name", "document"),
    [
        ("marker-server-state.schema.json", {"host": "a b", "port": 1, "jobId": "j", "markersDir": "m"}),
        ("marker-server-state.schema.json", {"host": "h", "port": 70000, "jobId": "j", "markersDir": "m"}),
        ("marker-server-state.schema.json", {"host": "h", "port": 1, "jobId": "j", "markersDir": "m", "token": "t"}),
        ("heartbeat.schema.json", {"jobId": "j", "timestampMs": 1, "expirySeconds": 0}),
        ("committed-record.schema.json", {"added": ["../outside.csv"]}),
        ("committed-record.schema.json", {"added": ["/abs.csv"]}),
        ("committed-record.schema.json", {"added": ["a//b.csv"]}),
        ("upload-started.schema.json", {"type": "manifest-committer/upload-started/1", "jobId": "j"}),
    ],
)
def test_documents_the_readers_refuse_are_outside_the_schemas(name: str, document: dict[str, Any]) -> None:
    assert errors(name, document) != []


@pytest.mark.parametrize("upload_id", ["2~AbCd.EfGh-ij_KL", "x" * 40, "y" * 600])
def test_a_started_records_name_gives_back_its_upload_id_or_its_document_does(upload_id: str) -> None:
    name = started_record_name(upload_id)
    document = started_record("job-1", "attempt_0", "bucket", "table/a.csv", upload_id)

    assert errors("upload-started.schema.json", orjson.loads(document)) == []
    assert "/" not in name and len(name) <= MAX_ENCODED_ID + 2
    if len(upload_id) < 500:
        assert upload_id_of_record(name) == upload_id
    else:
        assert name.startswith("h-") and upload_id_of_record(name) is None
    assert started_record_id(document, "test", "job-1") == upload_id
    with pytest.raises(mc.ManifestError, match="field 'jobId'"):
        started_record_id(document, "test", "job-2")


def test_the_marker_servers_answers_match_their_schemas(tmp_path: Path) -> None:
    from manifest_committer.markers import MarkerPaths, MarkerServer
    from manifest_committer.markers.client import request_json
    from manifest_committer.markers.server import ALL_PATH, CREATE_PATH, PING_PATH
    from manifest_committer.paths import JobPaths
    from manifest_committer.retry import RetryPolicy
    from manifest_committer.store import open_store

    opened = open_store(str(tmp_path / "out"))
    store, root = opened.store, opened.path
    retry = RetryPolicy(attempts=2, initial_wait=0.001, is_retryable=store.is_transient)
    with MarkerServer(store, MarkerPaths(JobPaths(root, "job-1", 0)), retry, batch_interval_ms=5) as server:
        assert server.state is not None
        request = {"marker": "dt=1/a.csv.marker.CREATE"}
        created = request_json(server.state, "POST", CREATE_PATH, request, timeout=5, secret=server.secret)
        refused = request_json(server.state, "POST", CREATE_PATH, {"marker": "../x"}, timeout=5, secret=server.secret)
        unauthenticated = request_json(server.state, "POST", CREATE_PATH, request, timeout=5)
        ping = request_json(server.state, "GET", PING_PATH, timeout=5, secret=server.secret)
        listed = request_json(server.state, "GET", ALL_PATH, timeout=5, secret=server.secret)

    assert errors("marker-create-request.schema.json", request) == []
    assert created[0] == 200 and errors("marker-create-answer.schema.json", created[1]) == []
    assert refused[0] == 400 and errors("marker-error-answer.schema.json", refused[1]) == []
    assert unauthenticated[0] == 401 and errors("marker-error-answer.schema.json", unauthenticated[1]) == []
    assert ping[0] == 200 and errors("marker-ping-answer.schema.json", ping[1]) == []
    assert listed[0] == 200 and errors("marker-list-answer.schema.json", listed[1]) == []
