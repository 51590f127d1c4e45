"""Interoperability with Hadoop 3.5's own ManifestCommitter classes (the jar inside the pyspark wheel).

Both directions: Hadoop's loaders read the manifests, ``_SUCCESS`` files and summary reports this project
writes; this project's job commit and readers accept what Hadoop's task and job commits wrote. Paths carry
spaces, ``%``, ``=``, URI-reserved and non-ASCII characters, so percent-encoding must agree on both sides.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.urls import decode_path, encode_path, split_url
from tests.fixtures.hadoop import LOCAL_FILESYSTEM_CLASS, Hadoop, HadoopJob

pytestmark = pytest.mark.interop

COMMITTER_CLASS = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
IO_THREADS_KEY = "mapreduce.manifest.committer.io.threads"

# Files one of our tasks writes, by path relative to the destination: partitions, spaces, a literal "%" and a
# literal "%20", "=" inside names, URI-reserved characters and non-ASCII letters (two and four UTF-8 bytes).
OUR_TASK_FILES: list[dict[str, bytes]] = [
    {
        "year=2024/month=01/part-00000 copy.parquet": b"PAR1 first task",
        "year=2024/month=02/part 100%.csv": b"a,b\n1,2\n",
        "top level é.txt": b"at the root of the destination",
    },
    {
        "région=Île-de-France/naïve file ü €.txt": b"\xc3\xa9 bytes \x00\xff",
        "a=b=c/literal %20 and %41.txt": b"not a space",
        "odd ?#[]{}+&;,!'() 🚀/日本語 ✓.bin": bytes(range(256)),
        # Format, private-use and no-break space characters: java.net.URI quotes only the no-break space.
        "zero\u200bwidth soft\u00adhyphen \ue000 nb\u00a0sp.txt": b"invisible characters",
    },
]

# Files Hadoop's tasks write through its checksummed LocalFileSystem; task 2 writes nothing at all.
HADOOP_TASK_FILES: list[dict[str, bytes]] = [
    {
        "year=2024/month=01/part-00000.parquet": b"PAR1 written by hadoop task 0",
        "year=2024/month=01/part-00001.parquet": b"PAR1 second file of task 0",
    },
    {
        "year=2024/month=02/part 0 %41 é=ü.csv": b"x,y\n3,4\n",
        "dir with space/sub dir/deep file €.bin": bytes(range(200)),
        "bom\ufeff and nb\u00a0sp.txt": b"odd characters",
    },
    {},
    {
        "top level file 100%.txt": b"root file",
    },
]


# --- helpers --------------------------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) by relative POSIX path, with its bytes."""
    found: dict[str, bytes] = {}
    for directory, _, names in os.walk(root):
        for name in names:
            full = Path(directory, name)
            found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found


def _local_path_of_url(url: str) -> str:
    """The decoded local path of a ``file:`` URL in either ``file:/x`` or ``file:///x`` form."""
    scheme, authority, path = split_url(url)
    assert scheme == "file", url
    assert authority in ("", "localhost"), url
    return decode_path(path)


def _run_our_job(committer: mc.ManifestCommitter, tasks: list[dict[str, bytes]]) -> list[mc.TaskManifest]:
    """setup_job, then one committed task per entry of ``tasks``, writing files through ``task.fs``."""
    committer.setup_job()
    manifests = []
    for number, files in enumerate(tasks):
        task = committer.setup_task(
            f"task_202611220000_0042_m_{number:06d}", f"attempt_202611220000_0042_m_{number:06d}_0"
        )
        for relative, data in files.items():
            with task.fs.open(f"{task.work_path}/{relative}", "wb") as handle:
                handle.write(data)
        manifests.append(committer.commit_task(task))
    return manifests


def _merged(tasks: list[dict[str, bytes]]) -> dict[str, bytes]:
    return {relative: data for files in tasks for relative, data in files.items()}


def _hadoop_list(java_list: Any) -> list[Any]:
    return [java_list.get(index) for index in range(java_list.size())]


@pytest.fixture
def odd_destination(tmp_path: Path) -> Path:
    """A destination whose own path needs percent-encoding: a space, ``%``, ``=`` and non-ASCII letters."""
    return tmp_path / "dest dir %25 a=b ü"


