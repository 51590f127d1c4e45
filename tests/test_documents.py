"""manifest_committer.documents (the document kinds, their schemas, which file is which), and the suite's own
check that every document the library writes in a test matches its schema (tests/fixtures/documents.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import manifest_committer as mc
from manifest_committer import documents
from manifest_committer.documents import DocumentKind, check_document, document_kind_of, schema, schema_errors
from manifest_committer.markers.client import request_json
from manifest_committer.markers.layout import MarkerPaths
from manifest_committer.markers.server import PING_PATH, MarkerServer
from manifest_committer.paths import JobPaths
from manifest_committer.retry import RetryPolicy
from manifest_committer.stages.journal import CommitRecord
from manifest_committer.store.factory import open_destination_store
from tests.fixtures import documents as checks
from tests.fixtures.committing import FAST, run_task

JOB = "s3://bucket/out/_temporary/job-1/00"
KINDS_BY_PATH = {
    "s3://bucket/out/_SUCCESS": DocumentKind.SUCCESS_DATA,
    "/reports/summary-job-1.json": DocumentKind.SUCCESS_DATA,
    f"{JOB}/_SUCCESS.tmp": DocumentKind.SUCCESS_DATA,
    f"{JOB}/previous-_SUCCESS": DocumentKind.SUCCESS_DATA,
    f"{JOB}/commit-finished": DocumentKind.SUCCESS_DATA,
    "/out/_temporary/0/_COMMIT_FINISHED.json": DocumentKind.SUCCESS_DATA,
    "/out/_temporary/0/_PREVIOUS_SUCCESS": DocumentKind.SUCCESS_DATA,
    f"{JOB}/manifests/task_1-manifest.json": DocumentKind.TASK_MANIFEST,
    f"{JOB}/manifests/attempt_1_0-manifest.json.tmp": DocumentKind.TASK_MANIFEST,
    "/diagnostics/job-1/task_1-manifest.json": DocumentKind.TASK_MANIFEST,
    "/out/_temporary/0/_tasks/task_1.json": DocumentKind.TASK_MANIFEST,
    "/out/_temporary/0/_tasks/attempt_1_0.json.tmp": DocumentKind.TASK_MANIFEST,
    "gs://bucket/out/dt=1/_committed_1234": DocumentKind.COMMITTED_RECORD,
    f"{JOB}/pending/attempt_1_0/0123abcd.pending": DocumentKind.PENDING_UPLOAD_RECORD,
    f"{JOB}/commit-started": DocumentKind.COMMIT_STARTED,
    f"{JOB}/journal/00/attempt_1_0-0.intent": DocumentKind.JOURNAL_UNIT_INTENT,
    f"{JOB}/journal/01/attempt_1_0-1000.done": DocumentKind.JOURNAL_UNIT_DONE,
    f"{JOB}/journal/dirs-00.json": DocumentKind.JOURNAL_DIRECTORIES,
    "/out/_temporary/0/_COMMIT_STARTED.json": DocumentKind.FILE_OUTPUT_COMMIT_STARTED,
    f"{JOB}/markers/server.json": DocumentKind.MARKER_SERVER_STATE,
    f"{JOB}/markers/heartbeat": DocumentKind.HEARTBEAT,
    f"{JOB}/heartbeats/attempt_1_0": DocumentKind.HEARTBEAT,
    "/out/_temporary/.trash/job-1=ab12/00/commit-started": DocumentKind.COMMIT_STARTED,
    # not documents
    "/out/dt=1/part-0.parquet": None,
    "/out/_started_1234": None,
    "/out/_committed_x": None,
    f"{JOB}/markers/MARKERS0": None,
    f"{JOB}/markers/MARKERS.type": None,
    f"{JOB}/markers/dt=1/part-0.parquet.marker.CREATE": None,
    f"{JOB}/protocol": None,
    f"{JOB}/journal/run-01": None,
    f"{JOB}/tasks/attempt_1_0/part-0.json": None,
    f"{JOB}/markers/.server.json.x1.tmp": None,
    "/out/_temporary/0/_JOB": None,
    "/out/_temporary/0/_tasks/task_1.csv": None,
    "/out/commit-started": None,
    "/out/heartbeats/a": None,
    "/out/markers/server.json": None,
    "/out/journal/00/x.done": None,
}


@pytest.mark.parametrize(("path", "kind"), KINDS_BY_PATH.items(), ids=list(KINDS_BY_PATH))
def test_a_file_is_known_by_its_name_and_place(path: str, kind: DocumentKind | None) -> None:
    assert document_kind_of(path) is kind


def test_every_kind_names_its_shipped_schema() -> None:
    for kind in DocumentKind:
        loaded = schema(kind)
        assert loaded["$id"].endswith("/" + kind.schema_file)
        assert loaded["title"]


def test_a_schema_is_a_fresh_copy_each_time() -> None:
    first = schema(DocumentKind.HEARTBEAT)
    first["required"].append("changed")
    assert "changed" not in schema(DocumentKind.HEARTBEAT)["required"]


def test_errors_start_with_the_field_at_fault() -> None:
    document = mc.SuccessData.create("job-1", "JobID", "committer_commit_job").to_dict()
    document["timestamp"] = -5
    document["filenames"] = ["file:///out/a", 3]
    assert schema_errors(DocumentKind.SUCCESS_DATA, document) == [
        "filenames[1]: 3 is not of type 'string'",
        "timestamp: -5 is less than the minimum of 0",
    ]
    assert schema_errors(DocumentKind.HEARTBEAT, []) == ["(document): [] is not of type 'object'"]


def test_check_document_names_the_file_and_the_first_field() -> None:
    check_document(DocumentKind.COMMIT_STARTED, orjson.loads(CommitRecord("job-1", {}, 5).to_json()), "x")
    with pytest.raises(mc.ManifestError, match=r"^s3://b/commit-started: not a valid commit-started document: "):
        check_document(DocumentKind.COMMIT_STARTED, {"type": "x"}, "s3://b/commit-started")


def test_validating_without_jsonschema_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    documents.validator.cache_clear()
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    try:
        with pytest.raises(mc.CommitterError, match=r"the 'schemas' extra"):
            schema_errors(DocumentKind.HEARTBEAT, {})
    finally:
        documents.validator.cache_clear()
    assert schema(DocumentKind.HEARTBEAT)["title"] == "Heartbeat", "loading needs no jsonschema"


# --- the suite's check of every document the library writes ---------------------------------------------------


@pytest.fixture
def caused_on_purpose() -> Iterator[None]:
    """This test causes violations on purpose and takes them; any it left are taken too, so it passes or fails
    on its own assertions."""
    yield
    checks.WATCH.take_violations()


def commit_a_job(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, job_id="job-checks", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"a"})
    committer.commit_job()


def test_an_invalid_document_the_library_writes_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caused_on_purpose: None
) -> None:
    monkeypatch.setattr(CommitRecord, "to_json", lambda record: b'{"type": "manifest-committer/commit-started/1"}')
    commit_a_job(str(tmp_path / "out"))
    found = checks.WATCH.take_violations()
    assert len(found) == 1
    assert "/out/_temporary/job-checks/00/commit-started): invalid commit-started.schema.json: " in found[0]
    assert "'jobId' is a required property" in found[0]


def test_a_valid_job_leaves_nothing_to_report(tmp_path: Path) -> None:
    commit_a_job(str(tmp_path / "out"))
    checks.check_other_processes(tmp_path)
    assert checks.WATCH.take_violations() == []


def test_documents_a_test_writes_are_its_own(tmp_path: Path) -> None:
    """Broken documents written on purpose, through the store, a stage's gate or the file system, are not checked,
    where they are written nor after the test."""
    opened = open_destination_store(str(tmp_path / "out"))
    store, dest = opened.store, opened.path
    store.write_bytes(dest + "/_SUCCESS", b"not json")
    store.write_bytes(JobPaths(dest, "job-1").commit_started_path, b'{"type": 1}')
    (tmp_path / "out" / "_committed_12").write_bytes(b"[]")
    (tmp_path / "summary-job-1.json").write_text("{}")
    checks.check_other_processes(tmp_path)
    assert checks.WATCH.take_violations() == []


def test_documents_other_processes_write_are_checked(
    tmp_path_factory: pytest.TempPathFactory, caused_on_purpose: None
) -> None:
    root = tmp_path_factory.mktemp("other")  # not tmp_path, which the check walks after every test
    script = (
        "import pathlib, sys\n"
        "root = pathlib.Path(sys.argv[1])\n"
        "(root / '_SUCCESS').write_text('{}')\n"
        "(root / 'other').mkdir()\n"
        "(root / 'other' / '_SUCCESS').write_bytes(b'')\n"  # Hadoop's FileOutputCommitter writes an empty one
        "(root / 'other' / 'part-0.json').write_text('{}')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(root)], check=True)
    checks.check_other_processes(root)
    found = checks.WATCH.take_violations()
    assert len(found) == 1
    assert found[0].startswith(f"{root}/_SUCCESS (written by another process): invalid success-data.schema.json")


def test_the_marker_servers_answers_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caused_on_purpose: None
) -> None:
    opened = open_destination_store(str(tmp_path / "out"))
    store, dest = opened.store, opened.path
    retry = RetryPolicy(attempts=1, initial_wait=0, is_retryable=lambda error: False)
    monkeypatch.setattr(MarkerServer, "identity", lambda server: {"serverId": 7})
    with MarkerServer(store, MarkerPaths(JobPaths(dest, "job-1")), retry) as server:
        assert server.state is not None
        status, _ = request_json(server.state, "GET", PING_PATH, timeout=5, secret=server.secret)
    assert status == 200
    found = checks.WATCH.take_violations()
    assert len(found) == 1
    assert "marker server answer 200 to /v1/markers/ping: invalid marker-ping-answer.schema.json: " in found[0]


def test_who_asked_is_read_from_the_call_stack() -> None:
    assert not checks.library_asked(sys._getframe())
    assert not checks.library_asked(None)
