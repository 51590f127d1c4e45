"""The protocol end to end, on memory, local disk and the Azure and GCS emulators (upload on the S3 one): what the
destination holds."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import pytest

import manifest_committer as mc
from manifest_committer.protocols.base import CommitterBase
from manifest_committer.statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_FILES_ALREADY_COMMITTED,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASKS_COMPLETED,
    JOB_STAGE_ABORT,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    JOB_STAGE_RENAME_FILES,
)
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.committing import (
    FAST,
    FaultCapture,
    output,
    run_task,
    success_file,
    tree,
    url_of,
    write,
)
from tests.fixtures.stores import ALL_STORES, CORE_STORES, protocol_cases, store_destination

ODD_NAMES = {
    "dt=2024-01-01/country=München/part 0%.csv": b"munich",
    "dt=2024-01-01/country=de/part-00000.parquet": b"de-0",
    "space dir/file with spaces.txt": b"spaces",
    "pct%25dir/100%.txt": b"percent",
    "ünï/çödé €.txt": b"unicode",
    "a=b/c=d/e=f/deep.txt": b"deep",
    "glob?[x]*/name?[1]*.txt": b"glob characters",
    "_hidden/x": b"hidden dir",
    ".dotfile": b"dot",
}


CORE = tuple(CORE_STORES)


@pytest.fixture(params=CORE_STORES)
def protocol_destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Memory and local disk; ``on_every_store`` and the ``*_EVERY_STORE`` cases add the Azure and GCS emulators to
    the tests whose outcome hangs on the store (names, conflicts at the destination, directories, a rename that
    copies then deletes, crash recovery), and the ``upload`` protocol runs on S3. The store's own promises are
    tested on every binding by tests/store/test_store_contract.py."""
    yield from store_destination(request, tmp_path)


@pytest.fixture
def destination(protocol_destination: str) -> str:
    """The protocol-parametrized tests choose the store too (``protocol_cases``)."""
    return protocol_destination


on_every_store = pytest.mark.parametrize("protocol_destination", ALL_STORES, indirect=True)
"""A test of one protocol that runs on the Azure and GCS emulators too (say why beside each use)."""
EVERY_PROTOCOL = protocol_cases("manifest", "v1", "v2", "transactional", stores=CORE)
"""Every protocol on every store it runs on: the rename protocols and transactional on all but S3, upload on S3."""
PROTOCOLS_BUT_V2 = protocol_cases("manifest", "v1", "transactional", stores=CORE)
"""Where v2's flaw (committed tasks' files in the destination at once, kept by abort) makes a test moot."""
LAST_COMMIT_WINS_PROTOCOLS = protocol_cases("manifest", "v1", upload=False, stores=CORE)
"""Where a test is about a later task commit superseding an earlier one, and v2's flaw makes it moot: the upload
and transactional protocols save one manifest per attempt and, without ``accepted_attempts``, commit the first
saved (S3's second-grained times tie to the smallest attempt id), so that a late losing attempt never displaces
the accepted one; tests/protocols/upload/test_committer.py and tests/protocols/transactional/test_attacks.py
cover that."""
RENAMING_PROTOCOLS = protocol_cases("manifest", "v1", "v2", upload=False, stores=CORE)
"""Where a test is about moving files to a name of the task's choosing: the transactional and upload protocols
write each file in place (transactional under a name carrying its tid, so no file of a job ever lands on an
existing one), refuse names readers skip (``_x``, ``.x``), and cannot rename;
tests/protocols/transactional/test_committer.py and tests/protocols/upload/test_committer.py cover what they do
instead."""
REPLACING_PROTOCOLS = protocol_cases("manifest", "v1", "v2", stores=CORE)
"""Where a test is about a job's file landing on something already in the destination: the rename protocols and
upload (its complete with ``If-None-Match: *`` is its rename); transactional's tid names never land on one."""
RENAMING_PROTOCOLS_EVERY_STORE = protocol_cases("manifest", "v1", "v2", upload=False)
"""``RENAMING_PROTOCOLS`` on the emulators too."""
REPLACING_PROTOCOLS_EVERY_STORE = protocol_cases("manifest", "v1", "v2")
"""``REPLACING_PROTOCOLS`` on the emulators too."""
RECORDS = {"_committed_", "_started_"}


def new_job(
    destination: str, job_id: str = "job-1", config: mc.CommitterConfig = FAST, protocol: str = "manifest"
) -> CommitterBase:
    committer = mc.create_committer(destination, job_id, protocol, config=config)
    committer.setup_job()
    return committer


def counters(success: mc.SuccessData) -> dict[str, int]:
    return success.iostatistics.counters