# --- 1. Hadoop reads what we write ----------------------------------------------------------------------------


def test_hadoop_loads_our_task_manifests_with_odd_paths(hadoop: Hadoop, odd_destination: Path) -> None:
    committer = mc.ManifestCommitter(str(odd_destination), job_id="job_202611220000_0042", job_attempt=3)
    ours = _run_our_job(committer, OUR_TASK_FILES)
    conf = hadoop.configuration()
    fs = hadoop.filesystem(conf)

    for number, (manifest, files) in enumerate(zip(ours, OUR_TASK_FILES, strict=True)):
        manifest_path = committer.paths.manifest_path(manifest.task_id)
        # Hadoop's static loader: reads, deserializes with Jackson and validates (type, version, entries).
        loaded: Any = hadoop.manifest.files.TaskManifest.load(fs, hadoop.local_path(manifest_path))
        assert loaded.getJobId() == "job_202611220000_0042"
        assert loaded.getJobAttemptNumber() == 3
        assert loaded.getTaskID() == f"task_202611220000_0042_m_{number:06d}"
        assert loaded.getTaskAttemptID() == f"attempt_202611220000_0042_m_{number:06d}_0"
        attempt_dir = hadoop.parse_url(loaded.getTaskAttemptDir())
        assert hadoop.decoded_path(attempt_dir) == committer.paths.task_attempt_dir(manifest.task_attempt_id)

        entries = _hadoop_list(loaded.getFilesToCommit())
        assert len(entries) == len(files)
        assert loaded.getTotalFileSize() == sum(len(data) for data in files.values())
        by_dest = {hadoop.decoded_path(entry.getDestPath()): entry for entry in entries}
        assert set(by_dest) == {str(odd_destination / relative) for relative in files}
        for relative, data in files.items():
            entry = by_dest[str(odd_destination / relative)]
            assert entry.getSize() == len(data)
            assert entry.getEtag() is None
            # The source Hadoop decodes is the real file the task wrote, readable through Hadoop's filesystem.
            source = entry.getSourcePath()
            assert (
                hadoop.decoded_path(source)
                == f"{committer.paths.task_attempt_dir(manifest.task_attempt_id)}/{relative}"
            )
            assert fs.getFileStatus(source).getLen() == len(data)
            # And Hadoop's strict URI parser accepts the exact strings we wrote.
            assert hadoop.decoded_path(hadoop.parse_url(entry.getDest())) == str(odd_destination / relative)
            # Byte for byte the percent-encoding Hadoop itself gives the same path (Path.toUri()).
            raw_path = str(hadoop.local_path(str(odd_destination / relative)).toUri().getRawPath())
            assert split_url(str(entry.getDest()))[2] == raw_path

        # Every directory holding a file is listed, at its depth below the destination.
        directories = {
            hadoop.decoded_path(entry.getDestPath()): int(entry.getLevel())
            for entry in _hadoop_list(loaded.getDestDirectories())
        }
        for relative in files:
            parents = Path(relative).parents
            for parent in list(parents)[:-1]:
                assert directories[str(odd_destination / parent)] == len(parent.parts)

        counters = Hadoop.counters(loaded.getIOStatistics())
        assert counters["committer_task_file_count"] == len(files)
        assert counters["committer_task_file_size"] == sum(len(data) for data in files.values())

        # Hadoop's re-serialization of our manifest reads back into the same manifest here.
        again = mc.TaskManifest.from_json(str(loaded.toJson()).encode("utf-8"), "hadoop toJson")
        assert again.files == manifest.files
        assert again.directories == manifest.directories
        assert again.task_attempt_dir == manifest.task_attempt_dir


