"""TaskManifest, FileEntry, DirEntry: Hadoop's JSON key for key, with tolerant, validating readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from manifest_committer.errors import DuplicateDestinationError, ManifestError
from manifest_committer.iostatistics import IOStatisticsSnapshot, MeanStatistic
from manifest_committer.manifest import MANIFEST_TYPE, DirEntry, EntryStatus, FileEntry, TaskManifest
from tests.fixtures.stage_context import load_data

HADOOP_KEY_ORDER = [
    "extraData",
    "type",
    "version",
    "jobId",
    "jobAttemptNumber",
    "taskID",
    "taskAttemptID",
    "taskAttemptDir",
    "files",
    "directories",
    "iostatistics",
]


def sample() -> TaskManifest:
    return TaskManifest(
        job_id="job_1",
        job_attempt_number=2,
        task_id="task_1",
        task_attempt_id="attempt_1_0",
        task_attempt_dir="file:///out/_temporary/job_1/02/tasks/attempt_1_0",
        files=[
            FileEntry("file:///out/_temporary/job_1/02/tasks/attempt_1_0/a%20b", "file:///out/a%20b", 3, "tag"),
            FileEntry("file:///out/_temporary/job_1/02/tasks/attempt_1_0/c", "file:///out/c", 0),
        ],
        directories=[DirEntry("file:///out/d", EntryStatus.CREATED_DIR, 1)],
        iostatistics=IOStatisticsSnapshot(
            counters={"op_list_status": 2},
            minimums={"op_list_status.min": 1},
            maximums={"op_list_status.max": 5},
            meanstatistics={"op_list_status.mean": MeanStatistic(2, 6)},
        ),
        extra_data={"k": "v"},
    )


def document() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(sample().to_json())
    return raw


def test_round_trip() -> None:
    manifest = sample()
    data = manifest.to_json()
    assert isinstance(data, bytes)
    assert TaskManifest.from_json(data) == manifest
    assert TaskManifest.from_dict(manifest.to_dict()) == manifest


def test_keys_in_hadoops_order() -> None:
    raw = document()
    assert list(raw) == HADOOP_KEY_ORDER
    assert raw["type"] == MANIFEST_TYPE
    assert raw["version"] == 1
    assert raw["files"][0] == {"s": sample().files[0].source, "d": "file:///out/a%20b", "z": 3, "e": "tag"}
    assert list(raw["files"][1]) == ["s", "d", "z"], "a missing etag is left out"
    assert raw["directories"] == [{"d": "file:///out/d", "t": 4, "l": 1}]
    assert list(raw["iostatistics"]) == ["counters", "gauges", "minimums", "maximums", "meanstatistics"]
    assert raw["iostatistics"]["meanstatistics"] == {"op_list_status.mean": {"samples": 2, "sum": 6}}


def test_total_size() -> None:
    assert sample().total_size == 3


def test_unknown_fields_are_ignored() -> None:
    raw = document()
    raw["somethingNew"] = [1]
    raw["files"][0]["x"] = True
    raw["directories"][0]["future"] = {}
    raw["iostatistics"]["histograms"] = {}
    assert TaskManifest.from_dict(raw) == sample()


@pytest.mark.parametrize(
    "key", ["extraData", "iostatistics", "directories", "files", "jobAttemptNumber", "taskAttemptDir", "taskID"]
)
def test_every_key_the_schema_requires_must_be_there(key: str) -> None:
    """The schema requires every key Hadoop writes; a missing one was silently defaulted before."""
    raw = document()
    del raw[key]
    with pytest.raises(ManifestError, match=f"field {key}: is missing") as raised:
        TaskManifest.from_dict(raw, "file:///out/m.json")
    assert "file:///out/m.json" in str(raised.value)


def test_empty_etag_means_none() -> None:
    raw = document()
    raw["files"][0]["e"] = ""
    assert TaskManifest.from_dict(raw).files[0].etag is None


@pytest.mark.parametrize("status", [9, -1, 5])
def test_a_directory_status_outside_hadoops_ordinals_is_refused(status: int) -> None:
    """The schema allows 0 to 4; an out-of-range status was read as unknown."""
    raw = document()
    raw["directories"][0]["t"] = status
    with pytest.raises(ManifestError, match=r"directories\[0\]\.t \(status\): must be an integer >= 0 and <= 4"):
        TaskManifest.from_dict(raw, "m.json")


def test_integral_numbers_are_integers_as_in_json_schema() -> None:
    raw = document()
    raw["files"][0]["z"] = 3.0
    raw["jobAttemptNumber"] = 2.0
    raw["directories"][0]["t"] = 4.0
    raw["directories"][0]["l"] = 1.0
    assert TaskManifest.from_dict(raw) == sample()


def test_entry_status_ordinals_are_hadoops() -> None:
    assert [s.name.lower() for s in EntryStatus] == ["unknown", "not_found", "file", "dir", "created_dir"]
    assert EntryStatus.of(3) is EntryStatus.DIR
    assert EntryStatus.of(-1) is EntryStatus.UNKNOWN


def test_hadoop_manifests_load() -> None:
    abfs = TaskManifest.from_dict(load_data("hadoop/abfs-task-manifest.json"))
    assert [f.etag for f in abfs.files] == ["0x8DD0B3C4F1A2E9B", "0x8DD0B3C4F1B77C0"]
    assert [d.status for d in abfs.directories] == [EntryStatus.DIR, EntryStatus.DIR, EntryStatus.NOT_FOUND]
    assert abfs.total_size == 48213377 + 10420881
    local = TaskManifest.from_dict(load_data("hadoop/local-task-manifest.json"))
    assert local.files[0].source.startswith("file:///") and local.files[0].dest.startswith("file:/data")
    assert "op_delete.min" not in local.iostatistics.minimums, "-1 means unset"
    assert local.iostatistics.minimums["op_list_status.min"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(type="org.example.Other/1"), "wrong type"),
        (lambda d: d.pop("type"), "wrong type"),
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d.pop("jobId"), "jobId"),
        (lambda d: d.update(taskID=""), "taskID"),
        (lambda d: d.update(jobAttemptNumber="0"), "jobAttemptNumber"),
        (lambda d: d["files"][0].update(z=-1), "size"),
        (lambda d: d["files"][0].update(z=True), "size"),
        (lambda d: d["files"][0].update(z=1.5), "size"),
        (lambda d: d["files"][0].pop("s"), "source"),
        (lambda d: d["files"][0].update(d=""), "destination"),
        (lambda d: d["files"][0].update(e=5), "etag"),
        (lambda d: d["directories"][0].update(l=-1), "level"),
        (lambda d: d["directories"][0].update(t="dir"), r"t \(status\)"),
        (lambda d: d["directories"][0].update(t=True), r"directories\[0\]\.t \(status\)"),
        (lambda d: d["directories"][0].update(d=""), r"directories\[0\]\.d \(directory\)"),
        (lambda d: d["directories"][0].update(l=None), r"directories\[0\]\.l \(level\)"),
        (lambda d: d.update(directories=[[]]), r"directories\[0\]"),
        (lambda d: d["files"][0].update(e=None), r"files\[0\]\.e \(etag\)"),
        (lambda d: d["files"].append({"s": "file:///x", "d": "file:///out/y", "z": 1, "e": []}), r"files\[2\]\.e"),
        (lambda d: d["iostatistics"].update(meanstatistics=[1]), "iostatistics.meanstatistics: must be an object"),
        (lambda d: d["iostatistics"]["meanstatistics"].update(m=[1]), "iostatistics.meanstatistics.m: must be an"),
        (lambda d: d["iostatistics"]["meanstatistics"].update(m={"sum": 1}), "meanstatistics.m.samples: is missing"),
        (lambda d: d["iostatistics"]["counters"].update(c=None), "iostatistics.counters.c: must be an integer"),
        (lambda d: d["iostatistics"].pop("gauges"), "iostatistics.gauges: is missing"),
        (lambda d: d.update(iostatistics=None), "iostatistics: must be an object"),
        (lambda d: d.update(extraData=[]), "extraData: must be an object"),
        (lambda d: d.update(version=True), "version True"),
        (lambda d: d.update(extraData={"k": 1}), "extraData"),
        (lambda d: d.update(files=["not an object"]), "not an object"),
        (lambda d: d["iostatistics"].update(counters=[]), "counters"),
    ],
)
def test_invalid_manifests_name_their_origin(change: Any, message: str) -> None:
    raw = document()
    change(raw)
    with pytest.raises(ManifestError, match=message) as raised:
        TaskManifest.from_dict(raw, "file:///out/m.json")
    assert "file:///out/m.json" in str(raised.value)


def test_a_destination_twice_in_one_manifest_is_refused() -> None:
    raw = document()
    raw["files"][1]["d"] = raw["files"][0]["d"]
    with pytest.raises(DuplicateDestinationError, match="file:///out/a%20b") as raised:
        TaskManifest.from_dict(raw, "origin.json")
    assert "attempt_1_0" in str(raised.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"", "empty"), (b"  \n", "empty"), (b"{", "failed to read JSON"), (b"[1]", "not a JSON object")],
)
def test_unparseable_documents(data: bytes, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as raised:
        TaskManifest.from_json(data, "where.json")
    assert "where.json" in str(raised.value)


def test_load_from_a_path_and_an_fsspec_url(tmp_path: Path) -> None:
    path = tmp_path / "dir with space" / "m.json"
    path.parent.mkdir()
    path.write_bytes(sample().to_json())
    assert TaskManifest.load(str(path)) == sample()
    assert TaskManifest.load("file://" + str(path)) == sample(), "fsspec URLs are not percent-encoded"
    with pytest.raises(ManifestError, match="not found") as raised:
        TaskManifest.load(str(tmp_path / "missing.json"))
    assert "missing.json" in str(raised.value)
    with pytest.raises(ManifestError, match="directory"):
        TaskManifest.load(str(path.parent))
