"""Reading markers back from the files alone: direct, batched, both, and crafted ones."""

from __future__ import annotations

import pytest

from manifest_committer.markers import (
    BATCHED,
    DirectMarkers,
    Marker,
    MarkerError,
    check_data_file,
    parse_marker,
    read_markers,
    reader,
)
from manifest_committer.markers.reader import parse_batched_lines
from manifest_committer.store import FileStatus
from tests.markers.conftest import MarkerJob


def write_batched(job: MarkerJob, files: dict[str, bytes], marker_type: bytes = BATCHED.encode()) -> None:
    job.store.write_bytes(job.paths.type_file, marker_type)
    for name, data in files.items():
        job.store.write_bytes(f"{job.paths.markers_dir}/{name}", data)


def test_no_markers_directory_is_no_markers(job: MarkerJob) -> None:
    found = read_markers(job.store, job.paths, job.retry)
    assert found.markers == frozenset()
    assert found.data_files == frozenset()


def test_batched_files_are_read_line_by_line(job: MarkerJob) -> None:
    write_batched(
        job, {"MARKERS0": b"a.csv.marker.CREATE\ndt=1/b.csv.marker.CREATE\n", "MARKERS7": b"c.marker.MERGE\n"}
    )

    found = read_markers(job.store, job.paths, job.retry)

    assert found.batched
    assert found.markers == {Marker("a.csv"), Marker("dt=1/b.csv"), Marker("c", "MERGE")}
    assert found.data_files == {f"{job.paths.dest}/a.csv", f"{job.paths.dest}/dt=1/b.csv", f"{job.paths.dest}/c"}
    assert len(found.batched_files) == 2


def test_a_directory_holding_both_kinds_after_a_fallback_reads_both(job: MarkerJob) -> None:
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\n"})
    direct = DirectMarkers(job.store, job.paths, job.retry)
    direct.create("dt=1/b.csv")
    direct.create("a.csv")  # in both kinds: one marker
    job.store.write_bytes(job.paths.server_state, b"{}")  # the directory's own state is not a marker
    job.store.write_bytes(job.paths.heartbeat, b"{}")

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv"), Marker("dt=1/b.csv")}
    assert found.direct_count == 2


def test_a_torn_last_line_is_ignored_not_trusted(job: MarkerJob) -> None:
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\npart-0.parq"})
    assert read_markers(job.store, job.paths, job.retry).markers == {Marker("a.csv")}


@pytest.mark.parametrize(
    ("content", "line", "complaint"),
    [
        (b"a.csv.marker.CREATE\n/etc/passwd.marker.CREATE\n", 2, "absolute"),
        (b"../../victim.marker.CREATE\n", 1, "segment"),
        (b"a.csv.marker.CREATE\n\nb.csv.marker.CREATE\n", 2, "not a marker"),
        (b"dt=1//a.csv.marker.CREATE\n", 1, "segment"),
        (b"a\x00b.marker.CREATE\n", 1, "NUL"),
        (b"x.csv\n", 1, "not a marker"),
        (b"_SUCCESS.marker.CREATE\n", 1, "commit record"),
        (b"a.csv.marker.CREATE\r\n", 1, "not a marker"),
    ],
)
def test_a_crafted_batched_line_is_skipped_naming_file_and_line(
    job: MarkerJob, content: bytes, line: int, complaint: str
) -> None:
    """A crafted line must not stop a commit, an abort or a rollback: it is skipped and reported, and the
    markers around it are read."""
    write_batched(job, {"MARKERS3": content, "MARKERS4": b"kept.csv.marker.CREATE\n"})

    found = read_markers(job.store, job.paths, job.retry)

    (skipped,) = found.skipped
    assert skipped.startswith(f"{job.paths.batched_file(3)} line {line}: ")
    assert complaint in skipped
    assert Marker("kept.csv") in found.markers
    assert all(check_data_file(marker.data_file, "test") for marker in found.markers)


def test_a_batched_line_that_is_not_utf8_is_skipped(job: MarkerJob) -> None:
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\n\xff\xfe.marker.CREATE\n"})

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")}
    assert found.skipped == (f"{job.paths.batched_file(0)} line 2: not UTF-8",)


@pytest.mark.parametrize("marker_type", [b"TIMELINE_SERVER_BASED", b"", b"batched2"])
def test_an_unknown_marker_type_is_reported_and_its_files_read(job: MarkerJob, marker_type: bytes) -> None:
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\n"}, marker_type)

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")} and not found.batched
    (skipped,) = found.skipped
    assert f"MARKERS.type: unknown marker type {marker_type.decode()!r}" in skipped


def test_batched_files_without_a_type_are_read(job: MarkerJob) -> None:
    job.store.write_bytes(job.paths.batched_file(0), b"a.csv.marker.CREATE\n")

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")} and found.skipped == ()


