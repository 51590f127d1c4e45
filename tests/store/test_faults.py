"""Hadoop's failure cases, reached through the FaultInjectingStore the library ships."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.statistic_names import (
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_FILES_COMMITTED,
    JOB_STAGE_RENAME_FILES,
    TASK_STAGE_SAVE_SUMMARY_FILE,
    TASK_STAGE_SAVE_TASK_MANIFEST,
)
from manifest_committer.store import Fault, FaultInjectingStore, open_store
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.committing import FAST, FaultCapture, output, run_task, success_file, tree

FAILURES = ".failures"


def io_error() -> BaseException:
    return OSError(errno.EIO, "injected I/O error")


def permission_error() -> BaseException:
    return PermissionError(errno.EACCES, "injected permission error")


def committer_with_faults(
    destination: str,
    config: mc.CommitterConfig = FAST,
    faults: list[Fault] | None = None,
    *,
    job_id: str = "job-faults",
    seed: int = 0,
) -> tuple[mc.ManifestCommitter, FaultInjectingStore]:
    capture = FaultCapture(faults or [], seed=seed)
    committer = mc.ManifestCommitter(destination, job_id, config=config, store_wrapper=capture)
    committer.setup_job()
    return committer, capture.injecting


def three_tasks(committer: mc.ManifestCommitter) -> dict[str, bytes]:
    """Two files of each task in its partition directory (so each is renamed, not moved in with its directory),
    one at the top."""
    expected: dict[str, bytes] = {}
    for index in range(3):
        files = {
            f"dt={index}/part-{index}-a.csv": b"a" * (index + 1),
            f"dt={index}/part-{index}-c.csv": b"c" * (index + 2),
            f"part-{index}-b.csv": b"b" * (index + 5),
        }
        run_task(committer, f"task_{index:05d}", f"attempt_{index:05d}_0", files)
        expected.update(files)
    return expected


def test_transient_rename_failure_is_retried(destination: str) -> None:
    committer, store = committer_with_faults(destination)
    expected = three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="part-1-a.csv", error=TimeoutError, times=3))

    success = committer.commit_job()

    assert store.injected["rename_file"] == 3
    assert output(committer) == expected
    assert success.iostatistics.counters[COMMITTER_FILES_COMMITTED] == len(expected)
    assert success.iostatistics.counters.get(COMMIT_FILE_RENAME_RECOVERED, 0) == 0


def test_transient_rename_failure_that_exhausts_the_retries_fails_the_job(destination: str) -> None:
    committer, store = committer_with_faults(destination)
    three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="part-1-a.csv", error=TimeoutError, times=None))

    with pytest.raises(TimeoutError):
        committer.commit_job()
    assert "dt=1/part-1-a.csv" not in output(committer)
    assert "_SUCCESS" not in tree(committer)


@pytest.mark.parametrize("io_threads", [1, 4])
def test_rename_that_took_effect_then_failed_is_recovered(destination: str, io_threads: int) -> None:
    config = mc.CommitterConfig(io_threads=io_threads, save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config)
    expected = three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="part-2-b.csv", when="after", error=TimeoutError))
    store.add_fault(Fault("rename_file", path_contains="part-0-a.csv", when="after", error=ConnectionResetError))

    success = committer.commit_job()

    assert store.injected["rename_file"] == 2
    assert output(committer) == expected
    counters = success.iostatistics.counters
    assert counters[COMMIT_FILE_RENAME_RECOVERED] == 2
    assert counters[COMMITTER_FILES_COMMITTED] == len(expected)
    assert success_file(committer).iostatistics.counters[COMMIT_FILE_RENAME_RECOVERED] == 2


def test_permanent_rename_failure_fails_the_job_and_abort_restores(destination: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    config = mc.CommitterConfig(summary_report_directory=str(reports), save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config, job_id="job-denied")
    committer.store.write_bytes(committer.paths.dest + "/old.csv", b"before the job")
    before = tree(committer)
    three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="part-1-b.csv", error=permission_error))

    with pytest.raises(PermissionError, match="injected permission error"):
        committer.commit_job()

    report = mc.SuccessData.load(str(reports / "summary-job-denied.json"))
    assert report.success is False
    assert report.diagnostics["stage"] == JOB_STAGE_RENAME_FILES
    assert "PermissionError" in report.diagnostics["exception"]
    assert store.injected["rename_file"] == 1
    assert "_SUCCESS" not in tree(committer)

    committer.abort_job()

    after = tree(committer)
    assert {k: v for k, v in after.items() if not k.startswith("_temporary")} == {
        k: v for k, v in before.items() if not k.startswith("_temporary")
    }
    assert "_temporary" not in after


def test_permanent_rename_failure_is_counted_as_a_failed_rename(destination: str, tmp_path: Path) -> None:
    """Hadoop: a rename that throws adds one to ``commit_file_rename.failures`` (seen in the failure report)."""
    config = mc.CommitterConfig(
        io_threads=1, summary_report_directory=str(tmp_path), save_retry_interval=0, store_retry_interval=0
    )
    committer, store = committer_with_faults(destination, config)
    three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="part-1-b.csv", error=permission_error))

    with pytest.raises(PermissionError):
        committer.commit_job()

    report = mc.SuccessData.load(str(tmp_path / "summary-job-faults.json"))
    assert report.iostatistics.counters.get("commit_file_rename" + FAILURES) == 1


@pytest.mark.parametrize("failures", [1, 2])
def test_task_manifest_save_retried_below_the_configured_attempts(destination: str, failures: int) -> None:
    config = mc.CommitterConfig(manifest_save_attempts=3, save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config)
    store.add_fault(Fault("write_bytes", path_contains="-manifest.json.tmp", error=io_error, times=failures))

    task = run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"abc"}, commit=False)
    manifest = committer.commit_task(task)

    assert store.injected["write_bytes"] == failures
    assert manifest.iostatistics.counters[TASK_STAGE_SAVE_TASK_MANIFEST + FAILURES] == failures
    saved = mc.TaskManifest.from_json(committer.store.read_bytes(committer.paths.manifest_path("task_00000")))
    assert saved.iostatistics.counters[TASK_STAGE_SAVE_TASK_MANIFEST + FAILURES] == failures
    assert [entry.size for entry in saved.files] == [3]
    committer.commit_job()
    assert output(committer) == {"a.csv": b"abc"}


@pytest.mark.parametrize("attempts", [1, 2, 3])
def test_task_manifest_save_failing_every_configured_attempt_fails_the_task(destination: str, attempts: int) -> None:
    """``manifest.save.attempts`` is honoured (Hadoop's always makes 5)."""
    config = mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.manifest.save.attempts": str(attempts)},
        save_retry_interval=0,
        store_retry_interval=0,
    )
    committer, store = committer_with_faults(destination, config)
    store.add_fault(Fault("write_bytes", path_contains="-manifest.json.tmp", error=io_error, times=attempts))

    task = run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"abc"}, commit=False)
    with pytest.raises(OSError, match="injected I/O error"):
        committer.commit_task(task)

    assert store.injected["write_bytes"] == attempts
    assert committer.store.info(committer.paths.manifest_path("task_00000")) is None
    success = committer.commit_job()
    assert output(committer) == {}, "a task whose commit failed contributes nothing"
    assert success.filenames == []


