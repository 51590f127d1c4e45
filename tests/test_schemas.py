"""The JSON Schemas in schemas/ are the source of truth for the on-disk formats: written files must match them,
Hadoop's documents must match them, and broken documents must not."""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import manifest_committer as mc
from manifest_committer.manifest import MANIFEST_TYPE
from manifest_committer.success_data import SUCCESS_NAME
from tests.fixtures.stage_context import FAST_CONFIG, load_data, load_schema

MANIFEST_SCHEMA = "task-manifest.schema.json"
SUCCESS_SCHEMA = "success-data.schema.json"

Document = dict[str, Any]


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(name), format_checker=jsonschema.FormatChecker())


def errors_of(name: str, document: Any) -> list[str]:
    return [error.message for error in validator(name).iter_errors(document)]


@pytest.mark.parametrize("name", [MANIFEST_SCHEMA, SUCCESS_SCHEMA])
def test_schemas_ship_as_package_data_and_are_valid_draft_2020_12(name: str) -> None:
    schema = load_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


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


Mutation = Callable[[Document], object]

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