@pytest.mark.parametrize(
    ("name", "complaint"),
    [
        ("dt=1/stray.txt", "is not a marker"),
        ("x.csv.marker.DELETE", "unknown marker I/O type"),
        ("dt=1/MARKERS0", "is not a marker"),
    ],
)
def test_a_stray_file_in_the_markers_directory_is_skipped_naming_it(job: MarkerJob, name: str, complaint: str) -> None:
    """Only the top level holds the directory's own files; anything else must be a marker, or is skipped."""
    DirectMarkers(job.store, job.paths, job.retry).create("a.csv")
    job.store.write_bytes(f"{job.paths.markers_dir}/{name}", b"")

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")} and found.direct_count == 1
    (skipped,) = found.skipped
    assert skipped.startswith(f"{job.paths.markers_dir}/{name}: ") and complaint in skipped


def test_a_marker_file_being_written_by_another_process_is_not_read(job: MarkerJob) -> None:
    """The local store writes beside the file and renames; a reader listing meanwhile sees the temporary name."""
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\n", ".MARKERS1.x81kq.tmp": b"b.csv.mar"})
    job.store.write_bytes(f"{job.paths.markers_dir}/dt=1/.c.csv.marker.CREATE.0aq1.tmp", b"")

    found = read_markers(job.store, job.paths, job.retry)

    assert found.markers == {Marker("a.csv")}


ODD_LINES = [
    "a.csv.marker.CREATE",
    "dt=1/b.csv.marker.CREATE",
    "dt=é/ü 1.csv.marker.CREATE",
    "a.marker.CREATE.marker.CREATE",
    "c.marker.MERGE",
    ".marker.CREATE",
    "/abs.marker.CREATE",
    "a/.marker.CREATE",
    "dt=1/./a.marker.CREATE",
    "dt=1/../a.marker.CREATE",
    "..marker.CREATE",
    "...marker.CREATE",
    "a\rb.marker.CREATE",
    "a\x00b.marker.CREATE",
    "_temporary/x.marker.CREATE",
    "x/_temporary/y.marker.CREATE",
    "dt=1/_SUCCESS.marker.CREATE",
    "_committed_1.marker.CREATE",
    "dt=1/_started_1.marker.CREATE",
    "dt=1/x_committed_1.marker.CREATE",
    "__HIVE_DEFAULT_PARTITION__/a.marker.CREATE",
    "a.marker.create",
    "a.marker.CREATEx",
    "a.csv",
]


@pytest.mark.parametrize("line", ODD_LINES)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_batched_file_admits_exactly_what_each_line_does_on_its_own(line: str, position: int) -> None:
    """The whole-text route for plain ``CREATE`` files decides as ``parse_marker`` line by line: the same
    markers, and the same lines skipped with the same complaint."""
    lines = ["ok-0.csv.marker.CREATE", "dt=2/ok-1.csv.marker.CREATE"]
    lines.insert(position, line)
    data = "".join(f"{text}\n" for text in lines).encode()
    expected: list[Marker] = []
    complaints: list[str] = []
    for number, text in enumerate(lines, 1):
        try:
            expected.append(parse_marker(text, f"F line {number}"))
        except MarkerError as error:
            complaints.append(str(error))
    markers, _, rejected = parse_batched_lines(data, "F")
    assert (markers, rejected) == (expected, complaints)


def test_plain_create_lines_are_checked_on_the_whole_text_not_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job commit reads every marker of the job: 10,000 regex matches and path checks were most of its CPU."""
    calls: list[str] = []

    def counted(name: object, where: str) -> Marker:
        calls.append(where)
        return parse_marker(name, where)

    monkeypatch.setattr(reader, "parse_marker", counted)
    data = "".join(f"dt={n % 5}/part-{n:05d}.csv.marker.CREATE\n" for n in range(1000)).encode()

    markers, torn, rejected = parse_batched_lines(data + b"dt=1/torn", "F")

    assert torn and rejected == []
    assert markers == [Marker(f"dt={n % 5}/part-{n:05d}.csv") for n in range(1000)]
    assert calls == []
    parse_batched_lines(b"a.csv.marker.CREATE\nb.marker.MERGE\n", "G")
    assert calls == ["G line 1", "G line 2"], "any other line: the route that names it"


def test_a_listed_type_file_is_read_without_a_probe(job: MarkerJob) -> None:
    """``MARKERS.type`` in the listing is read at once with the batches (one round of store latency less)."""
    write_batched(job, {"MARKERS0": b"a.csv.marker.CREATE\n"})
    probes: list[str] = []
    original = job.store.info

    def info(path: str) -> FileStatus | None:
        probes.append(path)
        return original(path)

    job.store.info = info  # type: ignore[method-assign]
    assert read_markers(job.store, job.paths, job.retry).batched
    assert probes == []
