"""TransactionalCommitJob's CPU per file and store latency: the admission at once, the markers read at once.

The protocol's behaviour (what readers see, crashes, crafted documents) is tested end to end in
tests/protocols/transactional/test_committer.py and tests/test_bad_input.py; these tests pin what keeps the job commit's
CPU and latency per file down, and that the faster routes decide exactly as the entry-by-entry ones.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

import pytest

import manifest_committer as mc
from manifest_committer.errors import ManifestError
from manifest_committer.manifest import FileEntry, TaskManifest
from manifest_committer.markers import Marker
from manifest_committer.paths import JobPaths
from manifest_committer.protocols.transactional import records as transactions
from manifest_committer.protocols.transactional.committer import TransactionalCommitter
from manifest_committer.protocols.transactional.records import (
    TID_SEPARATOR,
    TransactionPaths,
    attempt_tag,
    transaction_id,
)
from manifest_committer.stages.transactional.commit_job import TransactionalCommitJobStage
from manifest_committer.store import StoreOperations, open_store
from tests.fixtures.stage_context import FAST_CONFIG, make_context
from tests.fixtures.stores import clear_memory_filesystem
from tests.fixtures.together import MeetInFlight
from tests.stages.test_marker_reads import SlowBatchReads

DEST = "memory://transactional-job/table"
ATTEMPT = "attempt_0001_m_000000_0"


@pytest.fixture(autouse=True)
def _clean_memory() -> Iterator[None]:
    clear_memory_filesystem()
    yield
    clear_memory_filesystem()


def _job(wrapper: list[SlowBatchReads]) -> TransactionalCommitter:
    def wrap(inner: StoreOperations) -> StoreOperations:
        wrapper.append(SlowBatchReads(inner))
        return wrapper[-1]

    config = mc.CommitterConfig(store_retry_interval=0, save_retry_interval=0, io_threads=8)
    committer = mc.create_committer(DEST, "job-1", "transactional", config=config, store_wrapper=wrap)
    assert isinstance(committer, TransactionalCommitter)
    committer.setup_job()
    return committer


def _commit_tasks(committer: TransactionalCommitter, tasks: int, files: int) -> None:
    for index in range(tasks):
        task = committer.setup_task(f"task_{index:05d}", f"attempt_{index:05d}_0")
        for n in range(files):
            with task.fs.open(f"{task.work_path}/dt={n % 3}/part-{n:04d}.csv", "wb") as file:
                file.write(b"a\n")
        committer.commit_task(task)


def test_the_job_commit_reads_the_marker_files_at_once_and_deletes_what_they_name_beyond_the_commit() -> None:
    """Stragglers named in several ``MARKERS<i>`` files (a failed attempt's): read in one round, deleted."""
    wrapper: list[SlowBatchReads] = []
    with _job(wrapper) as committer:
        _commit_tasks(committer, 2, 3)
        opened = open_store(DEST)
        store, dest = opened.store, opened.path
        job = JobPaths(dest, "job-1", 0)
        transaction = TransactionPaths(job)
        stragglers = []
        for index in range(6):
            name = f"dt=9/part-{index}{TID_SEPARATOR}{transaction.tid}-{attempt_tag('attempt_failed_0')}.csv"
            store.write_bytes(transaction.data_path(name), b"x")
            store.write_bytes(transaction.markers.batched_file(40 + index), f"{Marker(name).name}\n".encode())
            stragglers.append(transaction.data_path(name))

        success = committer.commit_job()

    assert len(success.filenames) == 6
    assert wrapper[0].peak > 1, "the MARKERS files were read one after another"
    assert all(store.info(path) is None for path in stragglers)
    assert mc.committed_files(DEST) == sorted(success.filenames)


def test_the_job_commit_begins_with_one_round_trip() -> None:
    """Whether the job committed (its ``_committed_<tid>``), began committing, and which manifests it has (none
    listed: never set up): three calls that wait for nothing, in flight together."""
    with _job([]) as committer:
        _commit_tasks(committer, 2, 3)
        paths = committer.paths
    expected = [
        ("info", TransactionPaths(paths).committed),
        ("read_bytes", paths.commit_started_path),
        ("list_dir", paths.manifest_dir.rstrip("/")),
    ]
    meeting: list[MeetInFlight] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        meeting.append(MeetInFlight(inner, expected))
        return meeting[-1]

    config = mc.CommitterConfig(store_retry_interval=0, save_retry_interval=0, io_threads=8)
    with mc.create_committer(DEST, "job-1", "transactional", config=config, store_wrapper=wrap) as fresh:
        success = fresh.commit_job()
    assert sorted(meeting[-1].met) == sorted(expected)
    assert len(success.filenames) == 6


def test_the_transaction_id_is_hashed_once_a_manifest_not_once_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """``TransactionPaths.tid`` hashes the job id: the commit asked for it twice a file (admission, markers)."""
    with _job([]) as committer:
        _commit_tasks(committer, 3, 20)
        hashed: list[str] = []

        def counted(job_id: str) -> str:
            hashed.append(job_id)
            return transaction_id(job_id)

        monkeypatch.setattr(transactions, "transaction_id", counted)
        assert len(committer.commit_job().filenames) == 60

    assert len(hashed) < 20, len(hashed)


def _stage() -> TransactionalCommitJobStage:
    return TransactionalCommitJobStage(make_context(DEST, job_id="job-1", config=FAST_CONFIG))


def _manifest(
    stage: TransactionalCommitJobStage, relatives: list[str], sources: list[str] | None = None
) -> TaskManifest:
    dests = [stage.to_url(posixpath.join(stage.paths.dest, relative)) for relative in relatives]
    entries = [FileEntry(source, dest, 1) for source, dest in zip(sources or dests, dests, strict=True)]
    return TaskManifest("job-1", 0, "task_0001_m_000000", ATTEMPT, "", files=entries)


def _entry_by_entry(stage: TransactionalCommitJobStage, manifest: TaskManifest, tid: str, tag: str) -> list[str] | str:
    try:
        return [stage._admit("M", entry.source, entry.dest, tid, tag) for entry in manifest.files]
    except ManifestError as error:
        return str(error)


GOOD = "dt=1/part-0{sep}{tid}-{tag}.csv"
ODD_NAMES = [
    GOOD,
    "part-0{sep}{tid}-{tag}",
    "part-0{sep}{tid}-{tag}.csv.gz",
    "dt=é 1/part-0{sep}{tid}-{tag}.csv",
    "part.0{sep}{tid}-{tag}.csv",
    "_part-0{sep}{tid}-{tag}.csv",
    ".part-0{sep}{tid}-{tag}.csv",
    "part-0{sep}{tid}-{tag}x.csv",
    "part-0{sep}{tid}1-{tag}.csv",
    "part-0{sep}{tid}-{other}.csv",
    "part-0{sep}{tid}-{tag}{sep}{tid}-{tag}.csv",
    "part-0{sep}1-{tag}.csv",
    "dt=1/../part-0{sep}{tid}-{tag}.csv",
    "dt=1//part-0{sep}{tid}-{tag}.csv",
    "_temporary/part-0{sep}{tid}-{tag}.csv",
    "dt=1/part 100%{sep}{tid}-{tag}.csv",
]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_manifest_admitted_at_once_is_admitted_exactly_as_entry_by_entry(name: str) -> None:
    stage = _stage()
    tid, tag = transaction_id("job-1"), attempt_tag(ATTEMPT)
    relative = name.format(sep=TID_SEPARATOR, tid=tid, tag=tag, other=attempt_tag("attempt_other_0"))
    relatives = [GOOD.format(sep=TID_SEPARATOR, tid=tid, tag=tag).replace("part-0", "part-1"), relative]
    manifest = _manifest(stage, relatives)

    at_once = stage._admit_at_once(manifest, tid, tag)

    expected = _entry_by_entry(stage, manifest, tid, tag)
    if at_once is None:
        assert name != GOOD, "the common manifest takes the route at once"
    else:
        assert at_once == expected


def test_a_source_that_differs_from_its_destination_is_left_to_the_entry_by_entry_route() -> None:
    stage = _stage()
    tid, tag = transaction_id("job-1"), attempt_tag(ATTEMPT)
    relative = GOOD.format(sep=TID_SEPARATOR, tid=tid, tag=tag)
    manifest = _manifest(stage, [relative], [stage.to_url(f"{stage.paths.dest}/elsewhere.csv")])

    assert stage._admit_at_once(manifest, tid, tag) is None
    assert "differs from destination" in str(_entry_by_entry(stage, manifest, tid, tag))


def test_a_job_never_set_up_is_refused_before_anything_changes() -> None:
    with mc.create_committer(DEST, "job-never", "transactional") as committer:
        with pytest.raises(mc.JobStateError, match="manifests: job job-never was never set up, or was aborted"):
            committer.commit_job()
        assert committer.store.info(committer.paths.dest) is None