def test_success_file_save_failing_transiently_is_retried(destination: str, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    config = mc.CommitterConfig(summary_report_directory=str(reports), save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config, job_id="job-success-retry")
    expected = three_tasks(committer)
    store.add_fault(Fault("write_bytes", path_contains="_SUCCESS.tmp", error=io_error, times=2))

    returned = committer.commit_job()

    assert store.injected["write_bytes"] == 2
    on_disk = success_file(committer)
    assert on_disk.success and on_disk.job_id == "job-success-retry"
    assert on_disk.filenames == returned.filenames
    assert output(committer) == expected
    report = mc.SuccessData.load(str(reports / "summary-job-success-retry.json"))
    assert report.iostatistics.counters[TASK_STAGE_SAVE_SUMMARY_FILE + FAILURES] == 2


def test_success_file_save_failing_every_attempt_fails_the_job(destination: str) -> None:
    config = mc.CommitterConfig(manifest_save_attempts=2, save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config)
    three_tasks(committer)
    store.add_fault(Fault("write_bytes", path_contains="_SUCCESS.tmp", error=io_error, times=None))

    with pytest.raises(OSError, match="injected I/O error"):
        committer.commit_job()
    assert store.injected["write_bytes"] == 2
    assert "_SUCCESS" not in tree(committer)


def test_manifest_listing_failure_fails_the_job_before_any_rename(destination: str) -> None:
    committer, store = committer_with_faults(destination)
    three_tasks(committer)
    before = tree(committer)
    renames_before = store.calls["rename_file"]
    store.add_fault(Fault("list_dir", path_contains="/manifests", error=permission_error, times=None))

    with pytest.raises(PermissionError):
        committer.commit_job()

    assert store.injected["list_dir"] == 1
    assert store.calls["rename_file"] == renames_before
    assert tree(committer) == before


def test_transient_manifest_listing_failure_is_retried(destination: str) -> None:
    committer, store = committer_with_faults(destination)
    expected = three_tasks(committer)
    store.add_fault(Fault("list_dir", path_contains="/manifests", error=TimeoutError, times=2))

    committer.commit_job()

    assert store.injected["list_dir"] == 2
    assert output(committer) == expected


def test_missing_source_at_job_commit_names_the_file(destination: str) -> None:
    committer, _ = committer_with_faults(destination)
    three_tasks(committer)
    source = committer.paths.task_attempt_dir("attempt_00001_0") + "/part-1-b.csv"
    committer.store.delete_file(source)

    with pytest.raises(mc.CommitterError, match=r"part-1-b\.csv"):
        committer.commit_job()
    assert "_SUCCESS" not in tree(committer)


def cleanup_config(parallel: bool, ignored: bool) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {
            "mapreduce.fileoutputcommitter.cleanup-failures.ignored": str(ignored).lower(),
            "mapreduce.manifest.committer.cleanup.parallel.delete": str(parallel).lower(),
            # _SUCCESS.tmp lives in the job directory, so its delete would match the fault below too.
            "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        },
        save_retry_interval=0,
        store_retry_interval=0,
    )


JOB_DIR_DELETES = Fault("delete_dir", path_contains="/_temporary/job-faults", error=permission_error, times=None)
"""Every delete of the job directory or anything in it fails."""
NO_MOVE_TO_TRASH = Fault("rename_dir", path_contains="/_temporary/job-faults", error=permission_error, times=None)
"""The one-call move of the job directory into the trash fails, so cleanup deletes in place, synchronously: the
path whose delete failures these tests are about (on stores without a directory rename it is the only one)."""


@pytest.mark.parametrize("parallel", [True, False])
def test_cleanup_delete_failure_is_raised(destination: str, parallel: bool) -> None:
    committer, store = committer_with_faults(destination, cleanup_config(parallel, ignored=False))
    expected = three_tasks(committer)
    store.add_fault(NO_MOVE_TO_TRASH)
    store.add_fault(JOB_DIR_DELETES)

    with pytest.raises(PermissionError, match="injected permission error"):
        committer.commit_job()

    assert store.injected["delete_dir"] >= 1
    assert output(committer) == expected, "the files were committed before cleanup"
    assert committer.store.info(committer.paths.job_dir) is not None


@pytest.mark.parametrize("parallel", [True, False])
def test_cleanup_delete_failure_is_ignored_when_configured(destination: str, parallel: bool) -> None:
    committer, store = committer_with_faults(destination, cleanup_config(parallel, ignored=True))
    expected = three_tasks(committer)
    store.add_fault(NO_MOVE_TO_TRASH)
    store.add_fault(JOB_DIR_DELETES)

    success = committer.commit_job()

    assert success.success
    assert store.injected["delete_dir"] >= 1
    assert output(committer) == expected
    assert committer.store.info(committer.paths.job_dir) is not None, "the failed delete left the state"


def test_failed_task_attempt_deletes_fall_back_to_deleting_the_job_directory(destination: str) -> None:
    """Hadoop's parallel cleanup records per-attempt delete errors and still deletes the job directory."""
    committer, store = committer_with_faults(destination, cleanup_config(parallel=True, ignored=False))
    expected = three_tasks(committer)
    store.add_fault(NO_MOVE_TO_TRASH)
    store.add_fault(Fault("delete_dir", path_contains="/tasks/attempt_", error=permission_error, times=None))

    committer.commit_job()

    assert store.injected["delete_dir"] == 3
    assert output(committer) == expected
    assert "_temporary" not in tree(committer)


def test_cleanup_after_a_commit_survives_a_failed_delete_and_keeps_the_record_to_the_end(destination: str) -> None:
    config = mc.CommitterConfig(
        cleanup_parallel_delete=True,
        cleanup_parallel_delete_base_first=True,
        mark_successful_jobs=False,  # its _SUCCESS.tmp lives in the job directory and would match the fault
        save_retry_interval=0,
        store_retry_interval=0,
    )
    committer, store = committer_with_faults(destination, config)
    expected = three_tasks(committer)
    deletes_before = store.calls["delete_dir"]
    store.add_fault(NO_MOVE_TO_TRASH)
    store.add_fault(Fault("delete_dir", path_contains="/tasks/", error=permission_error, times=1))
    files_before = store.calls["delete_file"]

    committer.commit_job()

    assert store.injected["delete_dir"] == 1
    # With commit-finished in place nothing is deleted in one call before the record: in one round, each task
    # attempt directory (one fails, as Hadoop tolerates), manifests/ and journal/, and the file commit-started;
    # then the job directory, with tasks/ and the record.
    assert store.calls["delete_dir"] - deletes_before == 3 + 2 + 1
    assert store.calls["delete_file"] - files_before == 1
    assert output(committer) == expected
    assert "_temporary" not in tree(committer)


def injected_pattern(seed: int, calls: int = 200) -> list[bool]:
    opened = open_store("memory://fault-seed")
    store, root = opened.store, opened.path
    faulty = FaultInjectingStore(store, [Fault("info", rate=0.5, times=None)], seed=seed)
    pattern = []
    for index in range(calls):
        try:
            faulty.info(f"{root}/file-{index}")
            pattern.append(False)
        except TimeoutError:
            pattern.append(True)
    return pattern


def test_faults_are_reproducible_from_a_seed() -> None:
    first = injected_pattern(seed=42)
    assert first == injected_pattern(seed=42)
    assert first != injected_pattern(seed=43)
    assert 50 < sum(first) < 150, "rate 0.5 fails about half the calls"


def flaky_job(destination: str, seed: int) -> tuple[dict[str, bytes], dict[str, int]]:
    config = mc.CommitterConfig(io_threads=1, save_retry_interval=0, store_retry_interval=0)
    committer, store = committer_with_faults(destination, config, seed=seed)
    expected = three_tasks(committer)
    store.add_fault(Fault("rename_file", path_contains="/part-", error=TimeoutError, times=None, rate=0.3))
    store.add_fault(Fault("info", path_contains="/part-", when="after", error=TimeoutError, times=None, rate=0.2))
    committer.commit_job()
    assert output(committer) == expected
    return output(committer), dict(store.injected)


def test_a_seeded_flaky_job_commits_exactly_and_reproducibly(tmp_path: Path) -> None:
    first_output, first_injected = flaky_job(str(tmp_path / "one"), seed=7)
    second_output, second_injected = flaky_job(str(tmp_path / "two"), seed=7)

    assert first_injected == second_injected
    assert first_injected["rename_file"] >= 1
    assert first_output == second_output


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every latency the fault injector sleeps, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr("manifest_committer.store.faults.time.sleep", slept.append)
    return slept


def test_a_batch_to_a_store_with_concurrent_calls_sleeps_once_and_fails_per_call(
    tmp_path: Path, sleeps: list[float]
) -> None:
    opened = open_store(str(tmp_path))
    inner, root = opened.store, opened.path
    for name in "abcd":
        inner.write_bytes(f"{root}/{name}", name.encode())
    pairs = [(f"{root}/{name}", f"{root}/{name}.moved") for name in "abcd"]
    faults = [Fault("rename_file", "/b ->"), Fault("rename_file", "/c ->", when="after")]

    one_by_one = FaultInjectingStore(inner, faults, latency=0.02)
    assert [type(o).__name__ for o in one_by_one.rename_files(pairs[:1])] == ["NoneType"]
    assert sleeps == [0.02]

    sleeps.clear()
    together = FaultInjectingStore(InFlightTogether(inner), faults, latency=0.02)
    assert together.capabilities.concurrent_calls
    outcomes = together.rename_files(pairs[1:])
    assert sleeps == [0.02], "the batch's calls are in flight together: one latency for all"
    assert [type(o).__name__ for o in outcomes] == ["TimeoutError", "TimeoutError", "NoneType"]
    assert together.calls["rename_file"] == 3 and together.injected["rename_file"] == 2
    assert inner.info(f"{root}/b") is not None, "a fault before the call: not moved"
    assert inner.info(f"{root}/c.moved") is not None, "a fault after the call: moved, then failed"
    assert inner.info(f"{root}/d.moved") is not None


def test_a_batch_of_reads_sleeps_once_and_fails_per_read(tmp_path: Path, sleeps: list[float]) -> None:
    opened = open_store(str(tmp_path))
    inner, root = opened.store, opened.path
    for name in "abc":
        inner.write_bytes(f"{root}/{name}", name.encode())
    paths = [f"{root}/{name}" for name in "abcd"]
    faults = [Fault("read_bytes", "/a"), Fault("read_bytes", "/b", when="after")]

    batching = InFlightTogether(inner)
    together = FaultInjectingStore(batching, faults, latency=0.02)
    outcomes = together.read_files(paths)
    assert sleeps == [0.02], "the batch's reads are in flight together: one latency for all"
    assert [type(o).__name__ for o in outcomes] == ["TimeoutError", "TimeoutError", "bytes", "FileNotFoundError"]
    assert outcomes[2] == b"c"
    assert together.calls["read_bytes"] == 4 and together.injected["read_bytes"] == 2
    assert batching.read_batches == [[f"{root}/b", f"{root}/c", f"{root}/d"]], "a fault before: not sent"

    sleeps.clear()
    one_by_one = FaultInjectingStore(WrappingStore(inner), latency=0.02)
    one_by_one.inner.capabilities = dataclasses.replace(inner.capabilities, microsecond_calls=False)
    one_by_one.latency = 0.02
    assert not one_by_one.capabilities.concurrent_calls
    assert one_by_one.read_files(paths[:3]) == [b"a", b"b", b"c"]
    assert sleeps == [0.02] * 3, "a store that cannot put calls in flight together: a latency a read"


def test_a_batch_of_directory_deletes_sleeps_once_and_fails_per_delete(tmp_path: Path, sleeps: list[float]) -> None:
    opened = open_store(str(tmp_path))
    inner, root = opened.store, opened.path
    for name in "abc":
        inner.write_bytes(f"{root}/{name}/f", name.encode())
    paths = [f"{root}/{name}" for name in "abcd"]
    batching = InFlightTogether(inner)
    together = FaultInjectingStore(batching, [Fault("delete_dir", "/a"), Fault("delete_dir", "/b", when="after")])
    outcomes = together.delete_dirs(paths)
    assert sleeps == [], "no latency asked"
    assert [type(o).__name__ for o in outcomes] == ["TimeoutError", "TimeoutError", "bool", "bool"]
    assert outcomes[2] is True and outcomes[3] is False, "deleted, and nothing there"
    assert batching.delete_batches == [[f"{root}/b", f"{root}/c", f"{root}/d"]], "a fault before: not sent"
    assert inner.info(f"{root}/a") is not None and inner.info(f"{root}/b") is None

    together.latency = 0.02
    assert together.delete_dirs([f"{root}/a"]) == [True]
    assert sleeps == [0.02], "one latency for the batch"


def test_under_latency_a_store_of_microsecond_calls_takes_batches_and_others_do_not(
    tmp_path: Path, sleeps: list[float]
) -> None:
    """A store whose calls take microseconds (memory, local disk) makes a batch in turn as fast as at once: under
    injected latency it is a store that takes batches, one latency a batch. A store whose calls take time and
    that cannot put them in flight together sleeps once a call."""
    opened = open_store(str(tmp_path))
    inner, root = opened.store, opened.path
    for name in "abcdef":
        inner.write_bytes(f"{root}/{name}", name.encode())
    pairs = [(f"{root}/{name}", f"{root}/{name}.moved") for name in "abcdef"]

    fast = FaultInjectingStore(inner, latency=0.02)
    assert fast.capabilities.concurrent_calls and not fast.capabilities.microsecond_calls
    assert fast.rename_files(pairs[:3]) == [None, None, None]
    assert sleeps == [0.02], "one latency for the batch"
    fast.latency = 0
    assert not fast.capabilities.concurrent_calls and fast.capabilities.microsecond_calls, "as the store is"

    sleeps.clear()
    slow = FaultInjectingStore(WrappingStore(inner), latency=0.02)  # a wrapper's calls are no longer microseconds
    slow.inner.capabilities = dataclasses.replace(inner.capabilities, microsecond_calls=False)
    slow.latency = 0.02
    assert not slow.capabilities.concurrent_calls
    assert slow.rename_files(pairs[3:]) == [None, None, None]
    assert sleeps == [0.02] * 3, "one latency a call"