@RENAMING_PROTOCOLS_EVERY_STORE  # what the store makes of odd names
def test_multi_task_job_with_partitions_and_odd_names(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)
    names = sorted(ODD_NAMES)
    tasks = {0: names[:3], 1: names[3:6], 2: names[6:]}
    for index, chunk in tasks.items():
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", {n: ODD_NAMES[n] for n in chunk})

    success = committer.commit_job()

    assert output(committer) == ODD_NAMES
    assert success.success
    assert success.filenames == sorted(url_of(committer, name) for name in ODD_NAMES)
    decoded = {urllib.parse.unquote(url.split(committer.destination_url + "/", 1)[1]) for url in success.filenames}
    assert decoded == set(ODD_NAMES)
    assert "_temporary" not in tree(committer)


@protocol_cases("transactional")  # every store: what the store makes of odd names
def test_odd_names_written_in_place(destination: str, protocol: str) -> None:
    """The in-place protocols refuse names readers skip (``_x``, ``.x``) when the file is opened; every other odd
    name is committed as the task wrote it."""
    committer = new_job(destination, protocol=protocol)
    hidden = {name for name in ODD_NAMES if name.startswith(("_", "."))}
    names = sorted(set(ODD_NAMES) - hidden)
    first = {name: ODD_NAMES[name] for name in names[:4]}
    task = run_task(committer, "task_00000", "attempt_00000_0", first, commit=False)
    for name in sorted(hidden):
        with pytest.raises(mc.CommitterError, match="readers skip"):
            write(task, name, b"never")
    committer.commit_task(task)
    run_task(committer, "task_00001", "attempt_00001_0", {name: ODD_NAMES[name] for name in names[4:]})

    success = committer.commit_job()

    assert output(committer) == {name: ODD_NAMES[name] for name in names}
    assert success.filenames == sorted(url_of(committer, name) for name in names)


@RENAMING_PROTOCOLS
def test_declared_outputs_of_flat_task_directories(destination: str, protocol: str) -> None:
    """Writers that declare their files keep them flat; the job puts each where declared, and nothing else."""
    committer = new_job(destination, protocol=protocol)
    expected: dict[str, bytes] = {}
    for index in range(3):
        task = run_task(
            committer,
            f"task_{index:05d}",
            f"attempt_{index:05d}_0",
            {f"f{n}.csv": b"%d-%d" % (index, n) for n in range(4)} | {"scratch.tmp": b"never committed"},
            commit=False,
        )
        outputs = {f"f{n}.csv": f"dt=2026-11-{n + 1:02d}/country=d e/part-{index}-{n}.csv" for n in range(4)}
        committer.commit_task(task, outputs)
        expected |= {dest: b"%d-%d" % (index, n) for n, dest in enumerate(outputs.values())}

    success = committer.commit_job()

    assert output(committer) == expected
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 12
    assert "_temporary" not in tree(committer)


@EVERY_PROTOCOL
def test_retried_task_keeps_only_the_second_attempt(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)
    first = run_task(
        committer, "task_00000", "attempt_00000_0", {"p=1/first.csv": b"1", "shared.csv": b"one"}, commit=False
    )
    committer.abort_task(first)
    run_task(committer, "task_00000", "attempt_00000_1", {"p=2/second.csv": b"22", "shared.csv": b"two"})
    run_task(committer, "task_00001", "attempt_00001_0", {"p=1/other.csv": b"333"})

    success = committer.commit_job()

    assert output(committer) == {"p=2/second.csv": b"22", "shared.csv": b"two", "p=1/other.csv": b"333"}
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 3
    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 2


@pytest.mark.parametrize("order", ["first attempt, then second", "second attempt, then first"])
@LAST_COMMIT_WINS_PROTOCOLS
def test_task_committed_twice_keeps_only_the_last_committed_attempt(
    destination: str, protocol: str, order: str
) -> None:
    committer = new_job(destination, protocol=protocol)
    attempt_a = run_task(
        committer, "task_00000", "attempt_00000_0", {"a/only-a.csv": b"a", "both.csv": b"from a"}, commit=False
    )
    attempt_b = run_task(
        committer, "task_00000", "attempt_00000_1", {"b/only-b.csv": b"bb", "both.csv": b"from b!"}, commit=False
    )
    first, last = (attempt_a, attempt_b) if order.startswith("first") else (attempt_b, attempt_a)
    committer.commit_task(first)
    manifest = committer.commit_task(last)
    assert manifest.task_attempt_id == last.attempt_id

    success = committer.commit_job()

    if last is attempt_b:
        assert output(committer) == {"b/only-b.csv": b"bb", "both.csv": b"from b!"}
    else:
        assert output(committer) == {"a/only-a.csv": b"a", "both.csv": b"from a"}
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 2
    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 1
    assert "_temporary" not in tree(committer), "the superseded attempt's directory is cleaned up too"