def test_hadoop_loads_our_success_file_and_summary_report(
    hadoop: Hadoop, odd_destination: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "report dir é"
    config = mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.summary.report.directory": str(reports), IO_THREADS_KEY: "4"}
    )
    job_id = str(uuid.uuid4())
    committer = mc.ManifestCommitter(
        str(odd_destination), job_id=job_id, config=config, job_id_source="spark.sql.sources.writeJobUUID"
    )
    _run_our_job(committer, OUR_TASK_FILES)
    summary = committer.commit_job()
    expected = _merged(OUR_TASK_FILES)
    conf = hadoop.configuration()
    fs = hadoop.filesystem(conf)

    for document in (odd_destination / "_SUCCESS", reports / f"summary-{job_id}.json"):
        loaded: Any = hadoop.manifest.files.ManifestSuccessData.load(fs, hadoop.local_path(str(document)))
        loaded.validate()
        assert loaded.getName() == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
        assert loaded.getSuccess() is True
        assert loaded.getJobId() == job_id
        assert loaded.getJobIdSource() == "spark.sql.sources.writeJobUUID"
        assert loaded.getCommitter() == COMMITTER_CLASS
        assert loaded.getTimestamp() == summary.timestamp
        filenames = [str(name) for name in _hadoop_list(loaded.getFilenames())]
        assert filenames == sorted(filenames)
        decoded = [hadoop.decoded_path(hadoop.parse_url(name)) for name in filenames]
        assert sorted(decoded) == sorted(str(odd_destination / relative) for relative in expected)
        paths = [hadoop.decoded_path(path) for path in _hadoop_list(loaded.getFilenamePaths())]
        assert paths == decoded
        diagnostics = loaded.getDiagnostics()
        assert diagnostics.get("stage") == "committer_commit_job"
        counters = Hadoop.counters(loaded.getIOStatistics())
        assert counters["committer_files_committed"] == len(expected)
        assert counters["committer_bytes_committed"] == sum(len(data) for data in expected.values())
        assert counters["job_stage_rename_files"] == 1

    # The report is snapshotted after the job commit ended, so it also holds the commit's own duration.
    report: Any = hadoop.manifest.files.ManifestSuccessData.load(
        fs, hadoop.local_path(str(reports / f"summary-{job_id}.json"))
    )
    assert report.getDiagnostics().get(IO_THREADS_KEY) == "4"
    assert Hadoop.counters(report.getIOStatistics())["committer_commit_job"] == 1


