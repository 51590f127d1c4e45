"""The JSON Schemas in schemas/ are the source of truth for the on-disk formats: written files must match them,
Hadoop's documents must match them, and broken documents must not."""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

import manifest_committer as mc
from manifest_committer.admission import destination_relative_problem, relative_problem
from manifest_committer.documents import DocumentKind, document_kind_of, schema_errors, schema_registry
from manifest_committer.entry_file import EntryFile, FilesToCommit, FileToCommit
from manifest_committer.errors import MarkerError
from manifest_committer.manifest import MANIFEST_TYPE
from manifest_committer.markers.client import request_json
from manifest_committer.markers.heartbeat import Heartbeat
from manifest_committer.markers.layout import Marker, MarkerPaths, parse_marker
from manifest_committer.markers.server import ALL_PATH, CREATE_PATH, PING_PATH, MarkerServer, ServerState
from manifest_committer.paths import JobPaths, is_valid_id
from manifest_committer.protocols.transactional.records import TransactionRecord
from manifest_committer.protocols.upload.records import PendingRecord, started_record, started_record_id
from manifest_committer.retry import RetryPolicy
from manifest_committer.stages.file_output.journal import FileOutputCommitRecord, PlannedFile
from manifest_committer.stages.journal import CommitRecord
from manifest_committer.store import StoreOperations
from manifest_committer.store.factory import open_destination_store
from manifest_committer.store.pending_upload import PendingUpload
from manifest_committer.store.wrapping import WrappingStore
from manifest_committer.success_data import SUCCESS_NAME
from tests.fixtures.committing import run_task
from tests.fixtures.emulators import Emulator, fresh_root
from tests.fixtures.stage_context import FAST_CONFIG, load_data, load_schema

MANIFEST_SCHEMA = "task-manifest.schema.json"
SUCCESS_SCHEMA = "success-data.schema.json"

Document = dict[str, Any]


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(name), format_checker=jsonschema.FormatChecker())


def errors_of(name: str, document: Any) -> list[str]:
    return [error.message for error in validator(name).iter_errors(document)]