def test_same_attempt_committed_twice_commits_its_latest_files(destination: str) -> None:
    """Hadoop allows a task commit to be repeated while the attempt directory exists; the last manifest wins."""
    committer = new_job(destination)
    task = run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    write(task, "late/b.csv", b"bb")
    manifest = committer.commit_task(task)
    assert sorted(entry.size for entry in manifest.files) == [1, 2]

    success = committer.commit_job()

    assert output(committer) == {"a.csv": b"a", "late/b.csv": b"bb"}
    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 1


@on_every_store  # directories implied by file names
def test_empty_directories_of_a_task_are_created(destination: str) -> None:
    committer = new_job(destination)
    task = run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"a"}, commit=False)
    # Through the store: a raw makedirs writes nothing on blob stores, where the store writes a marker.
    committer.store.mkdirs(task.work_path + "/empty/nested")
    manifest = committer.commit_task(task)
    assert {(entry.dir, entry.level) for entry in manifest.directories} == {
        (url_of(committer, "dt=1"), 1),
        (url_of(committer, "empty"), 1),
        (url_of(committer, "empty/nested"), 2),
    }

    committer.commit_job()

    found = tree(committer)
    assert found["empty/nested"] is None
    assert found["dt=1/a.csv"] == b"a"


@EVERY_PROTOCOL
def test_uncommitted_attempt_files_never_appear(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/committed.csv": b"yes"})
    run_task(
        committer, "task_00001", "attempt_00001_0", {"dt=1/uncommitted.csv": b"no", "dt=9/x.csv": b"no"}, commit=False
    )

    committer.commit_job()

    assert output(committer) == {"dt=1/committed.csv": b"yes"}
    assert "dt=9" not in tree(committer), "no directory of an uncommitted task is created"
    assert "_temporary" not in tree(committer)


@EVERY_PROTOCOL
def test_empty_tasks(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {})
    run_task(committer, "task_00001", "attempt_00001_0", {"only.csv": b"1234"})
    run_task(committer, "task_00002", "attempt_00002_0", {})

    success = committer.commit_job()

    assert output(committer) == {"only.csv": b"1234"}
    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 3
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 1
    assert counters(success)[COMMITTER_BYTES_COMMITTED] == 4


@EVERY_PROTOCOL
def test_zero_tasks(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)

    success = committer.commit_job()

    assert success.success
    assert success.filenames == []
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 0
    assert counters(success).get(COMMITTER_TASKS_COMPLETED, 0) == 0
    assert output(committer) == {}
    assert {name for name in tree(committer) if not name.startswith(tuple(RECORDS))} == {"_SUCCESS"}
    assert success_file(committer).job_id == "job-1"


@EVERY_PROTOCOL
def test_success_file_contents(destination: str, protocol: str) -> None:
    committer = new_job(destination, job_id="job_20240101_0007", protocol=protocol)
    files = {
        0: {"year=2024/b.csv": b"bb", "year=2024/a.csv": b"a"},
        1: {"year=2023/c.csv": b"ccc", "z.csv": b"zzzz"},
        2: {"year=2024/d.csv": b"ddddd"},
    }
    for index, task_files in files.items():
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", task_files)

    returned = committer.commit_job()
    on_disk = success_file(committer)

    for success in (returned, on_disk):
        assert success.success is True
        assert success.job_id == "job_20240101_0007"
        every = [name for task_files in files.values() for name in task_files]
        assert success.filenames == sorted(url_of(committer, name) for name in every)
        assert counters(success)[COMMITTER_FILES_COMMITTED] == 5
        assert counters(success)[COMMITTER_BYTES_COMMITTED] == 15
        assert counters(success)[COMMITTER_TASKS_COMPLETED] == 3
        assert counters(success)["committer_task_file_count"] == 5, "not double-sampled (as Hadoop's was)"
        assert counters(success)["committer_task_directory_count"] == 3  # summed over tasks
        assert success.diagnostics["stage"] == "committer_commit_job"
    assert on_disk.timestamp == returned.timestamp


@pytest.mark.parametrize("file_count", [100, 101])
@EVERY_PROTOCOL
def test_success_lists_at_most_100_sorted_filenames(destination: str, protocol: str, file_count: int) -> None:
    """At the limit and one past it. The three tasks run at once, as on executors: on S3 a file costs round trips
    (marker, upload, record) that a serial writer would pay one after another."""
    committer = new_job(destination, protocol=protocol)
    names = [f"part-{index:05d}.csv" for index in range(file_count)]
    with ThreadPoolExecutor(3) as executors:
        tasks = [
            executors.submit(
                run_task,
                committer,
                f"task_{task_index:05d}",
                f"attempt_{task_index:05d}_0",
                {f"t{task_index}/{name}": b"x" for name in names[task_index::3]},
            )
            for task_index in range(3)
        ]
        for task in tasks:
            task.result()

    success = committer.commit_job()

    committed = output(committer)
    assert len(committed) == file_count
    assert counters(success)[COMMITTER_FILES_COMMITTED] == file_count
    assert len(success.filenames) == min(file_count, 100)
    assert success.filenames == sorted(success.filenames)
    assert len(set(success.filenames)) == len(success.filenames)
    every = {url_of(committer, path) for path in committed}
    assert set(success.filenames) <= every
    if file_count <= 100:
        assert set(success.filenames) == every


@EVERY_PROTOCOL
def test_counters_right_when_tasks_run_in_separate_committers(destination: str, protocol: str) -> None:
    """Distributed: each task commit on its own committer object, the job commit on yet another (Hadoop's job
    counts miss such tasks)."""
    mc.create_committer(destination, "job-dist", protocol, config=FAST).setup_job()
    sizes = {0: 10, 1: 20, 2: 30, 3: 0}
    for index, size in sizes.items():
        task_committer = mc.create_committer(destination, "job-dist", protocol, config=FAST)
        files = {f"part-{index}.bin": b"x" * size} if size else {}
        run_task(task_committer, f"task_{index:05d}", f"attempt_{index:05d}_0", files)

    job_committer = mc.create_committer(destination, "job-dist", protocol, config=FAST)
    success = job_committer.commit_job()

    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 4
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 3
    assert counters(success)[COMMITTER_BYTES_COMMITTED] == 60
    assert counters(success_file(job_committer)) == counters(success)
    assert len(output(job_committer)) == 3


@EVERY_PROTOCOL
def test_counters_not_doubled_with_one_committer(destination: str, protocol: str) -> None:
    committer = new_job(destination, protocol=protocol)
    for index in range(2):
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", {f"f{index}.bin": b"x" * 7})

    success = committer.commit_job()

    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 2
    assert counters(success)[COMMITTER_FILES_COMMITTED] == 2
    assert counters(success)[COMMITTER_BYTES_COMMITTED] == 14


def summary_config(reports: Path, **overrides: object) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.summary.report.directory": str(reports)},
        save_retry_interval=0,
        store_retry_interval=0,
        **overrides,
    )


