"""Direct markers: one empty object per data file, written before the file."""

from __future__ import annotations

import pytest

from manifest_committer.markers import DirectMarkers, Marker, MarkerError, read_markers
from tests.markers.conftest import MarkerJob


def test_direct_marker_is_an_empty_object_beside_the_data_files_relative_path(job: MarkerJob) -> None:
    direct = DirectMarkers(job.store, job.paths, job.retry)

    marker = direct.create("dt=2024/part-0.parquet")

    assert marker == Marker("dt=2024/part-0.parquet", "CREATE")
    path = job.paths.markers_dir + "/dt=2024/part-0.parquet.marker.CREATE"
    assert job.store.read_bytes(path) == b""
    assert job.store.info(job.paths.type_file) is None  # a direct directory declares no type


def test_direct_marker_created_twice_is_one_marker(job: MarkerJob) -> None:
    direct = DirectMarkers(job.store, job.paths, job.retry)
    direct.create("a.csv")
    direct.create("a.csv")  # a retried task: no "marker already exists" failure

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")}
    assert found.direct_count == 1


@pytest.mark.parametrize("data_file", ["/abs.csv", "../up.csv", "a//b.csv", "nul\x00.csv", "_temporary/x"])
def test_direct_marker_refuses_a_path_outside_the_destination(job: MarkerJob, data_file: str) -> None:
    with pytest.raises(MarkerError, match="marker for"):
        DirectMarkers(job.store, job.paths, job.retry).create(data_file)
    with pytest.raises(FileNotFoundError):
        job.store.list_dir(job.paths.markers_dir)


def test_direct_marker_refuses_an_unknown_io_type(job: MarkerJob) -> None:
    with pytest.raises(MarkerError, match="unknown marker I/O type 'DELETE'"):
        DirectMarkers(job.store, job.paths, job.retry).create("a.csv", "DELETE")
