"""What a marker may name, and where markers live."""

from __future__ import annotations

import pytest

from manifest_committer.errors import CommitterError
from manifest_committer.markers import Marker, MarkerError, MarkerPaths, check_data_file, parse_marker
from manifest_committer.markers.layout import batched_file_index
from manifest_committer.paths import JobPaths


def test_layout_is_the_contracts() -> None:
    paths = MarkerPaths(JobPaths("/data/out", "job-7", 3))
    marker = Marker("dt=1/part-0.parquet")
    assert paths.markers_dir == "/data/out/_temporary/job-7/03/markers"
    assert paths.direct_marker(marker) == "/data/out/_temporary/job-7/03/markers/dt=1/part-0.parquet.marker.CREATE"
    assert paths.batched_file(0) == "/data/out/_temporary/job-7/03/markers/MARKERS0"
    assert paths.type_file == "/data/out/_temporary/job-7/03/markers/MARKERS.type"
    assert paths.data_file(marker) == "/data/out/dt=1/part-0.parquet"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("part-0.parquet.marker.CREATE", Marker("part-0.parquet", "CREATE")),
        ("dt=1/x.csv.marker.MERGE", Marker("dt=1/x.csv", "MERGE")),
        ("a/b.marker.CREATE.marker.APPEND", Marker("a/b.marker.CREATE", "APPEND")),
        ("__HIVE_DEFAULT_PARTITION__/a b%.csv.marker.CREATE", Marker("__HIVE_DEFAULT_PARTITION__/a b%.csv")),
    ],
)
def test_parse_marker_accepts_data_files(name: str, expected: Marker) -> None:
    assert parse_marker(name, "here") == expected
    assert expected.name == name


@pytest.mark.parametrize(
    ("name", "complaint"),
    [
        ("/etc/passwd.marker.CREATE", "absolute"),
        ("../victim.csv.marker.CREATE", "segment"),
        ("dt=1/../../victim.csv.marker.CREATE", "segment"),
        ("./x.csv.marker.CREATE", "segment"),
        ("dt=1//x.csv.marker.CREATE", "segment"),
        ("dt=1/x.csv\x00.marker.CREATE", "NUL"),
        ("x\n.csv.marker.CREATE", "line break"),
        ("_temporary/job/00/manifests/t-manifest.json.marker.CREATE", "_temporary"),
        ("_SUCCESS.marker.CREATE", "commit record"),
        ("dt=1/_committed_123.marker.CREATE", "commit record"),
        ("_started_123.marker.CREATE", "commit record"),
        ("x.csv.marker.DELETE", "unknown marker I/O type"),
        ("x.csv", "is not a marker"),
        (".marker.CREATE", "is not a marker"),
        ("", "is not a marker"),
    ],
)
def test_parse_marker_refuses_what_a_crafted_marker_may_not_name(name: str, complaint: str) -> None:
    with pytest.raises(MarkerError, match=complaint) as raised:
        parse_marker(name, "MARKERS3 line 7")
    assert str(raised.value).startswith("MARKERS3 line 7: ")
    assert isinstance(raised.value, CommitterError)


def test_parse_marker_refuses_non_strings() -> None:
    with pytest.raises(MarkerError, match="must be a string"):
        parse_marker(["x.marker.CREATE"], "request")


def test_check_data_file_refuses_empty() -> None:
    with pytest.raises(MarkerError, match="empty"):
        check_data_file("", "here")


@pytest.mark.parametrize(
    ("name", "index"),
    [("MARKERS0", 0), ("MARKERS19", 19), ("MARKERS3.next", None), ("MARKERS.type", None), ("MARKERS01", None)],
)
def test_batched_file_index(name: str, index: int | None) -> None:
    assert batched_file_index(name) == index