@EVERY_PROTOCOL
def test_summary_report_on_success(destination: str, protocol: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    committer = new_job(destination, job_id="job-report", config=summary_config(reports), protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"abc"})

    committer.commit_job()

    report = mc.SuccessData.load(str(reports / "summary-job-report.json"))
    assert report.success is True
    assert report.job_id == "job-report"
    assert report.iostatistics.counters[COMMITTER_FILES_COMMITTED] == 1
    assert report.filenames == [url_of(committer, "a.csv")]


def test_summary_report_on_failure_then_abort_keeps_it(destination: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    committer = new_job(destination, job_id="job-fails", config=summary_config(reports))
    committer.store.write_bytes(committer.paths.dest + "/taken.csv", b"not this job's")
    run_task(committer, "task_00000", "attempt_00000_0", {"taken.csv": b"this job's"})

    with pytest.raises(mc.OutputConflictError, match=r"taken\.csv"):
        committer.commit_job()

    path = reports / "summary-job-fails.json"
    report = mc.SuccessData.load(str(path))
    assert report.success is False
    assert report.diagnostics["stage"] == JOB_STAGE_RENAME_FILES
    assert "OutputConflictError" in report.diagnostics["exception"]
    assert "taken.csv" in report.diagnostics["exception"]
    assert "stacktrace" in report.diagnostics

    committer.abort_job()

    kept = mc.SuccessData.load(str(path))
    assert kept.diagnostics["stage"] == JOB_STAGE_RENAME_FILES, "abort must not overwrite the failure report"
    assert kept.diagnostics["exception"] == report.diagnostics["exception"]
    assert output(committer) == {"taken.csv": b"not this job's"}


@PROTOCOLS_BUT_V2
def test_summary_report_on_abort(destination: str, protocol: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    committer = new_job(destination, job_id="job-aborted", config=summary_config(reports), protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"abc"})

    committer.abort_job()

    report = mc.SuccessData.load(str(reports / "summary-job-aborted.json"))
    assert report.success is False
    assert report.diagnostics["stage"] == JOB_STAGE_ABORT
    assert output(committer) == {}
    assert tree(committer) == {}


def test_diagnostics_manifest_directory_keeps_the_manifests(destination: str, tmp_path: Path) -> None:
    kept = tmp_path / "manifests"
    config = mc.CommitterConfig.from_hadoop_conf(
        {"spark.hadoop.mapreduce.manifest.committer.diagnostics.manifest.directory": str(kept)}
    )
    committer = new_job(destination, job_id="job-diag", config=config)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    run_task(committer, "task_00001", "attempt_00001_0", {"b/b.csv": b"b"})

    committer.commit_job()

    assert sorted(p.name for p in (kept / "job-diag").iterdir()) == [
        "task_00000-manifest.json",
        "task_00001-manifest.json",
    ]
    manifest = mc.TaskManifest.load(str(kept / "job-diag" / "task_00001-manifest.json"))
    assert manifest.task_attempt_id == "attempt_00001_0"
    assert [entry.dest for entry in manifest.files] == [url_of(committer, "b/b.csv")]
    assert "_temporary" not in tree(committer)


@EVERY_PROTOCOL
def test_mark_successful_jobs_false_writes_no_success_file(destination: str, protocol: str) -> None:
    config = mc.CommitterConfig.from_hadoop_conf({"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"})
    committer = new_job(destination, config=config, protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})

    success = committer.commit_job()

    assert success.success
    assert output(committer) == {"a.csv": b"a"}
    assert "_SUCCESS" not in tree(committer)


