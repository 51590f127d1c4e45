"""The worker processes of a job commit (``store/workers/``): batches made in another process, errors that cross
back judged, a worker that cannot start or dies, and workers that never outlive the committer."""

from __future__ import annotations

import functools
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from manifest_committer.errors import SourceChangedError, WorkerProcessError
from manifest_committer.store import Fault, FaultInjectingStore, RenameHint, open_store, store_bindings
from manifest_committer.store.workers import WorkerDispatchStore, WorkerPool, WorkerSetup, WorkerStoreError
from manifest_committer.store.workers.portable_errors import TRANSIENT, portable
from manifest_committer.store.workers.setup import effective_storage_options
from tests.fixtures.worker_stores import HoldingStore, process_gone, refuse_in_a_worker

WAIT = 60.0
"""Seconds a test waits for a worker to do what it was asked, before it fails (not a speed target)."""


def _pool(destination: str, processes: int = 2, wrapper: Any = None) -> WorkerPool:
    setup = WorkerSetup(destination, {}, store_bindings().binding_for(destination), wrapper, threads=4)
    return WorkerPool(setup, processes, "job-w")


def _files(root: Path, count: int) -> list[tuple[str, str]]:
    (root / "src").mkdir(parents=True)
    (root / "dst").mkdir()
    pairs = []
    for number in range(count):
        (root / "src" / f"f{number}").write_bytes(b"x" * number)
        pairs.append((str(root / "src" / f"f{number}"), str(root / "dst" / f"f{number}")))
    return pairs


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT} s")
        time.sleep(0.01)


def test_a_batch_of_renames_is_made_by_a_worker_with_one_outcome_each(tmp_path: Path) -> None:
    pairs = _files(tmp_path, 6)
    (tmp_path / "dst" / "f2").write_bytes(b"someone else's")
    pairs.append((str(tmp_path / "src" / "missing"), str(tmp_path / "dst" / "missing")))
    pool = _pool(str(tmp_path))
    try:
        store = WorkerDispatchStore(open_store(str(tmp_path)).store, pool)
        outcomes = store.rename_files(pairs, [RenameHint()] * len(pairs))
    finally:
        pool.close()
    assert [type(outcome) for outcome in outcomes] == [type(None)] * 2 + [FileExistsError] + [type(None)] * 3 + [
        FileNotFoundError
    ]
    assert (tmp_path / "dst" / "f5").read_bytes() == b"xxxxx"
    assert not (tmp_path / "src" / "f5").exists()
    assert (tmp_path / "dst" / "f2").read_bytes() == b"someone else's", "never overwritten"
    assert (tmp_path / "src" / "f2").exists()
    assert store.capabilities.concurrent_calls and not store.capabilities.microsecond_calls


def test_an_error_crosses_with_what_the_worker_store_said_of_it() -> None:
    class SdkError(Exception):
        def __init__(self, message: str, response: object) -> None:
            super().__init__(message)
            self.response = response  # what an SDK's error holds: a live response, never picklable

    sdk_error = SdkError("503 ServerBusy", threading.Lock())
    judge = FaultInjectingStore(open_store("memory://x").store)
    judge.is_transient = lambda error: isinstance(error, SdkError | TimeoutError)  # type: ignore[method-assign]
    crossed = pickle.loads(pickle.dumps(portable(sdk_error, judge)))
    assert isinstance(crossed, WorkerStoreError)
    assert "SdkError: 503 ServerBusy" in str(crossed)
    assert getattr(crossed, TRANSIENT) is True

    definite = pickle.loads(pickle.dumps(portable(SourceChangedError("abfs://c@a/x: changed"), judge)))
    assert type(definite) is SourceChangedError and str(definite) == "abfs://c@a/x: changed"
    assert getattr(definite, TRANSIENT) is False
    exists = pickle.loads(pickle.dumps(portable(FileExistsError(17, "exists", "/d/x"), judge)))
    assert type(exists) is FileExistsError and exists.filename == "/d/x"

    dispatch = WorkerDispatchStore(judge, pool=None)  # type: ignore[arg-type]  # no batch is sent
    assert dispatch.is_transient(crossed), "the worker's judgement decides, not the class"
    assert not dispatch.is_transient(definite)
    assert dispatch.is_transient(TimeoutError("a local error is judged here"))


