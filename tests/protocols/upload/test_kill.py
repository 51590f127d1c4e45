"""SIGKILL an ``upload`` job commit or abort on S3 (moto) before a chosen store call, then finish with a fresh one.

The job: three tasks (an empty file and small ones), a second attempt of task 0 that also
committed (same keys, other bytes: Spark's speculative copy), and an attempt of task 1 that wrote and never
committed. A child process runs ``commit_job`` (or ``abort_job``) through a store wrapper that SIGKILLs the
process right before the N-th call of one operation; then a fresh committer in this process reruns the commit or
aborts, and the bucket is compared object by object: after a commit exactly the chosen attempts' bytes, after an
abort nothing of the job (or, once its ``_SUCCESS`` is in place, exactly the committed output) — and in both cases
no incomplete upload and no job state left.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import StoreOperations
from manifest_committer.store.s3 import open_s3_store
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.emulators import Emulator
from tests.fixtures.killing import forkserver

pytestmark = pytest.mark.s3

JOB = "job-kill"
CONFIG = mc.CommitterConfig.from_hadoop_conf(
    {"mapreduce.manifest.committer.markers.type": "direct", "mapreduce.manifest.committer.io.threads": "1"}
)
"""One thread: the calls come in one order, so "before the N-th call" names one state."""
CHOSEN = {"task_0": "attempt_0_0", "task_1": "attempt_1_0", "task_2": "attempt_2_0"}
FILES = {
    "task_0": {"dt=1/empty.csv": b"", "dt=1/a.csv": b"a,b\n1,2\n"},
    "task_1": {"dt=2/b.bin": bytes(range(256)) * 100},
    "task_2": {"c.txt": b"c" * 1000},
}
EXPECTED = {name: data for files in FILES.values() for name, data in files.items()}


class _KillBefore(WrappingStore):
    """SIGKILLs the process right before the ``nth`` call (from 1) of ``operation``."""

    def __init__(self, inner: StoreOperations, operation: str, nth: int) -> None:
        super().__init__(inner)
        self.target = (operation, nth)
        self.seen: dict[str, int] = {}

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        self.seen[operation] = self.seen.get(operation, 0) + 1
        if (operation, self.seen[operation]) == self.target:
            os.kill(os.getpid(), signal.SIGKILL)
        return call()


def _child(url: str, storage_options: dict[str, Any], action: str, operation: str, nth: int) -> None:
    committer = mc.create_committer(
        url,
        JOB,
        "upload",
        config=CONFIG,
        storage_options=storage_options,
        store_wrapper=lambda inner: _KillBefore(inner, operation, nth),
    )
    if action == "commit":
        committer.commit_job(CHOSEN)
    else:
        committer.abort_job()
    committer.close()


def _run_killed(url: str, moto: Emulator, action: str, operation: str, nth: int) -> int | None:
    """Run ``action`` in a child killed before the ``nth`` ``operation``; its exit code (-9 when killed)."""
    process = forkserver().Process(target=_child, args=(url, moto.storage_options, action, operation, nth), daemon=True)
    process.start()
    process.join(120)
    if process.exitcode is None:
        process.kill()
        raise AssertionError(f"the {action} child did not finish within 120 s")
    exit_code: int | None = process.exitcode
    return exit_code


def _write(committer: mc.UploadCommitter, task: str, attempt: str, files: dict[str, bytes]) -> mc.TaskAttempt:
    work = committer.setup_task(task, attempt)
    for name, data in files.items():
        with work.fs.open(f"{work.work_path}/{name}", "wb") as stream:
            stream.write(data)
    return work


def _prepare(url: str, moto: Emulator) -> None:
    """The job of the module docstring, its driver gone (every task done or dead)."""
    with mc.create_committer(url, JOB, "upload", config=CONFIG, storage_options=moto.storage_options) as committer:
        assert isinstance(committer, mc.UploadCommitter)
        committer.setup_job()
        for task, files in FILES.items():
            committer.commit_task(_write(committer, task, CHOSEN[task], files))
        loser = {name: data + b"loser" for name, data in FILES["task_0"].items()}
        committer.commit_task(_write(committer, "task_0", "attempt_0_1", loser))
        _write(committer, "task_1", "attempt_1_1", {"dt=2/b.bin": b"never committed"})


def _bucket_state(url: str, moto: Emulator) -> tuple[dict[str, bytes], list[str], list[str]]:
    """(data objects by destination-relative name, job-state objects, incomplete uploads of the bucket)."""
    store, root = open_s3_store(url, moto.storage_options)
    fs = moto.filesystem()
    objects = {path[len(root) + 1 :]: fs.cat_file(path) for path in fs.find(root)}
    data = {name: content for name, content in objects.items() if not name.startswith("_")}
    state = sorted(name for name in objects if name.startswith("_temporary"))
    bucket = root.split("/", 1)[0]
    return data, state, [upload.path for upload in store.list_uploads(f"{bucket}/")]


def _committed(url: str, moto: Emulator) -> bool:
    """Whether this job's ``_SUCCESS`` is in place (the commit point)."""
    fs = moto.filesystem()
    path = f"{url.removeprefix('s3://')}/_SUCCESS"
    return fs.exists(path) and mc.SuccessData.from_json(fs.cat_file(path)).job_id == JOB


