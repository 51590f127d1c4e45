"""SuccessData: the _SUCCESS document in Hadoop's S3A format, written in Hadoop's key order, read tolerantly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest

from manifest_committer.errors import ManifestError
from manifest_committer.iostatistics import IOStatisticsSnapshot
from manifest_committer.success_data import COMMITTER_NAME, SUCCESS_NAME, SuccessData
from tests.fixtures.stage_context import load_data

HADOOP_KEY_ORDER = [
    "name",
    "timestamp",
    "success",
    "date",
    "hostname",
    "committer",
    "jobId",
    "jobIdSource",
    "metrics",
    "diagnostics",
    "filenames",
    "iostatistics",
]


def sample() -> SuccessData:
    success = SuccessData.create("job_7", "spark.sql.sources.writeJobUUID", "committer_commit_job")
    success.filenames = ["file:/out/a", "file:///out/b%20c"]
    success.iostatistics = IOStatisticsSnapshot(counters={"committer_files_committed": 2})
    success.diagnostics["zeta"] = "last"
    success.diagnostics["alpha"] = "first"
    success.timestamp, success.date, success.hostname = 1732289412345, "2024-11-22T15:30:12.345Z", "driver"
    return success


def test_round_trip() -> None:
    success = sample()
    assert SuccessData.from_json(success.to_json()) == success
    optional = sample()
    optional.description, optional.state, optional.stage = "d", "s", "t"
    assert SuccessData.from_json(optional.to_json()) == optional


def test_keys_in_hadoops_order() -> None:
    raw = json.loads(sample().to_json())
    assert list(raw) == HADOOP_KEY_ORDER
    assert raw["name"] == SUCCESS_NAME
    assert raw["committer"] == COMMITTER_NAME
    assert raw["metrics"] == {}
    assert list(raw["diagnostics"]) == sorted(raw["diagnostics"]), "a sorted map, as Hadoop's TreeMap"
    optional = sample()
    optional.description, optional.state, optional.stage = "d", "s", "t"
    keys = list(json.loads(optional.to_json()))
    assert keys.index("description") == keys.index("committer") + 1
    assert keys[-2:] == ["state", "stage"]


def test_create_records_principal_and_stage() -> None:
    success = SuccessData.create("job_7", "JobID", "job_stage_abort")
    assert success.diagnostics["stage"] == "job_stage_abort"
    assert success.diagnostics["principal"]
    assert success.success is True
    assert success.timestamp > 1_600_000_000_000, "milliseconds"


def test_record_failure() -> None:
    success = sample()
    try:
        raise ValueError("bad thing at file:///out/x")
    except ValueError as error:
        success.record_failure(error)
    assert success.success is False
    assert success.diagnostics["exception"] == "builtins.ValueError: bad thing at file:///out/x"
    assert "Traceback" in success.diagnostics["stacktrace"]
    assert "bad thing" in success.diagnostics["stacktrace"]


def test_unknown_fields_are_ignored() -> None:
    raw: dict[str, Any] = json.loads(sample().to_json())
    raw["somethingNew"] = {"a": 1}
    raw["iostatistics"]["histograms"] = {}
    assert SuccessData.from_dict(raw) == sample()


def test_file_url_forms_are_kept_as_written() -> None:
    loaded = SuccessData.from_json(sample().to_json())
    assert loaded.filenames == ["file:/out/a", "file:///out/b%20c"]


def test_minus_one_minimums_and_maximums_are_unset() -> None:
    raw = load_data("hadoop/abort-report.json")
    loaded = SuccessData.from_dict(raw)
    assert loaded.iostatistics.minimums == {"job_stage_abort.min": 3}
    assert loaded.iostatistics.maximums == {"job_stage_abort.max": 3}
    assert loaded.iostatistics.counters["committer_commit_job"] == 0
    assert loaded.success is False
    assert loaded.diagnostics["stage"] == "job_stage_abort"


def test_hadoop_documents_load() -> None:
    success = SuccessData.from_dict(load_data("hadoop/success.json"))
    assert success.success and success.job_id_source == "spark.sql.sources.writeJobUUID"
    assert success.iostatistics.gauges["stage.setup.heap.memory"] == 54323288
    assert success.iostatistics.meanstatistics["commit_file_rename.mean"].mean == pytest.approx(79.5)
    failure = SuccessData.from_dict(load_data("hadoop/failure-report.json"))
    assert not failure.success and failure.filenames == []
    assert failure.diagnostics["exception"].startswith("org.apache.hadoop.fs.PathIOException")


def test_a_zero_byte_success_file_is_reported_as_such(tmp_path: Path) -> None:
    marker = tmp_path / "_SUCCESS"
    marker.write_bytes(b"")
    with pytest.raises(ManifestError, match="zero-byte _SUCCESS") as raised:
        SuccessData.load(str(marker))
    assert str(marker) in str(raised.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(name="org.apache.hadoop.fs.s3a.commit.files.PendingSet/1"), "wrong name"),
        (lambda d: d.pop("name"), "wrong name"),
        (lambda d: d.update(success="yes"), "field success: must be true or false"),
        (lambda d: d.pop("success"), "field success: is missing"),
        (lambda d: d.update(iostatistics={"meanstatistics": [1]}), "iostatistics.meanstatistics: must be an object"),
        (lambda d: d["iostatistics"].update(meanstatistics={"m": 1}), "iostatistics.meanstatistics.m: must be an"),
        (lambda d: d.update(metrics={"m": "x"}), "metrics.m: must be an integer"),
        (lambda d: d.update(metrics=[]), "metrics: must be an object"),
        (lambda d: d["diagnostics"].pop("stage"), "diagnostics.stage: is missing"),
        (lambda d: d["diagnostics"].update(threads=32), "diagnostics.threads: must be a string"),
        (lambda d: d.update(filenames=[f"file:///out/{n}" for n in range(101)]), "lists 101 files, at most 100"),
        (lambda d: d.update(filenames=[""]), r"filenames\[0\]: must be a non-empty string"),
        (lambda d: d.update(timestamp=-1), "timestamp: must be an integer >= 0"),
        (lambda d: d.update(description=None), "description: must be a string"),
        (lambda d: d.update(jobId=7), "jobId: must be a string"),
        (lambda d: d.update(filenames="file:///a"), "filenames"),
        (lambda d: d.update(filenames=[1]), "filenames"),
        (lambda d: d.update(diagnostics="stage=x"), "diagnostics"),
        (lambda d: d.update(timestamp="soon"), "invalid success file"),
    ],
)
def test_invalid_documents_name_their_origin(change: Any, message: str) -> None:
    raw: dict[str, Any] = json.loads(sample().to_json())
    change(raw)
    with pytest.raises(ManifestError, match=message) as raised:
        SuccessData.from_dict(raw, "memory:///out/_SUCCESS")
    assert "memory:///out/_SUCCESS" in str(raised.value)


def test_a_task_manifest_is_not_a_success_file() -> None:
    with pytest.raises(ManifestError, match="wrong name"):
        SuccessData.from_dict(load_data("hadoop/local-task-manifest.json"))


def test_load_from_an_fsspec_url() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/success-test/_SUCCESS", sample().to_json())
    try:
        assert SuccessData.load("memory:///success-test/_SUCCESS") == sample()
    finally:
        fs.rm("/success-test", recursive=True)