def test_hadoop_loads_our_abort_report(hadoop: Hadoop, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    config = mc.CommitterConfig(summary_report_directory=str(reports))
    committer = mc.ManifestCommitter(str(tmp_path / "out"), job_id="job_202611220000_0043", config=config)
    _run_our_job(committer, OUR_TASK_FILES[:1])
    committer.abort_job()
    fs = hadoop.filesystem(hadoop.configuration())
    loaded: Any = hadoop.manifest.files.ManifestSuccessData.load(
        fs, hadoop.local_path(str(reports / "summary-job_202611220000_0043.json"))
    )
    assert loaded.getSuccess() is False
    assert loaded.getJobId() == "job_202611220000_0043"
    assert loaded.getDiagnostics().get("stage") == "job_stage_abort"
    assert loaded.getFilenames().size() == 0


def test_hadoop_job_commit_accepts_our_task_manifests(hadoop: Hadoop, odd_destination: Path) -> None:
    """The other way round from the brief's job commit: Hadoop's commitJob on manifests our tasks saved."""
    job_id = str(uuid.uuid4())
    committer = mc.ManifestCommitter(str(odd_destination), job_id=job_id, job_attempt=1)
    _run_our_job(committer, OUR_TASK_FILES)
    job = HadoopJob(hadoop, str(odd_destination), job_number=44, job_attempt=1, job_uuid=job_id)
    assert job.job_id == job_id
    job.commit_job()

    expected = _merged(OUR_TASK_FILES)
    tree = _tree(odd_destination)
    crc_files = {name for name in tree if name.endswith(".crc")}
    assert crc_files <= {"._SUCCESS.crc"}, "Hadoop's LocalFileSystem only checksums the _SUCCESS it writes"
    assert {name: data for name, data in tree.items() if name not in crc_files and name != "_SUCCESS"} == expected
    hadoop_success = mc.SuccessData.load(str(odd_destination / "_SUCCESS"))
    assert hadoop_success.success
    assert hadoop_success.job_id == job_id
    assert hadoop_success.iostatistics.counters["committer_files_committed"] == len(expected)
    assert not (odd_destination / "_temporary").exists()


# --- 2. Our job commit accepts what Hadoop's task commit wrote ------------------------------------------------


@pytest.mark.parametrize(
    ("job_attempt", "job_uuid"),
    [(0, None), (2, "0b6f0a3c-7a7e-4c1b-9d8f-5a2e6c1d3b4f")],
    ids=["jobid-attempt0", "spark-uuid-attempt2"],
)
def test_our_job_commit_accepts_hadoop_task_manifests(
    hadoop: Hadoop, odd_destination: Path, job_attempt: int, job_uuid: str | None
) -> None:
    job = HadoopJob(hadoop, str(odd_destination), job_number=7, job_attempt=job_attempt, job_uuid=job_uuid)
    assert job.fs.getClass().getName() == LOCAL_FILESYSTEM_CLASS
    job_id = job.job_id
    assert job_id == (job_uuid or "job_202611220000_0007")
    job.setup_job()
    for number, files in enumerate(HADOOP_TASK_FILES):
        result = job.run_task(number, files)
        expected_dir = odd_destination / "_temporary" / job_id / f"{job_attempt:02d}" / "tasks" / result.task_attempt_id
        assert result.work_path == str(expected_dir)
    expected = job.expected_files

    # Hadoop's LocalFileSystem left .crc side files next to the task output and the manifests.
    job_dir = odd_destination / "_temporary" / job_id
    before = _tree(job_dir)
    assert any(name.startswith(f"{job_attempt:02d}/tasks/") and name.endswith(".crc") for name in before)
    assert any(name.startswith(f"{job_attempt:02d}/manifests/.") and name.endswith(".crc") for name in before)

    with mc.ManifestCommitter(
        str(odd_destination),
        job_id=job_id,
        job_attempt=job_attempt,
        job_id_source="JobID" if job_uuid is None else "spark.sql.sources.writeJobUUID",
    ) as committer:
        summary = committer.commit_job()
    # Closed: the job's state, moved aside at the commit point, is deleted by now.

    tree = _tree(odd_destination)
    assert not [name for name in tree if name.endswith(".crc")]
    assert {name: data for name, data in tree.items() if name != "_SUCCESS"} == expected
    # _SUCCESS is ours: exactly the document commit_job returned, listing every file.
    assert tree["_SUCCESS"] == summary.to_json()
    assert summary.success
    assert summary.job_id == job_id
    assert summary.filenames == sorted(summary.filenames)
    assert sorted(_local_path_of_url(name) for name in summary.filenames) == sorted(
        str(odd_destination / relative) for relative in expected
    )
    assert summary.iostatistics.counters["committer_files_committed"] == len(expected)
    assert summary.iostatistics.counters["committer_bytes_committed"] == sum(len(data) for data in expected.values())
    assert not job_dir.exists()

    # Hadoop reads the committed output and our _SUCCESS back.
    fs = job.fs
    for relative, data in expected.items():
        assert fs.getFileStatus(hadoop.local_path(str(odd_destination / relative))).getLen() == len(data)
    loaded: Any = hadoop.manifest.files.ManifestSuccessData.load(
        fs, hadoop.local_path(str(odd_destination / "_SUCCESS"))
    )
    assert loaded.getSuccess() is True
    assert loaded.getJobId() == job_id


# --- 3. Our readers parse what Hadoop wrote -------------------------------------------------------------------


def test_our_reader_parses_hadoop_task_manifests(hadoop: Hadoop, odd_destination: Path) -> None:
    job = HadoopJob(hadoop, str(odd_destination), job_number=8, job_attempt=1)
    job.setup_job()
    results = [job.run_task(number, files) for number, files in enumerate(HADOOP_TASK_FILES)]

    for result in results:
        manifest = mc.TaskManifest.load(result.manifest_path)
        assert manifest.job_id == "job_202611220000_0008"
        assert manifest.job_attempt_number == 1
        assert manifest.task_id == result.task_id
        assert manifest.task_attempt_id == result.task_attempt_id
        assert _local_path_of_url(manifest.task_attempt_dir) == result.work_path
        assert len(manifest.files) == len(result.files)
        by_dest = {_local_path_of_url(entry.dest): entry for entry in manifest.files}
        assert set(by_dest) == {str(odd_destination / relative) for relative in result.files}
        for relative, data in result.files.items():
            entry = by_dest[str(odd_destination / relative)]
            assert entry.size == len(data)
            assert entry.etag is None
            assert _local_path_of_url(entry.source) == f"{result.work_path}/{relative}"
            # Our encoder gives Hadoop's own strings for the same paths, byte for byte.
            assert split_url(entry.dest)[2] == encode_path(str(odd_destination / relative))
            assert split_url(entry.source)[2] == encode_path(f"{result.work_path}/{relative}")
        # Every directory with a file is there, at its depth below the destination.
        directories = {_local_path_of_url(entry.dir): entry for entry in manifest.directories}
        for relative in result.files:
            for parent in list(Path(relative).parents)[:-1]:
                directory = directories[str(odd_destination / parent)]
                assert directory.level == len(parent.parts)
                assert directory.status == mc.EntryStatus.NOT_FOUND

        # Hadoop registers every statistic: zero-filled counters arrive; its -1 "unset" extremes are dropped.
        statistics = manifest.iostatistics
        assert statistics.counters["committer_commit_job"] == 0
        assert statistics.counters["task_stage_commit"] == 1
        assert statistics.counters["committer_task_file_count"] == len(result.files)
        assert statistics.counters["committer_task_file_size"] == sum(len(d) for d in result.files.values())
        assert "committer_commit_job.min" not in statistics.minimums
        assert all(value >= 0 for value in statistics.minimums.values())
        assert all(value >= 0 for value in statistics.maximums.values())
        assert statistics.meanstatistics["task_stage_commit.mean"].samples == 1

        # The same entries, string for string, as Hadoop's own loader sees them.
        fs = job.fs
        loaded: Any = hadoop.manifest.files.TaskManifest.load(fs, hadoop.local_path(result.manifest_path))
        hadoop_entries = _hadoop_list(loaded.getFilesToCommit())
        assert sorted((str(e.getSource()), str(e.getDest()), int(e.getSize())) for e in hadoop_entries) == sorted(
            (entry.source, entry.dest, entry.size) for entry in manifest.files
        )


def test_our_reader_parses_hadoop_success_file_and_report(
    hadoop: Hadoop, odd_destination: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "hadoop reports"
    job = HadoopJob(
        hadoop,
        str(odd_destination),
        job_number=9,
        settings={"mapreduce.manifest.committer.summary.report.directory": hadoop.local_path(str(reports)).toString()},
    )
    job.setup_job()
    for number, files in enumerate(HADOOP_TASK_FILES):
        job.run_task(number, files)
    job.commit_job()
    expected = job.expected_files
    # Hadoop's own commit renames through the checksummed filesystem, which moves each .crc side file along.
    tree = _tree(odd_destination)
    data_files = {name: data for name, data in tree.items() if not name.endswith(".crc")}
    assert data_files == {**expected, "_SUCCESS": tree["_SUCCESS"]}
    assert {name for name in tree if name.endswith(".crc")} == {
        str(Path(name).with_name(f".{Path(name).name}.crc")) for name in data_files
    }

    for document in (odd_destination / "_SUCCESS", reports / "summary-job_202611220000_0009.json"):
        success = mc.SuccessData.load(str(document))
        assert success.success
        assert success.job_id == "job_202611220000_0009"
        assert success.job_id_source == "JobID"
        assert success.committer == COMMITTER_CLASS
        assert success.diagnostics["stage"] == "committer_commit_job"
        assert "principal" in success.diagnostics
        assert sorted(_local_path_of_url(name) for name in success.filenames) == sorted(
            str(odd_destination / relative) for relative in expected
        )
        statistics = success.iostatistics
        assert statistics.counters["committer_files_committed"] == len(expected)
        assert statistics.counters["committer_bytes_committed"] == sum(len(data) for data in expected.values())
        assert statistics.counters["commit_file_rename_recovered"] == 0
        assert statistics.counters["job_stage_abort"] == 0
        assert "job_stage_abort.min" not in statistics.minimums
        assert all(value >= 0 for value in statistics.minimums.values())
        assert all(value >= 0 for value in statistics.maximums.values())
    report = mc.SuccessData.load(str(reports / "summary-job_202611220000_0009.json"))
    assert report.diagnostics[IO_THREADS_KEY]
    assert any(
        name.endswith(".heap.memory")
        for name in mc.SuccessData.load(str(odd_destination / "_SUCCESS")).iostatistics.gauges
    )