@on_every_store  # a prefix delete must stop at the job's own name
def test_concurrent_jobs_into_one_destination(destination: str) -> None:
    job_a = new_job(destination, job_id="job-a")
    job_b = new_job(destination, job_id="job-b")
    a0 = job_a.setup_task("task_00000", "attempt_a0_0")
    b0 = job_b.setup_task("task_00000", "attempt_b0_0")
    write(a0, "dt=1/a0.csv", b"a0")
    write(b0, "dt=1/b0.csv", b"b0")
    job_b.commit_task(b0)
    job_a.commit_task(a0)
    run_task(job_a, "task_00001", "attempt_a1_0", {"dt=2/a1.csv": b"a1"})

    success_a = job_a.commit_job()

    assert output(job_a) == {"dt=1/a0.csv": b"a0", "dt=2/a1.csv": b"a1"}
    assert success_a.filenames == [url_of(job_a, "dt=1/a0.csv"), url_of(job_a, "dt=2/a1.csv")]
    assert tree(job_b, job_b.paths.manifest_dir) == {
        "task_00000-manifest.json": job_b.store.read_bytes(job_b.paths.manifest_path("task_00000"))
    }, "job A's cleanup left job B's state alone"
    assert "_temporary/job-a" not in tree(job_a)

    run_task(job_b, "task_00001", "attempt_b1_0", {"dt=2/b1.csv": b"b1"})
    success_b = job_b.commit_job()

    assert output(job_b) == {"dt=1/a0.csv": b"a0", "dt=2/a1.csv": b"a1", "dt=1/b0.csv": b"b0", "dt=2/b1.csv": b"b1"}
    assert success_b.filenames == [url_of(job_b, "dt=1/b0.csv"), url_of(job_b, "dt=2/b1.csv")]
    assert success_file(job_b).job_id == "job-b"
    assert "_temporary" not in tree(job_b), "the last job out removes _temporary"


def test_cleanup_skipped_keeps_the_job_state(destination: str) -> None:
    config = mc.CommitterConfig.from_hadoop_conf({"mapreduce.fileoutputcommitter.cleanup.skipped": "true"})
    committer = new_job(destination, config=config)
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})

    committer.commit_job()

    assert output(committer) == {"a.csv": b"a"}
    assert committer.store.info(committer.paths.manifest_path("task_00000")) is not None
    assert committer.store.info(committer.paths.task_attempt_dir("attempt_00000_0")) is not None


@EVERY_PROTOCOL
def test_validate_output_passes_on_a_good_job(destination: str, protocol: str) -> None:
    config = mc.CommitterConfig.from_hadoop_conf({"mapreduce.manifest.committer.validate.output": "true"})
    committer = new_job(destination, config=config, protocol=protocol)
    run_task(committer, "task_00000", "attempt_00000_0", {"a/x.csv": b"xx", "b.csv": b"b"})
    run_task(committer, "task_00001", "attempt_00001_0", {"a/y.csv": b"yyy"})

    success = committer.commit_job()

    assert success.success
    assert counters(success)[JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT] == 1
    assert output(committer) == {"a/x.csv": b"xx", "b.csv": b"b", "a/y.csv": b"yyy"}


def delete_target_config(delete: bool) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.delete.target.files": str(delete).lower()},
        save_retry_interval=0,
        store_retry_interval=0,
    )


@protocol_cases("manifest", "v1")  # every store: its rename never overwrites
def test_existing_file_at_destination_is_a_conflict_without_delete_target_files(
    destination: str, protocol: str
) -> None:
    committer = new_job(destination, config=delete_target_config(False), protocol=protocol)
    committer.store.write_bytes(committer.paths.dest + "/dt=1/part-0.csv", b"old data")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"new"})

    with pytest.raises(mc.OutputConflictError) as raised:
        committer.commit_job()

    assert url_of(committer, "dt=1/part-0.csv") in str(raised.value)
    assert output(committer) == {"dt=1/part-0.csv": b"old data"}
    assert "_SUCCESS" not in tree(committer)