COMMIT_KILL_POINTS = [
    ("write_bytes", 1),  # commit-started
    ("complete_upload", 2),  # one upload completed: a partial commit
    ("write_bytes", 2),  # _SUCCESS
    ("list_uploads", 1),  # after the commit point: cleanup, the other attempts' uploads
    ("delete_dir", 1),  # cleanup: the job's state
]


@pytest.mark.parametrize("follow_up", ["rerun", "abort"])
@pytest.mark.parametrize(("operation", "nth"), COMMIT_KILL_POINTS, ids=[f"{o}-{n}" for o, n in COMMIT_KILL_POINTS])
def test_a_commit_killed_before_a_call_is_finished_by_a_rerun_or_undone_by_an_abort(
    moto_s3: Emulator, s3_bucket: str, operation: str, nth: int, follow_up: str
) -> None:
    url = f"s3://{s3_bucket}/out"
    _prepare(url, moto_s3)
    assert _run_killed(url, moto_s3, "commit", operation, nth) == -signal.SIGKILL
    committed = _committed(url, moto_s3)
    with mc.create_committer(url, JOB, "upload", config=CONFIG, storage_options=moto_s3.storage_options) as fresh:
        if follow_up == "rerun":
            success = fresh.commit_job(CHOSEN)
            assert success.success and success.committer == "upload"
        else:
            fresh.abort_job()
            fresh.abort_job()  # a second abort does nothing and succeeds
    data, state, uploads = _bucket_state(url, moto_s3)
    assert data == (EXPECTED if follow_up == "rerun" or committed else {}), f"killed before {operation} #{nth}"
    assert (state, uploads) == ([], [])


ABORT_KILL_POINTS = [("abort_upload", 1), ("delete_dir", 1)]


@pytest.mark.parametrize(("operation", "nth"), ABORT_KILL_POINTS, ids=[f"{o}-{n}" for o, n in ABORT_KILL_POINTS])
def test_an_abort_killed_after_a_partial_commit_is_finished_by_a_fresh_abort(
    moto_s3: Emulator, s3_bucket: str, operation: str, nth: int
) -> None:
    """The commit dies after completing two uploads; the abort that follows dies too (after deleting them, in the
    middle of aborting the rest, or in its cleanup); a third process aborts."""
    url = f"s3://{s3_bucket}/out"
    _prepare(url, moto_s3)
    assert _run_killed(url, moto_s3, "commit", "complete_upload", 3) == -signal.SIGKILL
    assert len(_bucket_state(url, moto_s3)[0]) == 2  # two objects of the job are visible: a partial commit
    assert _run_killed(url, moto_s3, "abort", operation, nth) == -signal.SIGKILL
    with mc.create_committer(url, JOB, "upload", config=CONFIG, storage_options=moto_s3.storage_options) as fresh:
        fresh.abort_job()
    assert _bucket_state(url, moto_s3) == ({}, [], [])