def undescribed(node: Any, where: str = "") -> list[str]:
    """Properties without a description, anywhere in a schema (``if``/``then``/``else`` only narrow others)."""
    missing: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                missing += [f"{where}/properties/{name}" for name, child in value.items() if "description" not in child]
            if key not in ("if", "then", "else"):
                missing += undescribed(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            missing += undescribed(value, f"{where}/{index}")
    return missing


@pytest.mark.parametrize("kind", list(DocumentKind), ids=[kind.value for kind in DocumentKind])
def test_schemas_ship_as_package_data_and_are_valid_draft_2020_12(kind: DocumentKind) -> None:
    """Each schema is valid, names itself, and says what the document and each of its fields is."""
    schema = load_schema(kind.schema_file)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "https://manifest-committer.invalid/schemas/" + kind.schema_file
    assert schema["title"]
    assert len(schema["description"]) > 100
    assert undescribed(schema) == []


def test_schema_constants_are_the_library_constants() -> None:
    manifest = load_schema(MANIFEST_SCHEMA)
    success = load_schema(SUCCESS_SCHEMA)
    assert manifest["properties"]["type"]["const"] == MANIFEST_TYPE
    assert manifest["properties"]["version"]["const"] == 1
    assert success["properties"]["name"]["const"] == SUCCESS_NAME


def test_written_task_manifest_has_every_key_the_schema_describes() -> None:
    """Key for key: what the model writes is exactly the set of keys the schema names (plus nothing else)."""
    schema = load_schema(MANIFEST_SCHEMA)
    manifest = mc.TaskManifest(
        "job",
        0,
        "task",
        "attempt",
        "file:///d/_temporary/job/00/tasks/attempt",
        files=[mc.FileEntry("file:///s", "file:///d/f", 1, "etag")],
        directories=[mc.DirEntry("file:///d/x", mc.EntryStatus.DIR, 1)],
    )
    written = json.loads(manifest.to_json())
    optional = {"pendingUploads"}  # the upload protocol's field, absent in every other protocol's manifests
    assert set(written) == set(schema["properties"]) - optional == set(schema["required"])
    assert set(written["files"][0]) == set(schema["$defs"]["fileEntry"]["properties"])
    assert set(written["directories"][0]) == set(schema["$defs"]["dirEntry"]["properties"])
    assert set(written["iostatistics"]) == set(schema["$defs"]["iostatistics"]["required"])


def test_written_success_data_has_the_required_keys_of_the_schema() -> None:
    schema = load_schema(SUCCESS_SCHEMA)
    written = json.loads(mc.SuccessData.create("job", "JobID", "committer_commit_job").to_json())
    assert set(written) == set(schema["required"])
    assert set(written) <= set(schema["properties"])


def run_job(destination: str, report_dir: str | None = None) -> tuple[list[bytes], bytes]:
    """A real job of three tasks; returns the raw manifests (read before job commit) and the raw ``_SUCCESS``."""
    config = FAST_CONFIG
    if report_dir is not None:
        config = mc.CommitterConfig.from_hadoop_conf(
            {"mapreduce.manifest.committer.summary.report.directory": report_dir},
            save_retry_interval=0.0,
            store_retry_interval=0.0,
        )
    committer = mc.ManifestCommitter(destination, job_id="job-schemas", config=config)
    committer.setup_job()
    manifests: list[bytes] = []
    for index, name in enumerate(["year=2024/part 0%.csv", "year=2024/month=01/part-1.csv", "_hidden.csv"]):
        task = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
        with task.fs.open(f"{task.work_path}/{name}", "wb") as handle:
            handle.write(b"x" * (index + 1))
        if index == 0:
            task.fs.makedirs(f"{task.work_path}/empty/nested", exist_ok=True)
        committer.commit_task(task)
        manifest_path = committer.paths.manifest_path(task.task_id)
        manifests.append(committer.store.read_bytes(manifest_path))
    committer.commit_job()
    return manifests, committer.store.read_bytes(committer.paths.success_path)


def test_manifests_and_success_written_by_a_real_job_validate(destination: str) -> None:
    manifests, success = run_job(destination)
    assert len(manifests) == 3
    for raw in manifests:
        document = json.loads(raw)
        assert errors_of(MANIFEST_SCHEMA, document) == []
        assert document["files"], "every task wrote a file"
    first = json.loads(manifests[0])
    assert {entry["l"] for entry in first["directories"]} == {1, 2}
    success_document = json.loads(success)
    assert errors_of(SUCCESS_SCHEMA, success_document) == []
    assert len(success_document["filenames"]) == 3


def test_summary_reports_validate(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _, success = run_job(str(tmp_path / "out"), report_dir=str(reports))
    report = json.loads((reports / "summary-job-schemas.json").read_bytes())
    assert errors_of(SUCCESS_SCHEMA, report) == []
    assert report["jobId"] == json.loads(success)["jobId"] == "job-schemas"
    assert report["diagnostics"]["mapreduce.manifest.committer.io.threads"] == "32"

    failed = mc.SuccessData.create("job-failed", "JobID", "job_stage_load_manifests")
    try:
        raise mc.ManifestError("file:///out/_temporary/x/00/manifests/t-manifest.json: failed to read JSON file")
    except mc.ManifestError as error:
        failed.record_failure(error)
    document = json.loads(failed.to_json())
    assert errors_of(SUCCESS_SCHEMA, document) == []
    assert document["success"] is False


@pytest.mark.parametrize("name", ["abfs-task-manifest.json", "local-task-manifest.json"])
def test_hadoop_task_manifests_validate(name: str) -> None:
    document = load_data(f"hadoop/{name}")
    assert errors_of(MANIFEST_SCHEMA, document) == []
    assert mc.TaskManifest.from_dict(document).task_id == document["taskID"]


@pytest.mark.parametrize("name", ["success.json", "failure-report.json", "abort-report.json"])
def test_hadoop_success_files_validate(name: str) -> None:
    document = load_data(f"hadoop/{name}")
    assert errors_of(SUCCESS_SCHEMA, document) == []
    assert mc.SuccessData.from_dict(document).job_id == document["jobId"]


def test_unknown_fields_are_allowed() -> None:
    manifest = load_data("hadoop/local-task-manifest.json")
    manifest["futureField"] = {"anything": [1, 2]}
    manifest["files"][0]["x"] = "extra"
    manifest["iostatistics"]["histograms"] = {}
    assert errors_of(MANIFEST_SCHEMA, manifest) == []
    success = load_data("hadoop/success.json")
    success["state"] = "COMMITTED"
    success["somethingNew"] = 1
    assert errors_of(SUCCESS_SCHEMA, success) == []


Mutation = Callable[[Any], object]

BROKEN_MANIFESTS: dict[str, Mutation] = {
    "missing jobId": lambda d: d.pop("jobId"),
    "missing files": lambda d: d.pop("files"),
    "missing iostatistics": lambda d: d.pop("iostatistics"),
    "wrong type constant": lambda d: d.update(type="org.apache.hadoop.fs.s3a.commit.files.SinglePendingCommit/1"),
    "version 2": lambda d: d.update(version=2),
    "version as string": lambda d: d.update(version="1"),
    "negative size": lambda d: d["files"][0].update(z=-1),
    "size as string": lambda d: d["files"][0].update(z="20"),
    "empty source": lambda d: d["files"][0].update(s=""),
    "file without destination": lambda d: d["files"][0].pop("d"),
    "etag not a string": lambda d: d["files"][0].update(e=7),
    "directory status 5": lambda d: d["directories"][0].update(t=5),
    "directory status -1": lambda d: d["directories"][0].update(t=-1),
    "directory without level": lambda d: d["directories"][0].pop("l"),
    "negative level": lambda d: d["directories"][0].update(l=-1),
    "extraData not strings": lambda d: d.update(extraData={"k": 1}),
    "jobAttemptNumber negative": lambda d: d.update(jobAttemptNumber=-1),
    "counter not an integer": lambda d: d["iostatistics"]["counters"].update(op_list_status=1.5),
    "mean without samples": lambda d: d["iostatistics"]["meanstatistics"].update(x={"sum": 1}),
    "iostatistics without gauges": lambda d: d["iostatistics"].pop("gauges"),
    "files not an array": lambda d: d.update(files={}),
}


@pytest.mark.parametrize("mutation", BROKEN_MANIFESTS.values(), ids=list(BROKEN_MANIFESTS))
def test_broken_manifests_fail(mutation: Mutation) -> None:
    document = load_data("hadoop/local-task-manifest.json")
    broken = copy.deepcopy(document)
    mutation(broken)
    assert broken != document
    assert errors_of(MANIFEST_SCHEMA, broken) != []


BROKEN_SUCCESS: dict[str, Mutation] = {
    "missing jobId": lambda d: d.pop("jobId"),
    "missing name": lambda d: d.pop("name"),
    "wrong name constant": lambda d: d.update(name="org.apache.hadoop.fs.s3a.commit.files.SuccessData/2"),
    "success as string": lambda d: d.update(success="true"),
    "timestamp negative": lambda d: d.update(timestamp=-5),
    "timestamp as string": lambda d: d.update(timestamp="1732289412345"),
    "diagnostics not strings": lambda d: d["diagnostics"].update(threads=32),
    "diagnostics without stage": lambda d: d["diagnostics"].pop("stage"),
    "more than 100 filenames": lambda d: d.update(filenames=[f"file:///out/{n}" for n in range(101)]),
    "filename not a string": lambda d: d["filenames"].append(3),
    "metrics not integers": lambda d: d.update(metrics={"m": "x"}),
    "negative samples": lambda d: d["iostatistics"]["meanstatistics"].update(x={"samples": -1, "sum": 0}),
}


@pytest.mark.parametrize("mutation", BROKEN_SUCCESS.values(), ids=list(BROKEN_SUCCESS))
def test_broken_success_files_fail(mutation: Mutation) -> None:
    document = load_data("hadoop/success.json")
    broken = copy.deepcopy(document)
    mutation(broken)
    assert broken != document
    assert errors_of(SUCCESS_SCHEMA, broken) != []


def test_a_manifest_is_not_a_success_file_and_vice_versa() -> None:
    assert errors_of(SUCCESS_SCHEMA, load_data("hadoop/local-task-manifest.json")) != []
    assert errors_of(MANIFEST_SCHEMA, load_data("hadoop/success.json")) != []


# --- the decoders accept exactly what the schemas accept ---------------------------------------------------------


def decode_manifest(document: Any) -> None:
    mc.TaskManifest.from_dict(document, "origin.json")


def decode_success(document: Any) -> None:
    mc.SuccessData.from_dict(document, "origin.json")


DECODERS: dict[str, Callable[[Any], None]] = {MANIFEST_SCHEMA: decode_manifest, SUCCESS_SCHEMA: decode_success}
SAMPLES = {
    MANIFEST_SCHEMA: ["hadoop/local-task-manifest.json", "hadoop/abfs-task-manifest.json"],
    SUCCESS_SCHEMA: ["hadoop/success.json", "hadoop/failure-report.json", "hadoop/abort-report.json"],
}

REPLACEMENTS: list[object] = [None, True, -1, 5, 1.5, 2.0, "", "x", [1], {}, {"samples": 1, "sum": 2}]
"""Values of every JSON type and of the shapes the documents use, put in place of each value in turn."""

MAP_KEYS_MUTATED = 1
"""Of a map with many keys (counters, say), only the first few are mutated: the rest have the same schema."""


def value_paths(node: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Paths of the values worth mutating: every key of small objects, the first of long maps and arrays."""
    paths: list[tuple[str | int, ...]] = []
    if isinstance(node, dict):
        keys = list(node) if len(node) <= 12 else list(node)[:MAP_KEYS_MUTATED]
        for key in keys:
            paths.append((*path, key))
            paths.extend(value_paths(node[key], (*path, key)))
    elif isinstance(node, list):
        for index in range(min(len(node), 1)):
            paths.append((*path, index))
            paths.extend(value_paths(node[index], (*path, index)))
    return paths


def mutated(document: Document, path: tuple[str | int, ...], replacement: object) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced, or removed when ``replacement`` is ``REMOVE``."""
    copied = copy.deepcopy(document)
    parent: Any = copied
    for step in path[:-1]:
        parent = parent[step]
    if replacement is REMOVE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(replacement)
    return copied


REMOVE = object()


def verdicts(schema: str, document: Any) -> tuple[list[str], BaseException | None]:
    """What the schema says (its errors) and what the decoder does (the exception it raised, if any)."""
    try:
        DECODERS[schema](document)
    except BaseException as error:
        return errors_of(schema, document), error
    return errors_of(schema, document), None


def assert_agree(schema: str, document: Any, what: str) -> None:
    errors, raised = verdicts(schema, document)
    if errors:
        assert isinstance(raised, mc.ManifestError), f"{what}: schema refuses ({errors[0]}), decoder gave {raised!r}"
        assert "origin.json" in str(raised)
    else:
        assert raised is None, f"{what}: the schema accepts, the decoder refused: {raised!r}"


@pytest.mark.parametrize("schema", [MANIFEST_SCHEMA, SUCCESS_SCHEMA])
def test_decoder_agrees_with_the_schema_on_every_single_mutation(schema: str) -> None:
    """Every value of Hadoop's documents replaced by values of every type, or removed, one at a time: the decoder
    refuses (with a ManifestError naming the file) exactly what the schema refuses."""
    checked = 0
    for name in SAMPLES[schema][:1]:
        document = load_data(name)
        assert_agree(schema, document, name)
        for path in value_paths(document):
            for replacement in [*REPLACEMENTS, REMOVE]:
                candidate = mutated(document, path, replacement)
                assert_agree(schema, candidate, f"{name} {'/'.join(map(str, path))} = {replacement!r}")
                checked += 1
    assert checked > 300


@pytest.mark.parametrize("schema", [MANIFEST_SCHEMA, SUCCESS_SCHEMA])
def test_decoder_agrees_with_the_schema_on_random_multiple_mutations(schema: str) -> None:
    """Several mutations at once, and unknown keys added anywhere, from a fixed seed."""
    chooser = random.Random(8)
    for round_number in range(100):
        name = chooser.choice(SAMPLES[schema])
        candidate: Any = load_data(name)
        for _ in range(chooser.randint(1, 3)):
            paths = value_paths(candidate)
            if not paths:
                break
            path = chooser.choice(paths)
            if chooser.random() < 0.2:
                target = candidate
                for step in path[:-1]:
                    target = target[step]
                if isinstance(target, dict):
                    target[f"unknown{round_number}"] = chooser.choice(REPLACEMENTS)
                continue
            candidate = mutated(candidate, path, chooser.choice([*REPLACEMENTS, REMOVE]))
        assert_agree(schema, candidate, f"round {round_number} of {name}")


@pytest.mark.parametrize("mutation", BROKEN_MANIFESTS.values(), ids=list(BROKEN_MANIFESTS))
def test_broken_manifests_are_refused_by_the_decoder(mutation: Mutation) -> None:
    broken = load_data("hadoop/local-task-manifest.json")
    mutation(broken)
    with pytest.raises(mc.ManifestError, match=r"origin\.json"):
        decode_manifest(broken)


@pytest.mark.parametrize("mutation", BROKEN_SUCCESS.values(), ids=list(BROKEN_SUCCESS))
def test_broken_success_files_are_refused_by_the_decoder(mutation: Mutation) -> None:
    broken = load_data("hadoop/success.json")
    mutation(broken)
    with pytest.raises(mc.ManifestError, match=r"origin\.json"):
        decode_success(broken)


# --- the library's own documents, from real jobs of every protocol ----------------------------------------------


class RecordingStore(WrappingStore):
    """Keeps every ``write_bytes`` and ``put_if_absent`` the library makes: (store path, bytes)."""

    def __init__(self, inner: StoreOperations, written: list[tuple[str, bytes]]) -> None:
        super().__init__(inner)
        self.written = written

    def write_bytes(self, path: str, data: bytes) -> None:
        self.written.append((path, bytes(data)))
        super().write_bytes(path, data)

    def put_if_absent(self, path: str, data: bytes, metadata: dict[str, str] | None = None) -> str:
        self.written.append((path, bytes(data)))
        return super().put_if_absent(path, data, metadata)


Written = list[tuple[str, bytes]]


def task_files(job: int) -> dict[str, bytes]:
    """Files of a task of job ``job``: in partitions, at the top, and an empty one (no upload: a put at commit)."""
    return {
        f"year=2024/month=01/part-{job}.csv": b"a,b\n",
        f"year=2024/part-{job}.csv": b"c,d\n",
        f"empty-{job}.csv": b"",
    }


def run_protocol(destination: str, protocol: str, written: Written, **settings: Any) -> None:
    """Two jobs under ``protocol``: one of two tasks (one with a failed first attempt) committed, then one
    aborted; ``written`` receives every write of the library."""
    config = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, **settings)

    def recording(store: StoreOperations) -> StoreOperations:
        return RecordingStore(store, written)

    for job, commit in ((1, True), (2, False)):
        committer = mc.create_committer(
            destination, f"job-schemas-{job}", protocol, config=config, store_wrapper=recording
        )
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", task_files(job))
        run_task(committer, "task_00001", "attempt_00001_0", {f"x-{job}.csv": b"1"}, commit=False)
        run_task(committer, "task_00001", "attempt_00001_1", {f"x-{job}.csv": b"2"})
        if commit:
            committer.commit_job()
        else:
            committer.abort_job()


def by_kind(written: Written) -> dict[DocumentKind | None, Written]:
    found: dict[DocumentKind | None, Written] = {}
    for path, data in written:
        found.setdefault(document_kind_of(path), []).append((path, data))
    return found


@pytest.fixture(scope="module")
def local_documents(tmp_path_factory: pytest.TempPathFactory) -> dict[DocumentKind | None, Written]:
    """What the library writes in jobs of the rename protocols and of the transactional protocol (both marker
    types) on local disk, with summary reports, plus a task attempt's own heartbeat; by kind (``None``: writes
    that are not documents)."""
    root = tmp_path_factory.mktemp("documents")
    reports = root / "reports"
    written: Written = []
    for protocol in ("manifest", "v1", "v2"):
        run_protocol(str(root / protocol), protocol, written, summary_report_directory=str(reports))
    for markers in ("batched", "direct"):
        run_protocol(str(root / f"transactional-{markers}"), "transactional", written, markers_type=markers)
    written += [(str(path), path.read_bytes()) for path in sorted(reports.iterdir())]
    opened = open_destination_store(str(root / "beats"))
    store, dest = opened.store, opened.path
    paths = MarkerPaths(JobPaths(dest, "job-schemas-3"))
    retry = RetryPolicy(attempts=1, initial_wait=0, is_retryable=lambda error: False)
    Heartbeat(RecordingStore(store, written), paths, retry, path=paths.task_heartbeat("attempt_00000_0")).beat()
    return by_kind(written)


@pytest.fixture(scope="module")
def upload_documents(moto_s3: Emulator) -> dict[DocumentKind | None, Written]:
    """What the library writes in jobs of the upload protocol on moto, both marker types; by kind."""
    written: Written = []
    with fresh_root(moto_s3) as bucket:
        for markers in ("batched", "direct"):
            run_protocol(f"s3://{bucket}/upload-{markers}", "upload", written, markers_type=markers)
    return by_kind(written)


def spill_chunks(rows: list[FileToCommit]) -> list[bytes]:
    """The chunks of a spill file that ``EntryFile`` wrote, as they lie in the file."""
    entries = EntryFile(None, "job-schemas")
    try:
        entries.append("attempt_00000_0", FilesToCommit.of_rows(rows))
        entries.append("attempt_00001_0", FilesToCommit.of_rows([]))
        list(entries.chunks())  # flushed
        raw = Path(entries.path).read_bytes()
    finally:
        entries.close()
    chunks = []
    while raw:
        length = int.from_bytes(raw[:4], "little")
        chunks.append(raw[4 : 4 + length])
        raw = raw[4 + length :]
    return chunks


SPILL_ROWS = [
    FileToCommit("/tmp/d/_temporary/j/00/tasks/a/x.csv", "/tmp/d/x.csv", 3, "etag-1", "file:///tmp/d/x.csv"),
    FileToCommit("/tmp/d/_temporary/j/00/tasks/a/y 1.csv", "/tmp/d/y 1.csv", 0, None, "file:///tmp/d/y%201.csv"),
]
IN_JOBS_ON_LOCAL_DISK = [
    DocumentKind.TASK_MANIFEST,
    DocumentKind.SUCCESS_DATA,
    DocumentKind.COMMITTED_RECORD,
    DocumentKind.COMMIT_STARTED,
    DocumentKind.JOURNAL_UNIT_INTENT,
    DocumentKind.JOURNAL_UNIT_DONE,
    DocumentKind.JOURNAL_DIRECTORIES,
    DocumentKind.FILE_OUTPUT_COMMIT_STARTED,
    DocumentKind.MARKER_SERVER_STATE,
    DocumentKind.HEARTBEAT,
]
IN_UPLOAD_JOBS = [
    DocumentKind.TASK_MANIFEST,
    DocumentKind.SUCCESS_DATA,
    DocumentKind.PENDING_UPLOAD_RECORD,
    DocumentKind.UPLOAD_STARTED,
    DocumentKind.COMMIT_STARTED,
    DocumentKind.MARKER_SERVER_STATE,
    DocumentKind.HEARTBEAT,
]


def assert_all_valid(kind: DocumentKind, found: Written) -> None:
    assert found, f"no {kind.value} document was written"
    for path, data in found:
        assert schema_errors(kind, orjson.loads(data)) == [], path


@pytest.mark.parametrize("kind", IN_JOBS_ON_LOCAL_DISK, ids=[kind.value for kind in IN_JOBS_ON_LOCAL_DISK])
def test_documents_of_jobs_on_local_disk_validate(
    local_documents: dict[DocumentKind | None, Written], kind: DocumentKind
) -> None:
    assert_all_valid(kind, local_documents.get(kind, []))


@pytest.mark.s3
@pytest.mark.parametrize("kind", IN_UPLOAD_JOBS, ids=[kind.value for kind in IN_UPLOAD_JOBS])
def test_documents_of_upload_jobs_validate(
    upload_documents: dict[DocumentKind | None, Written], kind: DocumentKind
) -> None:
    assert_all_valid(kind, upload_documents.get(kind, []))
    if kind is DocumentKind.TASK_MANIFEST:
        uploads = [orjson.loads(data).get("pendingUploads") for _, data in upload_documents[kind]]
        assert all(uploads), "every upload manifest carries its pending uploads"
        assert any(upload["uploadId"] is None for listed in uploads for upload in listed), "an empty file's too"


def test_the_spill_file_chunks_validate() -> None:
    chunks = spill_chunks(SPILL_ROWS)
    assert len(chunks) == 2
    for chunk in chunks:
        assert schema_errors(DocumentKind.ENTRY_CHUNK, orjson.loads(chunk)) == []


@pytest.mark.parametrize("fixture", ["local_documents", pytest.param("upload_documents", marks=pytest.mark.s3)])
def test_every_json_the_library_writes_is_a_document_with_a_schema(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    """A write holds JSON only at a path ``document_kind_of`` knows, so a new document (or a renamed one) cannot
    go unvalidated; the other writes (markers, ``MARKERS<i>``, the protocol sign, ``_JOB``, ``_started_``) are
    not JSON."""
    written: dict[DocumentKind | None, Written] = request.getfixturevalue(fixture)
    others = written.get(None, [])
    assert others, "markers and records that are not JSON are written too"
    for path, data in others:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        assert not isinstance(parsed, dict | list), f"{path} holds a JSON document that no schema covers"


# --- the marker server's requests and answers -----------------------------------------------------------------


def test_the_marker_servers_answers_validate(tmp_path: Path) -> None:
    opened = open_destination_store(str(tmp_path / "out"))
    store, dest = opened.store, opened.path
    paths = MarkerPaths(JobPaths(dest, "job-schemas"))
    retry = RetryPolicy(attempts=1, initial_wait=0, is_retryable=lambda error: False)
    request = {"marker": Marker("dt=1/part-0.csv").name}
    assert schema_errors(DocumentKind.MARKER_CREATE_REQUEST, request) == []
    with MarkerServer(store, paths, retry, batch_interval_ms=1) as server:
        assert server.state is not None
        secret: str | None = server.secret
        exchanges = [
            (DocumentKind.MARKER_CREATE_ANSWER, "POST", CREATE_PATH, request, secret, 200),
            (DocumentKind.MARKER_CREATE_ANSWER, "POST", CREATE_PATH, request, secret, 200),
            (DocumentKind.MARKER_PING_ANSWER, "GET", PING_PATH, None, secret, 200),
            (DocumentKind.MARKER_LIST_ANSWER, "GET", ALL_PATH, None, secret, 200),
            (DocumentKind.MARKER_ERROR_ANSWER, "POST", CREATE_PATH, {"marker": "../x.marker.CREATE"}, secret, 400),
            (DocumentKind.MARKER_ERROR_ANSWER, "GET", "/v1/markers/nothing", None, secret, 404),
            (DocumentKind.MARKER_ERROR_ANSWER, "POST", CREATE_PATH, request, None, 401),
            (DocumentKind.MARKER_ERROR_ANSWER, "GET", PING_PATH, None, None, 401),
        ]
        for kind, method, path, body, key, expected in exchanges:
            status, answer = request_json(server.state, method, path, body, timeout=5, secret=key)
            assert status == expected
            assert schema_errors(kind, answer) == [], (method, path)
            assert server.secret not in orjson.dumps(answer).decode(), "no answer discloses the secret"
        _, listed = request_json(server.state, "GET", ALL_PATH, timeout=5, secret=server.secret)
        assert listed == [request["marker"]]
        _, identity = request_json(server.state, "GET", PING_PATH, timeout=5, secret=server.secret)
        state = orjson.loads(store.read_bytes(paths.server_state))
        assert schema_errors(DocumentKind.MARKER_SERVER_STATE, state) == []
        assert identity["serverId"] == state["serverId"] and identity["markersDir"] == state["markersDir"]


# --- broken documents of every kind fail ---------------------------------------------------------------------


TOKEN = "0123456789abcdef0123456789abcdef"
SERVER_ID = "fedcba9876543210fedcba9876543210"
PENDING_UPLOAD = PendingUpload("bucket-1", "out/dt=1/a.csv", "upload-1", ('"e1"', '"e2"'), 7, TOKEN)
"""A pending upload of two parts, as a task's writer leaves it."""


def library_document(kind: DocumentKind) -> Document:
    """A document of ``kind`` as the library's own code serialises it (a job's is in ``local_documents``)."""
    built: dict[DocumentKind, Callable[[], bytes]] = {
        DocumentKind.COMMITTED_RECORD: lambda: TransactionRecord(
            ("a.csv", "dt=1/b.csv"), ("old.csv",), "job-1"
        ).to_json(),
        DocumentKind.PENDING_UPLOAD_RECORD: lambda: PendingRecord(
            "job-1", "attempt_1_0", "dt=1/a.csv", PENDING_UPLOAD
        ).to_json(),
        DocumentKind.COMMIT_STARTED: lambda: CommitRecord("job-1", {"task_1": "attempt_1_0"}, 1000).to_json(),
        DocumentKind.FILE_OUTPUT_COMMIT_STARTED: lambda: FileOutputCommitRecord(
            "job-1", {"task_1": "attempt_1_0"}, (PlannedFile("task_1", "dt=1/a.csv", 3),), ("dt=1",)
        ).to_json(),
        DocumentKind.MARKER_SERVER_STATE: lambda: ServerState(
            "127.0.0.1", 40000, "job-1", "/d/m", 7, 1700000000000, SERVER_ID
        ).to_json(),
        DocumentKind.UPLOAD_STARTED: lambda: started_record(
            "job-1", "attempt_1_0", "bucket-1", "out/a.csv", "upload-1"
        ),
        DocumentKind.ENTRY_CHUNK: lambda: spill_chunks(SPILL_ROWS)[0],
    }
    document: Document = orjson.loads(built[kind]())
    return document


def job_document(kind: DocumentKind, local_documents: dict[DocumentKind | None, Written], has: str = "") -> Any:
    """The first document of ``kind`` that the jobs wrote (with the key ``has``, if given)."""
    for _, data in local_documents[kind]:
        document = orjson.loads(data)
        if not has or has in document:
            return document
    raise AssertionError(f"no {kind.value} document with {has!r}")


BROKEN: dict[DocumentKind, dict[str, Mutation]] = {
    DocumentKind.COMMITTED_RECORD: {
        "no added": lambda d: d.pop("added"),
        "removed not a list": lambda d: d.update(removed="old.csv"),
        "added not a list": lambda d: d.update(added="a.csv"),
        "absolute name": lambda d: d["added"].append("/etc/passwd"),
        "parent segment": lambda d: d["added"].append("../other/a.csv"),
        "dot segment": lambda d: d["removed"].append("dt=1/./a.csv"),
        "empty segment": lambda d: d["added"].append("dt=1//a.csv"),
        "trailing slash": lambda d: d["added"].append("dt=1/"),
        "empty name": lambda d: d["added"].append(""),
        "NUL": lambda d: d["added"].append("a\x00.csv"),
        "name not a string": lambda d: d["removed"].append(3),
        "jobId not a string": lambda d: d.update(jobId=1),
    },
    DocumentKind.PENDING_UPLOAD_RECORD: {
        "other type": lambda d: d.update(type="manifest-committer/pending-upload/2"),
        "no jobId": lambda d: d.pop("jobId"),
        "jobId with a slash": lambda d: d.update(jobId="../job"),
        "attempt id with '..'": lambda d: d.update(taskAttemptID="a..b"),
        "relative under _temporary": lambda d: d.update(relative="_temporary/x"),
        "relative absolute": lambda d: d.update(relative="/x"),
        "no upload": lambda d: d.pop("upload"),
        "bucket of one letter": lambda d: d["upload"].update(bucket="b"),
        "key with a trailing slash": lambda d: d["upload"].update(destinationKey="out/dir/"),
        "upload id with a space": lambda d: d["upload"].update(uploadId="an id"),
        "no parts": lambda d: d["upload"].update(etags=[]),
        "empty file with parts": lambda d: d["upload"].update(uploadId=None, length=0),
        "empty file with a length": lambda d: d["upload"].update(uploadId=None, etags=[], length=3),
        "negative length": lambda d: d["upload"].update(length=-1),
        "token not hex": lambda d: d["upload"].update(token="z" * 32),
    },
    DocumentKind.COMMIT_STARTED: {
        "other type": lambda d: d.update(type="manifest-committer/file-output-commit-started/1"),
        "no accepted": lambda d: d.pop("accepted"),
        "accepted attempt not a string": lambda d: d["accepted"].update(task_2=2),
        "accepted task id with a slash": lambda d: d["accepted"].update({"a/b": "attempt_2_0"}),
        "unit size 0": lambda d: d.update(unitSize=0),
        "unit size a string": lambda d: d.update(unitSize="1000"),
        "jobId empty": lambda d: d.update(jobId=""),
    },
    DocumentKind.FILE_OUTPUT_COMMIT_STARTED: {
        "other type": lambda d: d.update(type="manifest-committer/commit-started/1"),
        "no files": lambda d: d.pop("files"),
        "no createdDirectories": lambda d: d.pop("createdDirectories"),
        "file without size": lambda d: d["files"][0].pop("z"),
        "negative size": lambda d: d["files"][0].update(z=-1),
        "file path with '..'": lambda d: d["files"][0].update(p="../a.csv"),
        "file path under _temporary": lambda d: d["files"][0].update(p="_temporary/0/a.csv"),
        "task id with a space": lambda d: d["files"][0].update(t="task 1"),
        "directory absolute": lambda d: d["createdDirectories"].append("/dt=2"),
    },
    DocumentKind.MARKER_SERVER_STATE: {
        "no host": lambda d: d.pop("host"),
        "port 0": lambda d: d.update(port=0),
        "port 65536": lambda d: d.update(port=65536),
        "no port": lambda d: d.pop("port"),
        "port a string": lambda d: d.update(port="40000"),
        "host with a space": lambda d: d.update(host="a b"),
        "host with a line break": lambda d: d.update(host="a\nb"),
        "serverId short": lambda d: d.update(serverId="abc"),
        "no jobId": lambda d: d.pop("jobId"),
        "no markersDir": lambda d: d.pop("markersDir"),
        "startedMs negative": lambda d: d.update(startedMs=-1),
        "the secret published": lambda d: d.update(secret="ab" * 32),
        "a token published": lambda d: d.update(token=TOKEN),
    },
    DocumentKind.UPLOAD_STARTED: {
        "other type": lambda d: d.update(type="manifest-committer/pending-upload/1"),
        "no jobId": lambda d: d.pop("jobId"),
        "jobId with a slash": lambda d: d.update(jobId="../job"),
        "no uploadId": lambda d: d.pop("uploadId"),
        "empty uploadId": lambda d: d.update(uploadId=""),
        "uploadId not a string": lambda d: d.update(uploadId=7),
        "key with a trailing slash": lambda d: d.update(key="out/dir/"),
        "attempt id with '..'": lambda d: d.update(taskAttemptID="a..b"),
    },
    DocumentKind.ENTRY_CHUNK: {
        "seven items": lambda d: d.append([]),
        "five items": lambda d: d.pop(),
        "no attempt id": lambda d: d.__setitem__(0, ""),
        "empty source": lambda d: d[1].__setitem__(0, ""),
        "negative size": lambda d: d[3].__setitem__(0, -1),
        "size a string": lambda d: d[3].__setitem__(0, "3"),
        "etag a number": lambda d: d[4].__setitem__(0, 5),
        "sources not a list": lambda d: d.__setitem__(1, {}),
    },
}
"""Per kind, changes that make a document of the library invalid: each must be refused by the schema."""

JOB_BROKEN: dict[DocumentKind, tuple[str, dict[str, Mutation]]] = {
    DocumentKind.JOURNAL_UNIT_INTENT: (
        "rows",
        {
            "no rows": lambda d: d.pop("rows"),
            "zero rows": lambda d: d.update(rows=0),
            "rows a string": lambda d: d.update(rows="3"),
        },
    ),
    DocumentKind.JOURNAL_UNIT_DONE: (
        "upTo",
        {
            "no upTo": lambda d: d.pop("upTo"),
            "negative upTo": lambda d: d.update(upTo=-1),
            "no notMovable": lambda d: d.pop("notMovable"),
            "notMovable a string": lambda d: d.update(notMovable="false"),
            "alsoOurs empty": lambda d: d.update(alsoOurs=[]),
            "alsoOurs row 0": lambda d: d.update(alsoOurs=[0]),
            "alsoInDoubt twice the same row": lambda d: d.update(alsoInDoubt=[2, 2]),
            "alsoInDoubt not integers": lambda d: d.update(alsoInDoubt=["2"]),
        },
    ),
    DocumentKind.JOURNAL_DIRECTORIES: (
        "created",
        {
            "no created": lambda d: d.pop("created"),
            "no deleted": lambda d: d.pop("deleted"),
            "empty path": lambda d: d["created"].append(""),
            "a path twice": lambda d: d["deleted"].extend(["/d/x", "/d/x"]),
        },
    ),
    DocumentKind.HEARTBEAT: (
        "timestampMs",
        {
            "no timestampMs": lambda d: d.pop("timestampMs"),
            "timestampMs a string": lambda d: d.update(timestampMs="1700000000000"),
            "timestampMs fractional": lambda d: d.update(timestampMs=1.5),
            "jobId absolute": lambda d: d.update(jobId="/x"),
            "pid negative": lambda d: d.update(pid=-1),
            "expirySeconds 0": lambda d: d.update(expirySeconds=0),
            "expirySeconds a string": lambda d: d.update(expirySeconds="120"),
        },
    ),
}
"""Documents only a job writes (its journal, its heartbeats): broken from the ones ``local_documents`` holds."""

HTTP_BROKEN: dict[DocumentKind, tuple[Any, dict[str, Mutation]]] = {
    DocumentKind.MARKER_CREATE_REQUEST: (
        {"marker": "dt=1/a.csv.marker.CREATE"},
        {
            "no marker": lambda d: d.pop("marker"),
            "unknown I/O type": lambda d: d.update(marker="a.csv.marker.DELETE"),
            "no I/O type": lambda d: d.update(marker="a.csv"),
            "absolute": lambda d: d.update(marker="/a.csv.marker.CREATE"),
            "under _temporary": lambda d: d.update(marker="_temporary/a.csv.marker.CREATE"),
            "a commit record": lambda d: d.update(marker="_committed_12.marker.CREATE"),
            "_SUCCESS": lambda d: d.update(marker="dt=1/_SUCCESS.marker.CREATE"),
            "a line break": lambda d: d.update(marker="a\nb.csv.marker.CREATE"),
            "parent segment": lambda d: d.update(marker="dt=1/../../a.csv.marker.CREATE"),
            "not a string": lambda d: d.update(marker=["a.csv.marker.CREATE"]),
        },
    ),
    DocumentKind.MARKER_CREATE_ANSWER: (
        {"created": True},
        {
            "no created": lambda d: d.pop("created"),
            "created a string": lambda d: d.update(created="true"),
        },
    ),
    DocumentKind.MARKER_ERROR_ANSWER: (
        {"error": "bad marker"},
        {
            "no error": lambda d: d.pop("error"),
            "error an object": lambda d: d.update(error={"message": "x"}),
            "the secret in it": lambda d: d.update(secret="ab" * 32),
        },
    ),
    DocumentKind.MARKER_PING_ANSWER: (
        {"serverId": SERVER_ID, "markersDir": "/d/m", "jobId": "job-1"},
        {
            "no serverId": lambda d: d.pop("serverId"),
            "serverId upper case": lambda d: d.update(serverId=SERVER_ID.upper()),
            "no markersDir": lambda d: d.pop("markersDir"),
            "jobId with a space": lambda d: d.update(jobId="job 1"),
            "the secret in it": lambda d: d.update(secret="ab" * 32),
            "a token in it": lambda d: d.update(token=TOKEN),
        },
    ),
    DocumentKind.MARKER_LIST_ANSWER: (
        ["a.csv.marker.CREATE", "b.csv.marker.CREATE"],
        {
            "an object": lambda d: d.__setitem__(0, {"marker": "a.csv.marker.CREATE"}),
            "twice the same": lambda d: d.append("a.csv.marker.CREATE"),
            "not a marker": lambda d: d.append("b.csv"),
        },
    ),
    DocumentKind.SPARK_STORAGE_OPTIONS: ({"anon": False, "client_kwargs": {"region_name": "eu-west-1"}}, {}),
}
"""Documents of the marker server's HTTP API and the Spark option: small, built here as the library builds them."""


def cases(table: dict[DocumentKind, Any], pick: Callable[[Any], dict[str, Mutation]]) -> list[Any]:
    return [
        pytest.param(kind, name, mutation, id=f"{kind.value}-{name}")
        for kind, entry in table.items()
        for name, mutation in pick(entry).items()
    ]


def assert_refused(kind: DocumentKind, document: Any, mutation: Mutation) -> None:
    assert schema_errors(kind, document) == [], "the unbroken document validates"
    broken = copy.deepcopy(document)
    mutation(broken)
    assert broken != document
    assert schema_errors(kind, broken) != []


@pytest.mark.parametrize(("kind", "name", "mutation"), cases(BROKEN, lambda entry: entry))
def test_broken_documents_fail(kind: DocumentKind, name: str, mutation: Mutation) -> None:
    assert_refused(kind, library_document(kind), mutation)


@pytest.mark.parametrize(("kind", "name", "mutation"), cases(JOB_BROKEN, lambda entry: entry[1]))
def test_broken_job_documents_fail(
    local_documents: dict[DocumentKind | None, Written], kind: DocumentKind, name: str, mutation: Mutation
) -> None:
    assert_refused(kind, job_document(kind, local_documents, JOB_BROKEN[kind][0]), mutation)


@pytest.mark.parametrize(("kind", "name", "mutation"), cases(HTTP_BROKEN, lambda entry: entry[1]))
def test_broken_http_documents_fail(kind: DocumentKind, name: str, mutation: Mutation) -> None:
    assert_refused(kind, HTTP_BROKEN[kind][0], mutation)


@pytest.mark.parametrize("not_an_object", ["[1]", '"anon"', "3", "null"])
def test_spark_storage_options_are_an_object(not_an_object: str) -> None:
    assert schema_errors(DocumentKind.SPARK_STORAGE_OPTIONS, orjson.loads(not_an_object)) != []
    assert schema_errors(DocumentKind.SPARK_STORAGE_OPTIONS, HTTP_BROKEN[DocumentKind.SPARK_STORAGE_OPTIONS][0]) == []


def test_databricks_committed_records_validate() -> None:
    """Databricks' own ``_committed_<tid>`` (docs/formats.md, its section on ``_committed_<tid>`` and tid-bearing
    names), as its readers see it."""
    tid = "5097121921988240910"
    record = {
        "added": [
            f"part-0000{n}-tid-{tid}-6ec8b872-eaca-4dd8-83b6-0822a8a18189-{50 + n}-1-c000.snappy.parquet"
            for n in range(3)
        ],
        "removed": [
            "_SUCCESS",
            "part-00000-tid-3452754969657447620-98b3663b-fbe5-49c1-bbbc-9d0a2413fc20-44-1-c000.snappy.parquet",
        ],
    }
    assert schema_errors(DocumentKind.COMMITTED_RECORD, record) == []
    assert TransactionRecord.from_json(orjson.dumps(record), "_committed_" + tid).added == tuple(record["added"])


def test_journal_done_records_with_rows_in_flight_together_validate(
    local_documents: dict[DocumentKind | None, Written],
) -> None:
    """``alsoOurs`` and ``alsoInDoubt`` appear only when renames of a unit were in flight together and some failed."""
    done = job_document(DocumentKind.JOURNAL_UNIT_DONE, local_documents, "upTo")
    done.update(rows=6, upTo=1, notMovable=False, alsoOurs=[2, 4], alsoInDoubt=[3])
    assert schema_errors(DocumentKind.JOURNAL_UNIT_DONE, done) == []


# --- the patterns say what the library's checks say ------------------------------------------------------------


def pattern_at(kind: DocumentKind, *steps: str) -> re.Pattern[str]:
    node: Any = load_schema(kind.schema_file)
    for step in steps:
        node = node[step]
    return re.compile(node["pattern"])


ID_PATTERNS = [
    (DocumentKind.COMMIT_STARTED, ("$defs", "id")),
    (DocumentKind.FILE_OUTPUT_COMMIT_STARTED, ("$defs", "id")),
    (DocumentKind.PENDING_UPLOAD_RECORD, ("$defs", "id")),
    (DocumentKind.UPLOAD_STARTED, ("$defs", "id")),
    (DocumentKind.MARKER_SERVER_STATE, ("properties", "jobId")),
    (DocumentKind.HEARTBEAT, ("properties", "jobId")),
    (DocumentKind.MARKER_PING_ANSWER, ("properties", "jobId")),
]
ID_SAMPLES = [
    "job-1",
    "attempt_00001_0",
    "a.b:c+d",
    "0",
    "A",
    "",
    ".job",
    "_job",
    "-job",
    "a..b",
    "a/b",
    "a b",
    "job\n",
    "job\nx",
    "é",
    "job-ü",
    "a.",
    "x" * 300,
]
PATH_SAMPLES = [
    "a",
    "dt=1/a.csv",
    ".hidden",
    "a/.b",
    "a..",
    "..a",
    "a/b c",
    "a\nb",
    "a\n",
    "",
    "/a",
    "a/",
    "a//b",
    ".",
    "..",
    "./a",
    "a/.",
    "a/..",
    "a/./b",
    "a/../b",
    "a\x00b",
    "_temporary",
    "_temporary/x",
    "x/_temporary",
    "_temporaryx",
    "é/ü.csv",
]
MARKER_SAMPLES = [f"{path}.marker.{io}" for path in PATH_SAMPLES for io in ("CREATE", "MERGE", "DELETE")] + [
    "a.csv",
    "a.csv.marker.",
    "_SUCCESS.marker.CREATE",
    "d/_SUCCESS.marker.CREATE",
    "_SUCCESSx.marker.CREATE",
    "_committed_1.marker.CREATE",
    "d/_started_1.marker.MERGE",
    "_committed_x/a.marker.CREATE",
    "a\rb.marker.CREATE",
    "a.marker.CREATE.marker.APPEND",
]


@pytest.mark.parametrize(("kind", "steps"), ID_PATTERNS, ids=[kind.value for kind, _ in ID_PATTERNS])
def test_id_patterns_are_the_apis_id_rule(kind: DocumentKind, steps: tuple[str, ...]) -> None:
    pattern = pattern_at(kind, *steps)
    assert [s for s in ID_SAMPLES if (pattern.search(s) is not None) != is_valid_id(s)] == []


def test_relative_path_patterns_are_the_admission_rules() -> None:
    relative = pattern_at(DocumentKind.COMMITTED_RECORD, "$defs", "relativePath")
    below_dest = [
        pattern_at(DocumentKind.PENDING_UPLOAD_RECORD, "properties", "relative"),
        pattern_at(DocumentKind.FILE_OUTPUT_COMMIT_STARTED, "$defs", "destinationRelativePath"),
    ]
    assert [s for s in PATH_SAMPLES if (relative.search(s) is not None) != (relative_problem(s) is None)] == []
    for pattern in below_dest:
        admitted = [s for s in PATH_SAMPLES if destination_relative_problem(s) is None]
        assert [s for s in PATH_SAMPLES if pattern.search(s) is not None] == admitted


def marker_admitted(name: str) -> bool:
    try:
        parse_marker(name, "sample")
    except MarkerError:
        return False
    return True


def test_the_marker_pattern_is_parse_marker() -> None:
    pattern = pattern_at(DocumentKind.MARKER_CREATE_REQUEST, "properties", "marker")
    assert [s for s in MARKER_SAMPLES if (pattern.search(s) is not None) != marker_admitted(s)] == []
    assert sum(map(marker_admitted, MARKER_SAMPLES)) > 10


def test_the_random_id_patterns_match_the_ids_made() -> None:
    """The marker server's ``serverId`` (which took the place of its ``token``) and an upload's token."""
    for kind, steps in [
        (DocumentKind.MARKER_SERVER_STATE, ("properties", "serverId")),
        (DocumentKind.MARKER_PING_ANSWER, ("properties", "serverId")),
        (DocumentKind.TASK_MANIFEST, ("$defs", "pendingUpload", "properties", "token")),
    ]:
        assert pattern_at(kind, *steps).search(uuid.uuid4().hex), kind
        assert pattern_at(kind, *steps).search(uuid.uuid4().hex.upper()) is None, kind


def test_shared_definitions_are_the_same_in_every_schema() -> None:
    """The few definitions more than one schema holds (each schema stands alone for other tools) do not drift."""
    ids = {pattern_at(kind, *steps).pattern for kind, steps in ID_PATTERNS}
    assert len(ids) == 1
    markers = {
        pattern_at(DocumentKind.MARKER_CREATE_REQUEST, "properties", "marker").pattern,
        pattern_at(DocumentKind.MARKER_LIST_ANSWER, "items").pattern,
    }
    assert len(markers) == 1
    server_ids = {pattern_at(kind, "properties", "serverId").pattern for kind in SERVER_ID_KINDS}
    assert len(server_ids) == 1
    for started, pending in [("bucket", "bucket"), ("key", "destinationKey"), ("uploadId", "uploadId")]:
        assert (
            pattern_at(DocumentKind.UPLOAD_STARTED, "properties", started).pattern
            == pattern_at(DocumentKind.TASK_MANIFEST, "$defs", "pendingUpload", "properties", pending).pattern
        ), started
    manifest, success = load_schema(MANIFEST_SCHEMA), load_schema(SUCCESS_SCHEMA)
    for name in ("iostatistics", "meanStatistic", "longMap"):
        assert manifest["$defs"][name] == success["$defs"][name], name


SERVER_ID_KINDS = (DocumentKind.MARKER_SERVER_STATE, DocumentKind.MARKER_PING_ANSWER)


# --- what the schemas accept, the library's readers accept ---------------------------------------------------------


PENDING_UPLOAD_SCHEMA = {"$ref": "task-manifest.schema.json#/$defs/pendingUpload"}


def pending_upload_errors(document: Any) -> list[str]:
    """The errors of ``document`` by the task manifest's ``pendingUpload`` definition."""
    checker = jsonschema.Draft202012Validator(
        {**PENDING_UPLOAD_SCHEMA, "$id": "https://manifest-committer.invalid/schemas/probe.json"},
        registry=schema_registry(),
    )
    return [error.message for error in checker.iter_errors(document)]


def test_pending_upload_decoder_agrees_with_the_schema_on_every_single_mutation() -> None:
    """``PendingUpload.from_dict`` (task manifests' ``pendingUploads``, ``.pending`` records) refuses exactly what
    the schema refuses."""
    checked = 0
    for base in (PENDING_UPLOAD.to_dict(), PendingUpload("b-1", "k", None, (), 0, None).to_dict()):
        for path in value_paths(base):
            for replacement in [*REPLACEMENTS, REMOVE, TOKEN, '"etag"', "a" * 1025, "x/"]:
                candidate = mutated(base, path, replacement)
                refused = pending_upload_errors(candidate) != []
                try:
                    PendingUpload.from_dict(candidate, "origin.json")
                except mc.ManifestError:
                    assert refused, f"{path} = {replacement!r}: the decoder refuses what the schema accepts"
                else:
                    assert not refused, f"{path} = {replacement!r}: the schema refuses what the decoder accepts"
                checked += 1
    assert checked > 150


READERS: dict[DocumentKind, Callable[[bytes], object]] = {
    DocumentKind.COMMITTED_RECORD: lambda data: TransactionRecord.from_json(data, "origin"),
    DocumentKind.PENDING_UPLOAD_RECORD: lambda data: PendingRecord.from_json(
        data, "origin", JobPaths("bucket-1/out", "job-1"), "attempt_1_0"
    ),
    DocumentKind.COMMIT_STARTED: lambda data: CommitRecord.from_json(data, "origin"),
    DocumentKind.FILE_OUTPUT_COMMIT_STARTED: lambda data: FileOutputCommitRecord.from_json(data, "origin"),
    DocumentKind.MARKER_SERVER_STATE: lambda data: ServerState.from_json(data, "origin"),
    DocumentKind.UPLOAD_STARTED: lambda data: started_record_id(data, "origin", "job-1"),
}
"""Readers of the records, each taking a document of the job ``job-1`` (and attempt ``attempt_1_0``)."""
STILL_VALID: dict[str, Mutation] = {
    "unknown key": lambda d: d.update(futureField={"x": [1]}),
    "unknown nested key": lambda d: d.get("upload", {}).update(futureField=1),
}


@pytest.mark.parametrize("kind", list(READERS), ids=[kind.value for kind in READERS])
def test_the_readers_accept_every_valid_document(kind: DocumentKind) -> None:
    """The library's own documents, with unknown keys added (readers ignore them), validate and are read back."""
    for change in STILL_VALID.values():
        document = library_document(kind)
        change(document)
        assert schema_errors(kind, document) == []
        READERS[kind](orjson.dumps(document))


LENIENT_READERS = {
    (DocumentKind.COMMIT_STARTED, "jobId empty"),
    (DocumentKind.COMMIT_STARTED, "accepted task id with a slash"),
    (DocumentKind.MARKER_SERVER_STATE, "port a string"),
    (DocumentKind.MARKER_SERVER_STATE, "serverId short"),
    (DocumentKind.MARKER_SERVER_STATE, "startedMs negative"),
    (DocumentKind.MARKER_SERVER_STATE, "the secret published"),
    (DocumentKind.MARKER_SERVER_STATE, "a token published"),
    (DocumentKind.UPLOAD_STARTED, "key with a trailing slash"),
    (DocumentKind.UPLOAD_STARTED, "attempt id with '..'"),
}
"""Documents a schema refuses but a reader takes: fields only people read (``startedMs``, a started upload's
``key`` and ``taskAttemptID``), values checked later against what the job knows (a ``jobId`` or task id that names
no job or manifest of this job is an error there; the server's ``serverId`` must match its ping answer, or the job
is not taken for alive); keys the writer never publishes and the reader ignores (the job's secret, the ``token`` of
earlier versions); and ``int()`` on the port. Fields a reader takes as absent (a commit record's ``removed``, the
server's ``pid``, ``startedMs`` and ``serverId``) are optional in the schemas. The schemas say what the library
writes."""
STRICT_READER_CASES = [
    case
    for case in cases({kind: BROKEN[kind] for kind in READERS}, lambda entry: entry)
    if (case.values[0], case.values[1]) not in LENIENT_READERS
]


@pytest.mark.parametrize(("kind", "name", "mutation"), STRICT_READER_CASES)
def test_the_readers_refuse_what_the_schemas_refuse(kind: DocumentKind, name: str, mutation: Mutation) -> None:
    """Where a reader relies on a field, a document the schema refuses is refused by the reader too, naming the
    file."""
    document = library_document(kind)
    mutation(document)
    with pytest.raises((mc.ManifestError, mc.MarkerError), match="origin"):
        READERS[kind](orjson.dumps(document))


@pytest.mark.parametrize(
    ("kind", "name"),
    sorted(LENIENT_READERS, key=str),
    ids=[f"{k.value}-{n}" for k, n in sorted(LENIENT_READERS, key=str)],
)
def test_the_lenient_readers_are_the_listed_ones(kind: DocumentKind, name: str) -> None:
    """The exceptions above are exactly those: if a reader grows stricter, the list shrinks."""
    document = library_document(kind)
    BROKEN[kind][name](document)
    assert schema_errors(kind, document) != []
    READERS[kind](orjson.dumps(document))