@REPLACING_PROTOCOLS_EVERY_STORE  # the store's own rename and delete
def test_existing_file_at_destination_is_replaced_with_delete_target_files(destination: str, protocol: str) -> None:
    committer = new_job(destination, config=delete_target_config(True), protocol=protocol)
    committer.store.write_bytes(committer.paths.dest + "/dt=1/part-0.csv", b"old data")
    committer.store.write_bytes(committer.paths.dest + "/dt=1/unrelated.csv", b"stays")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"new"})

    committer.commit_job()

    assert output(committer) == {"dt=1/part-0.csv": b"new", "dt=1/unrelated.csv": b"stays"}


@protocol_cases("manifest", "v1")  # every store: directories implied by file names
def test_directory_at_a_file_destination_is_a_conflict_without_delete_target_files(
    destination: str, protocol: str
) -> None:
    committer = new_job(destination, config=delete_target_config(False), protocol=protocol)
    committer.store.write_bytes(committer.paths.dest + "/dt=1/part-0.csv/inner.txt", b"inside")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"new"})

    with pytest.raises(mc.OutputConflictError) as raised:
        committer.commit_job()

    assert url_of(committer, "dt=1/part-0.csv") in str(raised.value)
    assert "directory" in str(raised.value)
    nested_by_hadoop = "never nested inside it, as Hadoop's rename of a file onto a directory does"
    assert output(committer) == {"dt=1/part-0.csv/inner.txt": b"inside"}, nested_by_hadoop


@REPLACING_PROTOCOLS_EVERY_STORE  # directories implied by file names
def test_directory_at_a_file_destination_is_replaced_with_delete_target_files(destination: str, protocol: str) -> None:
    committer = new_job(destination, config=delete_target_config(True), protocol=protocol)
    committer.store.write_bytes(committer.paths.dest + "/dt=1/part-0.csv/inner.txt", b"inside")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"new"})

    committer.commit_job()

    assert output(committer) == {"dt=1/part-0.csv": b"new"}


@REPLACING_PROTOCOLS_EVERY_STORE  # the store's delete takes names literally
def test_replacing_a_directory_with_glob_characters_deletes_only_that_directory(
    destination: str, protocol: str
) -> None:
    """fsspec's ``rm`` expands ``?`` as a glob: deleting ``part?.csv`` must not delete ``partX.csv`` too."""
    committer = new_job(destination, config=delete_target_config(True), protocol=protocol)
    store, dest = committer.store, committer.paths.dest
    store.write_bytes(dest + "/dt=1/part?.csv/inner.txt", b"in the way")
    store.write_bytes(dest + "/dt=1/partX.csv/keep.txt", b"sibling directory")
    store.write_bytes(dest + "/dt=1/partY.csv", b"sibling file")
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part?.csv": b"new"})

    committer.commit_job()

    assert output(committer) == {
        "dt=1/part?.csv": b"new",
        "dt=1/partX.csv/keep.txt": b"sibling directory",
        "dt=1/partY.csv": b"sibling file",
    }


@on_every_store  # a key and a prefix may share a name
def test_a_users_file_where_a_directory_must_go_is_a_conflict(destination: str) -> None:
    """Issue 8: job commit deleted it (even with delete.target.files=false) and abort did not bring it back."""
    committer = mc.ManifestCommitter(destination, "job-1", config=delete_target_config(False))
    committer.store.write_bytes(committer.paths.dest + "/dt=1", b"a file in the way")
    committer.store.write_bytes(committer.paths.dest + "/other.csv", b"untouched")
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"p0", "other/part-1.csv": b"p1"})

    with pytest.raises(mc.OutputConflictError, match="dt=1") as raised:
        committer.commit_job()
    assert "delete.target.files" in str(raised.value)
    assert output(committer) == {"dt=1": b"a file in the way", "other.csv": b"untouched"}, "nothing changed"
    committer.abort_job()
    assert output(committer) == {"dt=1": b"a file in the way", "other.csv": b"untouched"}
    assert "_temporary" not in tree(committer)


@on_every_store  # a key and a prefix may share a name
def test_delete_target_files_replaces_a_file_where_a_directory_must_go(destination: str) -> None:
    """That key means "replace": the file is deleted and the directory created."""
    committer = mc.ManifestCommitter(destination, "job-1", config=delete_target_config(True))
    committer.store.write_bytes(committer.paths.dest + "/dt=1", b"a file in the way")
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/part-0.csv": b"p0", "dt=1/sub/part-1.csv": b"p1"})

    committer.commit_job()

    assert output(committer) == {"dt=1/part-0.csv": b"p0", "dt=1/sub/part-1.csv": b"p1"}
    assert tree(committer)["dt=1"] is None


