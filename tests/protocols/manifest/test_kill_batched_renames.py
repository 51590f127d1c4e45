"""SIGKILL a job commit in the middle of a batch of renames in flight together, then rerun or abort it fresh.

On a store with ``concurrent_calls`` (Azure, GCS) a unit's renames go to the store as one batch, so a crash can
leave any subset of a unit moved, not a prefix. Here local disk plays such a store (``InFlightTogether``): the
child commits with units of five rows and batches of up to four, and dies between two renames of a batch. A fresh
committer then reruns the commit (the destination byte for byte: the job's files and the user's, nothing else,
no job state) or aborts it twice (the destination as before the job).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.store import NO_HINTS, RenameHint, StoreOperations
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.killing import Listing, forkserver, listing

JOB = "job-batched"
CONFIG = mc.CommitterConfig(io_threads=4, save_retry_interval=0, store_retry_interval=0)
TASKS = {
    f"task_{task}": {f"p={n % 2}/part-{task}-{n}.csv": f"{task},{n}\n".encode() * (n + 1) for n in range(6)}
    for task in range(3)
}
USER_FILES = {"p=0/user.csv": b"the user's own file\n"}


class _KillMidBatch(WrappingStore):
    """Renames a batch one by one and SIGKILLs the process right before the ``nth`` rename (from 1) of all."""

    passes_batches = True

    def __init__(self, inner: StoreOperations, nth: int) -> None:
        super().__init__(inner)
        self.nth = nth
        self.renamed = 0
        self._one_at_a_time = threading.Lock()  # units run on the pool: exactly nth - 1 renames before the kill

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        outcomes: list[Exception | None] = []
        for source, dest in pairs:
            with self._one_at_a_time:
                self.renamed += 1
                if self.renamed == self.nth:
                    os.kill(os.getpid(), signal.SIGKILL)
                try:
                    self.inner.rename_file(source, dest)
                except Exception as error:
                    outcomes.append(error)
                else:
                    outcomes.append(None)
        return outcomes


def _batched(nth: int | None) -> Callable[[StoreOperations], StoreOperations]:
    def wrap(inner: StoreOperations) -> StoreOperations:
        return InFlightTogether(inner if nth is None else _KillMidBatch(inner, nth))

    return wrap


def _child(dest: str, nth: int) -> None:
    committer = mc.ManifestCommitter(dest, JOB, config=CONFIG, store_wrapper=_batched(nth))
    committer.commit_job()
    committer.close()


def _prepare(dest: Path) -> Listing:
    for name, data in USER_FILES.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    with mc.ManifestCommitter(str(dest), JOB, config=CONFIG) as committer:
        committer.setup_job()
        for task, files in TASKS.items():
            attempt = committer.setup_task(task, f"attempt_{task}_0")
            for name, data in files.items():
                with attempt.fs.open(f"{attempt.work_path}/{name}", "wb") as stream:
                    stream.write(data)
            committer.commit_task(attempt)
    return listing(dest)


def _expected_output() -> dict[str, bytes]:
    files = dict(USER_FILES)
    for task_files in TASKS.values():
        files.update(task_files)
    return files


def _files(dest: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(dest)): path.read_bytes()
        for path in dest.rglob("*")
        if path.is_file() and path.name != "_SUCCESS" and "_temporary" not in path.parts
    }


@pytest.mark.parametrize("follow_up", ["rerun", "rerun batched", "abort"])
@pytest.mark.parametrize("nth", [2, 7, 14])
def test_a_commit_killed_inside_a_batch_is_finished_by_a_rerun_or_undone_by_an_abort(
    tmp_path: Path, nth: int, follow_up: str
) -> None:
    dest = tmp_path / "dest"
    before = _prepare(dest)
    process = forkserver().Process(target=_child, args=(str(dest), nth), daemon=True)
    process.start()
    process.join(60)
    if process.exitcode is None:
        process.kill()
        raise AssertionError("the commit child did not finish within 60 s")
    assert process.exitcode == -signal.SIGKILL, "the child was not killed inside a batch"
    moved = sum(1 for name in _files(dest) if name not in USER_FILES)
    assert moved == nth - 1, "the batch had moved the renames before the kill"

    wrapper = _batched(None) if follow_up == "rerun batched" else None
    with mc.ManifestCommitter(str(dest), JOB, config=CONFIG, store_wrapper=wrapper) as fresh:
        if follow_up == "abort":
            fresh.abort_job()
            fresh.abort_job()  # a second abort changes nothing
        else:
            success = fresh.commit_job()
            assert success.success
            assert success.filenames, "_SUCCESS lists the committed files"
    if follow_up == "abort":
        assert listing(dest) == before, "the destination is as it was before the job"
    else:
        assert _files(dest) == _expected_output()
        assert not (dest / "_temporary").exists()