def test_a_worker_that_cannot_open_its_store_fails_the_call_saying_why(tmp_path: Path) -> None:
    pool = _pool(str(tmp_path), 1, functools.partial(refuse_in_a_worker, committer_pid=os.getpid()))
    try:
        with pytest.raises(WorkerProcessError, match=r"could not open the store.*no credentials") as raised:
            pool.call("rename_files", [], [], calls=0)
    finally:
        pool.close()
    assert "job-w" in str(raised.value) and str(tmp_path) in str(raised.value)


def test_a_worker_killed_with_calls_in_flight_fails_them_and_every_later_call(tmp_path: Path) -> None:
    pairs = _files(tmp_path / "data", 3)
    signals = tmp_path / "signals"
    signals.mkdir()
    wrapper = functools.partial(HoldingStore, signals=str(signals), committer_pid=os.getpid())
    pool = _pool(str(tmp_path), 1, wrapper)
    outcome: list[BaseException | list[Any]] = []

    def call() -> None:
        try:
            outcome.append(pool.call("rename_files", pairs, [], calls=len(pairs)))
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        _wait_for(lambda: list(signals.glob("held-*")), "the worker took the batch")
        (held,) = signals.glob("held-*")
        os.kill(int(held.name.removeprefix("held-")), signal.SIGKILL)
        caller.join(WAIT)
        assert not caller.is_alive()
        (error,) = outcome
        assert isinstance(error, WorkerProcessError)
        assert "was killed by SIGKILL with 3 store calls in flight" in str(error)
        assert "run commit_job again to finish it, or abort_job to undo it" in str(error)
        with pytest.raises(WorkerProcessError, match="SIGKILL"):
            pool.call("rename_files", pairs, [], calls=len(pairs))
    finally:
        (signals / "release").write_text("")
        pool.close()
    assert sorted(path.name for path in (tmp_path / "data" / "src").iterdir()) == ["f0", "f1", "f2"]


def test_workers_exit_when_the_committer_process_is_killed(tmp_path: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    pairs = _files(tmp_path / "data", 2)
    program = textwrap.dedent(
        f"""
        import functools, os, sys, threading
        from manifest_committer.store import store_bindings
        from manifest_committer.store.workers import WorkerPool, WorkerSetup
        from tests.fixtures.worker_stores import HoldingStore
        destination = {str(tmp_path)!r}
        wrapper = functools.partial(HoldingStore, signals={str(signals)!r}, committer_pid=os.getpid())
        setup = WorkerSetup(destination, {{}}, store_bindings().binding_for(destination), wrapper, 4)
        pool = WorkerPool(setup, 2, "job-w")
        print(" ".join(map(str, pool.pids)), flush=True)
        pool.call("rename_files", {pairs!r}, [], calls=2)
        """
    )
    committer = subprocess.Popen(
        [sys.executable, "-c", program],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert committer.stdout is not None
    workers = [int(pid) for pid in committer.stdout.readline().split()]
    assert len(workers) == 2
    _wait_for(lambda: list(signals.glob("held-*")), "a worker took the batch")
    committer.kill()
    committer.wait()
    _wait_for(lambda: all(process_gone(pid) for pid in workers), "the workers of a killed committer exited")
    (signals / "release").write_text("")
    assert sorted(path.name for path in (tmp_path / "data" / "src").iterdir()) == ["f0", "f1"], (
        "the batch in flight was abandoned, not made after the committer died"
    )


def test_the_options_a_worker_gets_carry_this_process_fsspec_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec

    monkeypatch.setitem(fsspec.config.conf, "memory", {"skip_instance_cache": False})
    assert effective_storage_options("memory://x/y", {"extra": 1}) == {"skip_instance_cache": False, "extra": 1}
    assert effective_storage_options("nosuchscheme://x", {"a": 1}) == {"a": 1}


def test_a_fault_store_of_the_committer_travels_to_the_worker(tmp_path: Path) -> None:
    """The committer's picklable ``store_wrapper`` is applied in the worker too: a fault there is the worker's."""
    pairs = _files(tmp_path, 2)
    wrapper = functools.partial(FaultInjectingStore, faults=[Fault("rename_file", "f1", when="after")])
    pool = _pool(str(tmp_path), 1, wrapper)
    try:
        outcomes = WorkerDispatchStore(open_store(str(tmp_path)).store, pool).rename_files(pairs)
    finally:
        pool.close()
    assert outcomes[0] is None
    assert isinstance(outcomes[1], TimeoutError) and getattr(outcomes[1], TRANSIENT) is True
    assert (tmp_path / "dst" / "f1").exists(), "the fault came after the rename took effect"