def four_task_job(committer: CommitterBase) -> dict[str, bytes]:
    expected: dict[str, bytes] = {}
    for index in range(4):
        files = {
            f"dt={index % 2}/part-{index}-a.csv": b"a" * (index + 1),
            f"dt={index % 2}/nested/part-{index}-b.csv": b"b" * (index + 2),
            f"top-{index}.csv": b"t" * (index + 3),
        }
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", files)
        expected.update(files)
    return expected


@pytest.mark.parametrize(("io_threads", "rerun_on"), [(1, "fresh committer"), (8, "fresh committer"), (4, "same")])
@on_every_store  # a rename that copies then deletes, finished by a rerun
def test_commit_job_repeatable_after_a_crash_in_rename(destination: str, io_threads: int, rerun_on: str) -> None:
    """The first commit dies after some renames (one took effect, then the call failed); a fresh one finishes."""
    config = mc.CommitterConfig(io_threads=io_threads, save_retry_interval=0, store_retry_interval=0)
    crash = Fault(
        "rename_file", path_contains="part-2-b.csv", when="after", error=lambda: PermissionError("injected crash")
    )
    capture = FaultCapture([crash])
    first = mc.ManifestCommitter(destination, "job-crash", config=config, store_wrapper=capture)
    first.setup_job()
    expected = four_task_job(first)

    with pytest.raises(PermissionError, match="injected crash"):
        first.commit_job()
    assert capture.injecting.injected["rename_file"] == 1
    moved = output(first)
    assert moved, "the crash left some files committed"
    assert len(moved) < len(expected) or io_threads > 1
    assert all(expected[name] == data for name, data in moved.items())
    assert "_SUCCESS" not in tree(first)

    if rerun_on == "same":
        capture.injecting.clear_faults()
        again = first
    else:
        again = mc.ManifestCommitter(destination, "job-crash", config=config)
    success = again.commit_job()

    assert output(again) == expected
    assert counters(success)[COMMITTER_FILES_ALREADY_COMMITTED] == len(moved)
    assert counters(success)[COMMITTER_FILES_COMMITTED] == len(expected)
    assert counters(success)[COMMITTER_BYTES_COMMITTED] == sum(len(data) for data in expected.values())
    assert counters(success)[COMMITTER_TASKS_COMPLETED] == 4
    assert len(success.filenames) == len(expected)
    assert success_file(again).job_id == "job-crash"
    assert "_temporary" not in tree(again)


def test_commit_job_repeatable_after_a_crash_before_cleanup(destination: str) -> None:
    """Everything renamed and ``_SUCCESS`` written, then the process died: the rerun commits nothing again, finishes
    the cleanup and returns the recorded summary."""
    skip_cleanup = mc.CommitterConfig(cleanup_skipped=True)
    first = new_job(destination, job_id="job-late-crash", config=skip_cleanup)
    expected = four_task_job(first)
    summary = first.commit_job()
    assert first.store.info(first.paths.manifest_dir) is not None

    again = mc.ManifestCommitter(destination, "job-late-crash", config=FAST)
    success = again.commit_job()

    assert output(again) == expected
    assert success.to_json() == summary.to_json()
    assert success_file(again).to_json() == summary.to_json(), "_SUCCESS is never rewritten"
    assert "_temporary" not in tree(again)


def test_a_rerun_after_a_kill_in_cleanup_returns_the_summary_with_marksuccessfuljobs_false(destination: str) -> None:
    """Issue 8: a rerun after a kill while cleanup deleted manifests re-committed from the manifests left and
    reported understated totals. ``commit-finished`` (holding the summary) is deleted last, and found first."""
    no_marker = mc.CommitterConfig(cleanup_skipped=True, mark_successful_jobs=False)
    first = new_job(destination, job_id="job-half-clean", config=no_marker)
    expected = four_task_job(first)
    summary = first.commit_job()
    manifests = first.store.list_dir(first.paths.manifest_dir)
    first.store.delete_file(manifests[0].path)  # the kill came while cleanup deleted manifests

    again = mc.ManifestCommitter(destination, "job-half-clean", config=mc.CommitterConfig(mark_successful_jobs=False))
    success = again.commit_job()

    assert success.to_json() == summary.to_json()
    assert counters(success)[COMMITTER_FILES_COMMITTED] == len(expected)
    assert output(again) == expected
    assert "_temporary" not in tree(again)
    mc.ManifestCommitter(destination, "job-next", config=FAST).setup_job()


def test_commit_job_of_a_finished_job_returns_its_summary(destination: str) -> None:
    first = new_job(destination, job_id="job-done")
    expected = four_task_job(first)
    summary = first.commit_job()

    again = mc.ManifestCommitter(destination, "job-done", config=FAST).commit_job()

    assert again.job_id == "job-done"
    assert again.filenames == summary.filenames
    assert output(first) == expected


