"""The ``upload`` protocol end to end on moto: pending uploads completed at job commit, never overwriting."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.protocols.upload.committer import UploadCommitter
from manifest_committer.protocols.upload.records import UploadPaths
from manifest_committer.store import StoreOperations
from manifest_committer.store.faults import Fault, FaultInjectingStore, s3_error
from manifest_committer.store.s3 import S3Store
from tests.fixtures.emulators import Emulator
from tests.fixtures.together import MeetInFlight

pytestmark = pytest.mark.s3

MIB = 2**20
FAST = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, markers_type=mc.MarkerType.DIRECT)
BATCHED = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, markers_type=mc.MarkerType.BATCHED)


@pytest.fixture
def dest(s3_bucket: str) -> str:
    return f"s3://{s3_bucket}/table"


def committer(dest: str, job: str = "job-1", config: mc.CommitterConfig = FAST, **kwargs: Any) -> UploadCommitter:
    built = mc.create_committer(dest, job, "upload", config=config, **kwargs)
    assert isinstance(built, UploadCommitter)
    return built


def write(task: mc.TaskAttempt, files: dict[str, bytes], block_size: int | None = None) -> None:
    for relative, data in files.items():
        with task.fs.open(f"{task.work_path}/{relative}", "wb", block_size=block_size) as file:
            for start in range(0, len(data), MIB):  # streamed as an engine writes
                file.write(data[start : start + MIB])


def objects(store: S3Store, bucket: str) -> dict[str, bytes]:
    """Every object of the bucket outside the committer's ``_temporary`` state, with its bytes."""
    keys = [key for key in store.fs.find(bucket) if "/_temporary/" not in key]
    return {key.removeprefix(bucket + "/"): store.fs.cat_file(key) for key in sorted(keys)}


def uploads(store: S3Store, bucket: str) -> list[tuple[str, str]]:
    return sorted((upload.key, upload.upload_id) for upload in store.list_uploads(bucket + "/"))


@pytest.fixture
def store(s3_store: S3Store) -> Iterator[S3Store]:
    s3_store.fs.invalidate_cache()
    yield s3_store


# --- the protocol -------------------------------------------------------------------------------------------------