def snapshot_before_job(committer: CommitterBase) -> dict[str, bytes | None]:
    store, dest = committer.store, committer.paths.dest
    store.write_bytes(dest + "/keep.csv", b"pre-existing")
    store.write_bytes(dest + "/existing/keep-too.csv", b"pre-existing too")
    return tree(committer)


@pytest.mark.parametrize("when", ["before", "after"])
@on_every_store  # renames undone on a store that copies
def test_abort_job_after_failed_commit_restores_the_destination(
    destination: str, when: Literal["before", "after"]
) -> None:
    failure = Fault("rename_file", path_contains="part-3-a.csv", when=when, error=lambda: PermissionError("injected"))
    config = mc.CommitterConfig(io_threads=1, save_retry_interval=0, store_retry_interval=0)
    committer = mc.ManifestCommitter(destination, "job-undo", config=config, store_wrapper=FaultCapture([failure]))
    before = snapshot_before_job(committer)
    committer.setup_job()
    expected = four_task_job(committer)
    run_task(committer, "task_00009", "attempt_00009_0", {"existing/new.csv": b"new in an old dir"})

    with pytest.raises(PermissionError):
        committer.commit_job()
    assert len(output(committer)) > len([v for v in before.values() if v is not None]), "some files were moved"

    result = committer.abort_job()

    assert tree(committer) == before
    assert result.files_reverted >= 1
    assert len(expected) > result.files_reverted

    second = mc.ManifestCommitter(destination, "job-undo", config=FAST).abort_job()

    assert second.files_reverted == 0
    assert tree(committer) == before


@PROTOCOLS_BUT_V2
def test_abort_job_of_an_uncommitted_job_keeps_the_destination(destination: str, protocol: str) -> None:
    committer = mc.create_committer(destination, "job-never", protocol, config=FAST)
    before = snapshot_before_job(committer)
    committer.setup_job()
    four_task_job(committer)

    committer.abort_job()
    committer.abort_job()

    assert tree(committer) == before


def test_abort_job_after_a_successful_commit_keeps_the_output(destination: str) -> None:
    committer = new_job(destination, job_id="job-kept", config=mc.CommitterConfig(cleanup_skipped=True))
    expected = four_task_job(committer)
    committer.commit_job()

    result = mc.ManifestCommitter(destination, "job-kept", config=FAST).abort_job()

    assert result.files_reverted == 0
    assert output(committer) == expected
    assert success_file(committer).success
    assert "_temporary" not in tree(committer)


class FailCleanupAfterSuccess(FaultInjectingStore):
    """Once ``_SUCCESS`` is in place, every delete or move in the job's temporary directory fails."""

    passes_batches = False  # intercepts rename_file: batches must reach it

    def rename_file(self, source: str, dest: str) -> None:
        super().rename_file(source, dest)
        if dest.endswith("/_SUCCESS"):
            for operation in ("delete_dir", "rename_dir"):  # the move into the trash fails too: delete in place
                self.add_fault(
                    Fault(
                        operation,
                        path_contains="/_temporary/",
                        error=lambda: PermissionError("cleanup fails"),
                        times=None,
                    )
                )


@pytest.mark.parametrize("case", ["no _SUCCESS marker", "a later job replaced _SUCCESS", "cleanup failed"])
def test_abort_job_never_reverts_a_finished_commit(destination: str, case: str) -> None:
    """Complete: once commit_job has committed every file, an abort (even with the state still there) keeps them."""
    config = mc.CommitterConfig(
        cleanup_skipped=case != "cleanup failed",
        mark_successful_jobs=case != "no _SUCCESS marker",
        save_retry_interval=0,
        store_retry_interval=0,
    )
    wrapper = FailCleanupAfterSuccess if case == "cleanup failed" else FaultInjectingStore
    committer = mc.ManifestCommitter(destination, "job-done", config=config, store_wrapper=wrapper)
    committer.setup_job()
    expected = four_task_job(committer)
    if case == "cleanup failed":
        with pytest.raises(PermissionError, match="cleanup fails"):
            committer.commit_job()
        assert success_file(committer).success
    else:
        committer.commit_job()
    if case == "a later job replaced _SUCCESS":
        later = new_job(destination, job_id="job-later")
        run_task(later, "task_00000", "attempt_later_0", {"later.csv": b"later"})
        later.commit_job()
        expected["later.csv"] = b"later"
    assert committer.store.info(committer.paths.job_attempt_dir) is not None, "the job state is still there"

    result = mc.ManifestCommitter(destination, "job-done", config=FAST).abort_job()

    assert result.files_reverted == 0
    assert output(committer) == expected
    assert committer.store.info(committer.paths.job_dir) is None