def test_nothing_is_visible_before_job_commit_and_exact_bytes_after(dest: str, s3_bucket: str, store: S3Store) -> None:
    big = bytes(range(256)) * (23 * MIB // 256)  # 23 MiB in 5 MiB parts: 5 parts, the last one smaller
    files = {"empty.bin": b"", "dt=1/small.csv": b"a,b\n1,2\n", "dt=2/big.bin": big}
    with committer(dest) as job:
        job.setup_job()
        task = job.setup_task("task_0", "attempt_0_0")
        write(task, files, block_size=5 * MIB)
        assert task.fs.info(task.work_path + "/dt=2/big.bin")["size"] == len(big)
        manifest = job.commit_task(task)
        assert [entry.size for entry in manifest.files] == [8, len(big), 0]  # sorted by path
        assert manifest.pending_uploads is not None and len(manifest.pending_uploads[1].etags) == 5
        assert objects(store, s3_bucket) == {}, "nothing under the destination's keys before job commit"
        assert len(uploads(store, s3_bucket)) == 2, "the empty file started no upload"
        success = job.commit_job()
    assert success.committer == "upload"
    assert objects(store, s3_bucket) == {
        "table/_SUCCESS": store.fs.cat_file(f"{s3_bucket}/table/_SUCCESS"),
        **{f"table/{name}": data for name, data in files.items()},
    }
    assert uploads(store, s3_bucket) == []
    assert json.loads(store.fs.cat_file(f"{s3_bucket}/table/_SUCCESS"))["committer"] == "upload"
    assert store.fs.find(f"{s3_bucket}/table/_temporary") == [], "the job's state is gone"


def test_two_committed_attempts_only_the_accepted_one_is_visible(dest: str, s3_bucket: str, store: S3Store) -> None:
    with committer(dest) as job:
        job.setup_job()
        for attempt, data in (("attempt_0_0", b"first"), ("attempt_0_1", b"second")):
            task = job.setup_task("task_0", attempt)
            write(task, {"part-0.csv": data})  # Spark's speculative copies write the same file name
            job.commit_task(task)
        assert len(uploads(store, s3_bucket)) == 2
        job.commit_job({"task_0": "attempt_0_1"})
    assert objects(store, s3_bucket)["table/part-0.csv"] == b"second"
    assert uploads(store, s3_bucket) == [], "the other attempt's upload was aborted"


def test_without_accepted_attempts_the_first_saved_manifest_wins(dest: str, s3_bucket: str, store: S3Store) -> None:
    with committer(dest) as job:
        job.setup_job()
        for attempt, data in (("attempt_0_1", b"first"), ("attempt_0_0", b"second")):
            task = job.setup_task("task_0", attempt)
            write(task, {"part-0.csv": data})
            job.commit_task(task)
            store.fs.invalidate_cache()
        statuses = {s.path.rsplit("/", 1)[-1]: s.modified for s in store.list_dir(job.paths.manifest_dir)}
        first = min(statuses, key=lambda name: (statuses[name], name)).removesuffix("-manifest.json")
        job.commit_job()
    assert objects(store, s3_bucket)["table/part-0.csv"] == (b"first" if first == "attempt_0_1" else b"second")
    assert uploads(store, s3_bucket) == []


class ReadsSeen(FaultInjectingStore):
    """Counts the reads and listings of each kind of the job's state (``markers``, ``uploads``, ``manifests``)."""

    def __init__(self, inner: StoreOperations) -> None:
        super().__init__(inner)
        self.seen: dict[str, int] = {}

    def around(self, operation: str, path: str, call: Any) -> Any:
        if operation in ("read_bytes", "list_dir"):
            for kind in ("/markers", "/uploads", "/manifests"):
                if kind in path:
                    self.seen[kind[1:]] = self.seen.get(kind[1:], 0) + 1
        return super().around(operation, path, call)


@pytest.mark.parametrize("left", [False, True], ids=["nothing left", "an attempt left"])
def test_markers_and_upload_records_are_read_only_when_an_upload_is_left(
    dest: str, s3_bucket: str, store: S3Store, left: bool
) -> None:
    """Most job commits leave no incomplete upload: one listing of the uploads says so, and the job's markers and
    its records of started uploads (one a file) are not read; a left attempt's upload is found through them."""
    seen: list[ReadsSeen] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        seen.append(ReadsSeen(inner))
        return seen[-1]

    with committer(dest, config=BATCHED) as job:
        job.setup_job()
        for attempt in ("attempt_0_0", "attempt_0_1")[: 1 + left]:
            task = job.setup_task("task_0", attempt)
            write(task, {"part-0.csv": attempt.encode()})
            job.commit_task(task)
    with committer(dest, config=BATCHED, store_wrapper=wrap) as fresh:
        fresh.commit_job({"task_0": "attempt_0_0"})
    assert objects(store, s3_bucket)["table/part-0.csv"] == b"attempt_0_0"
    assert uploads(store, s3_bucket) == []
    reads = seen[-1].seen
    assert reads.get("manifests", 0) >= 2, "listed, then read"
    if left:
        assert reads.get("markers", 0) >= 1 and reads.get("uploads", 0) >= 1, reads
    else:
        assert "markers" not in reads and "uploads" not in reads, reads


def test_a_job_commit_begins_with_one_round_trip(dest: str, s3_bucket: str, store: S3Store) -> None:
    """Whether the job committed (``commit-finished``, ``_SUCCESS``), was set up, began committing, and which
    manifests it has: five calls that wait for nothing, in flight together."""
    with committer(dest) as job:
        job.setup_job()
        task = job.setup_task("task_0", "attempt_0_0")
        write(task, {"part-0.csv": b"data"})
        job.commit_task(task)
        paths = job.paths
    expected = [
        ("read_bytes", paths.commit_finished_path),
        ("read_bytes", paths.success_path),
        ("read_bytes", paths.commit_started_path),
        ("info", UploadPaths(paths).protocol_file),
        ("list_dir", paths.manifest_dir.rstrip("/")),
    ]
    meeting: list[MeetInFlight] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        meeting.append(MeetInFlight(inner, expected))
        return meeting[-1]

    with committer(dest, store_wrapper=wrap) as fresh:
        fresh.commit_job()
    assert sorted(meeting[-1].met) == sorted(expected)
    assert objects(store, s3_bucket)["table/part-0.csv"] == b"data"


def test_abort_task_aborts_only_its_own_upload_of_a_shared_key(dest: str, s3_bucket: str, store: S3Store) -> None:
    with committer(dest) as job:
        job.setup_job()
        kept, aborted = job.setup_task("task_0", "attempt_0_0"), job.setup_task("task_0", "attempt_0_1")
        write(kept, {"part-0.csv": b"kept"})
        write(aborted, {"part-0.csv": b"aborted"})
        before = uploads(store, s3_bucket)
        with committer(dest) as fresh:  # another process: only the records say what the attempt wrote
            fresh.abort_task(fresh.task_attempt("task_0", "attempt_0_1"))
        assert len(before) == 2 and len(uploads(store, s3_bucket)) == 1
        job.commit_task(kept)
        job.commit_job()
    assert objects(store, s3_bucket)["table/part-0.csv"] == b"kept"
    assert uploads(store, s3_bucket) == []


@pytest.mark.parametrize("config", [FAST, BATCHED], ids=["direct", "batched"])
def test_a_fresh_committer_aborts_after_the_driver_died(
    dest: str, s3_bucket: str, store: S3Store, config: mc.CommitterConfig
) -> None:
    driver = committer(dest, config=config)
    driver.setup_job()
    task = driver.setup_task("task_0", "attempt_0_0")
    write(task, {"a.csv": b"a"})
    driver.commit_task(task)
    # An attempt that died while writing: its marker is durable, its upload started, it has no record.
    orphan = driver.setup_task("task_1", "attempt_1_0")
    file = orphan.fs.open(orphan.work_path + "/b.csv", "wb")
    file.write(b"b" * 10)
    file.flush()
    file._file.flush(force=True)  # the part is sent: an upload exists that no record names
    driver.close()  # the driver dies: its heartbeat stops, its marker server answers no more
    assert len(uploads(store, s3_bucket)) == 2
    with committer(dest, config=config) as fresh:
        result = fresh.abort_job()
        assert len(result.aborted) == 2 and not result.committed
        assert fresh.abort_job().aborted == (), "a second abort does nothing"
    assert uploads(store, s3_bucket) == []
    assert objects(store, s3_bucket) == {}
    assert store.fs.find(f"{s3_bucket}/table/_temporary") == []


def test_a_task_in_another_process_is_committed_from_its_records(
    dest: str, s3_bucket: str, store: S3Store, moto_s3: Emulator
) -> None:
    with committer(dest) as job:
        job.setup_job()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            pool.submit(_write_in_another_process, dest, dict(moto_s3.storage_options)).result()
        manifest = job.commit_task(job.task_attempt("task_0", "attempt_0_0"))  # no in-process registry
        assert [entry.size for entry in manifest.files] == [3]
        job.commit_job()
    assert objects(store, s3_bucket)["table/x/y.csv"] == b"xyz"


def _write_in_another_process(dest: str, options: dict[str, Any]) -> None:
    """A task process: only the destination, job id and storage options travel (the config is FAST)."""
    with committer(dest, storage_options=options) as job:
        write(job.task_attempt("task_0", "attempt_0_0"), {"x/y.csv": b"xyz"})


# --- untrusted documents ------------------------------------------------------------------------------------------


def _committed_manifest(job: UploadCommitter, files: dict[str, bytes]) -> tuple[str, dict[str, Any]]:
    task = job.setup_task("task_0", "attempt_0_0")
    write(task, files)
    job.commit_task(task)
    path = job.layout.attempt_manifest("attempt_0_0")
    return path, json.loads(job.store.read_bytes(path))


@pytest.mark.parametrize(
    "crafted",
    [
        ("destinationKey", "elsewhere/a.csv", r"pendingUploads\[0\].*outside the destination"),
        ("destinationKey", "table/_temporary/x", r"pendingUploads\[0\].*outside the destination"),
        ("destinationKey", "table/b.csv", r"pendingUploads\[0\].*not the key of its file entry"),
        ("bucket", "other-bucket", r"pendingUploads\[0\].*outside the destination"),
        ("length", 7, r"pendingUploads\[0\].length 7 differs from files\[0\].z"),
        ("etags", [], r"pendingUploads\[0\].*'etags'"),
    ],
)
def test_a_crafted_manifest_is_refused_naming_file_and_field_and_nothing_changes(
    dest: str, s3_bucket: str, store: S3Store, crafted: tuple[str, Any, str]
) -> None:
    field, value, message = crafted
    with committer(dest) as job:
        job.setup_job()
        path, document = _committed_manifest(job, {"a.csv": b"a"})
        document["pendingUploads"][0][field] = value
        store.fs.pipe_file(path, json.dumps(document).encode())
        with pytest.raises(mc.ManifestError, match=message) as raised:
            job.commit_job()
        assert "attempt_0_0-manifest.json" in str(raised.value)
    assert objects(store, s3_bucket) == {}
    assert len(uploads(store, s3_bucket)) == 1, "the upload stays for an abort"


def test_a_crafted_pending_record_is_refused_naming_file_and_field(dest: str, s3_bucket: str, store: S3Store) -> None:
    with committer(dest) as job:
        job.setup_job()
        write(job.setup_task("task_0", "attempt_0_0"), {"a.csv": b"a"})
        [record] = store.fs.find(job.layout.attempt_pending_dir("attempt_0_0"))
        document = json.loads(store.fs.cat_file(record))
        document["upload"]["destinationKey"] = "victim/a.csv"
        store.fs.pipe_file(record, json.dumps(document).encode())
        with committer(dest) as fresh, pytest.raises(mc.ManifestError, match=r"\.pending: upload: .*outside"):
            fresh.commit_task(fresh.task_attempt("task_0", "attempt_0_0"))


# --- conflicts ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delete_target_files", [False, True])
def test_an_existing_object_is_a_conflict_unless_delete_target_files(
    dest: str, s3_bucket: str, store: S3Store, delete_target_files: bool
) -> None:
    store.fs.pipe_file(f"{s3_bucket}/table/a.csv", b"someone else's")
    config = mc.CommitterConfig(
        store_retry_interval=0, markers_type=mc.MarkerType.DIRECT, delete_target_files=delete_target_files
    )
    with committer(dest, config=config) as job:
        job.setup_job()
        write(job.setup_task("task_0", "attempt_0_0"), {"a.csv": b"ours"})
        job.commit_task(job.task_attempt("task_0", "attempt_0_0"))
        if not delete_target_files:
            with pytest.raises(mc.OutputConflictError, match=r"table/a.csv.*delete.target.files") as raised:
                job.commit_job()
            assert isinstance(raised.value.__cause__, FileExistsError)
            assert objects(store, s3_bucket) == {"table/a.csv": b"someone else's"}, "nothing overwritten"
            job.abort_job()
            assert uploads(store, s3_bucket) == []
            return
        job.commit_job()
    assert objects(store, s3_bucket)["table/a.csv"] == b"ours"


def test_two_jobs_into_one_destination_keep_each_others_pending_uploads(
    dest: str, s3_bucket: str, store: S3Store
) -> None:
    """Job A commits (and cleans up) while job B's tasks hold pending uploads, one at a key both jobs write: A's
    cleanup aborts none of B's uploads; B's own file then lands, and its claim on A's key is a conflict that
    overwrites nothing."""
    with committer(dest, "job-a") as job_a, committer(dest, "job-b") as job_b:
        job_a.setup_job()
        job_b.setup_job()
        write(job_a.setup_task("task_0", "attempt_0_0"), {"a.csv": b"a", "same.csv": b"from a"})
        write(job_b.setup_task("task_0", "attempt_0_0"), {"b.csv": b"b", "same.csv": b"from b"})
        job_a.commit_task(job_a.task_attempt("task_0", "attempt_0_0"))
        job_b.commit_task(job_b.task_attempt("task_0", "attempt_0_0"))
        b_uploads = uploads(store, s3_bucket)
        assert len(b_uploads) == 4

        job_a.commit_job()
        store.fs.invalidate_cache()
        assert objects(store, s3_bucket) == {
            "table/_SUCCESS": store.fs.cat_file(f"{s3_bucket}/table/_SUCCESS"),
            "table/a.csv": b"a",
            "table/same.csv": b"from a",
        }
        left = uploads(store, s3_bucket)
        assert sorted(key for key, _ in left) == ["table/b.csv", "table/same.csv"], "B's uploads survived A's commit"
        assert set(left) <= set(b_uploads)
        assert store.fs.find(f"{s3_bucket}/table/_temporary/job-b"), "B's state survived A's cleanup"

        with pytest.raises(mc.OutputConflictError, match=r"table/same.csv"):
            job_b.commit_job()
        store.fs.invalidate_cache()
        assert objects(store, s3_bucket)["table/same.csv"] == b"from a", "nothing overwritten"
        job_b.abort_job()
    store.fs.invalidate_cache()
    assert uploads(store, s3_bucket) == []
    assert "table/b.csv" not in objects(store, s3_bucket), "the aborted job's partial commit was reverted"
    assert store.fs.find(f"{s3_bucket}/table/_temporary") == []


# --- crashes and throttling -----------------------------------------------------------------------------------------

CRASH_POINTS = [
    ("write_bytes", "commit-started", "after"),
    ("complete_upload", "table/a.csv", "after"),
    ("complete_upload", "dt=1/b.csv", "before"),
    ("write_bytes", "_SUCCESS", "after"),
    ("write_bytes", "commit-finished", "after"),
    ("abort_upload", "table/", "after"),
    ("delete_dir", "_temporary", "after"),
]
"""Each store change of a job commit, the crash just after it took effect (or, where the change is the first of
its kind, before it)."""


class Crash(BaseException):
    """A process killed: not an error the committer may handle."""


def _crash() -> BaseException:
    return Crash()


def _prepare(dest: str) -> None:
    with committer(dest) as job:
        job.setup_job()
        for task_id, attempt, files in (
            ("task_0", "attempt_0_0", {"a.csv": b"a", "dt=1/b.csv": b"b"}),
            ("task_0", "attempt_0_1", {"a.csv": b"other attempt"}),
            ("task_1", "attempt_1_0", {"empty": b""}),
        ):
            task = job.setup_task(task_id, attempt)
            write(task, files)
            job.commit_task(task)


@pytest.mark.parametrize("point", CRASH_POINTS, ids=["-".join(point) for point in CRASH_POINTS])
@pytest.mark.parametrize("then", ["rerun", "abort"])
def test_a_crash_at_each_step_of_commit_job_then_a_rerun_or_an_abort(
    dest: str, s3_bucket: str, store: S3Store, point: tuple[str, str, Any], then: str
) -> None:
    operation, path, when = point
    _prepare(dest)
    fault = Fault(operation, path, when, _crash)
    wrapped: list[FaultInjectingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapped.append(FaultInjectingStore(inner, [fault]))
        return wrapped[0]

    with committer(dest, store_wrapper=wrap) as dying, pytest.raises(Crash):
        dying.commit_job({"task_0": "attempt_0_0", "task_1": "attempt_1_0"})
    assert wrapped[0].injected[operation] == 1
    store.fs.invalidate_cache()
    committed = store.fs.exists(f"{s3_bucket}/table/_SUCCESS")
    with committer(dest) as fresh:
        if then == "rerun":
            fresh.commit_job()
        else:
            fresh.abort_job()
    expected = {"table/a.csv": b"a", "table/dt=1/b.csv": b"b", "table/empty": b""}
    found = objects(store, s3_bucket)
    found.pop("table/_SUCCESS", None)
    assert found == (expected if then == "rerun" or committed else {})
    assert uploads(store, s3_bucket) == []
    assert store.fs.find(f"{s3_bucket}/table/_temporary") == []


def test_a_throttling_storm_during_completion_is_ridden_out_by_the_retry_policy(
    dest: str, s3_bucket: str, store: S3Store
) -> None:
    _prepare(dest)
    storm = [
        Fault("complete_upload", "", "before", s3_error("SlowDown", 503, operation="CompleteMultipartUpload"), 4),
        Fault("complete_upload", "", "before", s3_error("InternalError", 500), 2),
        Fault("write_bytes", "commit-started", "before", s3_error("SlowDown", 503), 1),  # a write of the commit's
    ]  # own: the first write is the lease's, whose retries are not the commit's statistics
    wrapped: list[FaultInjectingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapped.append(FaultInjectingStore(inner, storm))
        return wrapped[0]

    with committer(dest, store_wrapper=wrap) as job:
        success = job.commit_job({"task_0": "attempt_0_0", "task_1": "attempt_1_0"})
    assert wrapped[0].injected["complete_upload"] == 6 and wrapped[0].injected["write_bytes"] == 1
    assert success.iostatistics.counters["store_io_retry"] >= 7
    assert objects(store, s3_bucket)["table/a.csv"] == b"a"
    assert uploads(store, s3_bucket) == []


def test_a_setup_whose_answer_was_lost_is_retried_and_finds_its_own_sign(
    dest: str, s3_bucket: str, store: S3Store
) -> None:
    lost = Fault("put_if_absent", "/protocol", "after", s3_error("InternalError", 500))
    wrapped: list[FaultInjectingStore] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapped.append(FaultInjectingStore(inner, [lost]))
        return wrapped[0]

    with committer(dest, store_wrapper=wrap) as job:
        job.setup_job()  # the retry's 412 is our own write
        assert wrapped[0].injected["put_if_absent"] == 1
        with committer(dest) as again, pytest.raises(mc.JobStateError, match="already set up"):
            again.setup_job()  # a second setup of the same job attempt still is one
        write(job.setup_task("task_0", "attempt_0_0"), {"a.csv": b"a"})
        job.commit_task(job.task_attempt("task_0", "attempt_0_0"))
        job.commit_job()
    assert objects(store, s3_bucket)["table/a.csv"] == b"a"


def test_rollback_of_a_dead_upload_job_leaves_no_incomplete_upload(dest: str, s3_bucket: str, store: S3Store) -> None:
    driver = committer(dest, config=BATCHED)
    driver.setup_job()
    for task_id, attempt in (("task_0", "attempt_0_0"), ("task_1", "attempt_1_0")):
        task = driver.setup_task(task_id, attempt)
        write(task, {f"{task_id}.csv": b"x"})
    driver.commit_task(driver.task_attempt("task_0", "attempt_0_0"))
    driver.close()  # the driver dies: its marker server answers no more, its lease is renewed no more
    time.sleep(0.3)
    rolled = mc.rollback(dest, config=dataclasses.replace(BATCHED, heartbeat_expiry_seconds=0.2))
    assert [(job.job_id, job.job_attempt) for job in rolled] == [("job-1", 0)]
    assert uploads(store, s3_bucket) == []
    assert objects(store, s3_bucket) == {}
    assert mc.rollback(dest) == [], "nothing left to roll back"


def test_status_names_an_upload_job(dest: str, s3_bucket: str) -> None:
    from manifest_committer.operate.status import inspect_destination
    from manifest_committer.store.factory import open_destination_store

    with committer(dest) as job:
        job.setup_job()
        write(job.setup_task("task_0", "attempt_0_0"), {"a.csv": b"a"})
        opened = open_destination_store(dest)
        store, root = opened.store, opened.path
        try:
            status = inspect_destination(store, root, FAST, count_data_files=False)
        finally:
            store.close()
        job.abort_job()
    [attempt] = status.jobs[0].attempts
    assert attempt.protocol == "upload"
