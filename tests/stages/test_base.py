"""The stage base: the one gate every store call of a stage passes (timing, one retry policy, names in logs)."""

from __future__ import annotations

import ast
import logging
import threading
from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.config import CommitterConfig, MarkerType
from manifest_committer.stages.manifest.setup_task import SetupTaskArguments, SetupTaskStage
from manifest_committer.stages.save_task_manifest import SaveTaskManifestArguments, SaveTaskManifestStage
from manifest_committer.statistic_names import OP_GET_FILE_STATUS, STORE_IO_RETRY
from manifest_committer.store import Fault, FaultInjectingStore
from tests.fixtures.batching_store import InFlightTogether
from tests.fixtures.stage_context import (
    FAST_CONFIG,
    commit_task,
    fresh,
    make_context,
    set_up_job,
    task_ids,
)

STAGES = Path(__file__).resolve().parents[2] / "stages"


OTHER_STORES = {("manifest/commit_job.py", "_keep_manifests")}
"""Functions of a stage that reach a store other than the job's: the copy of the manifests to a diagnostics
directory of the user's choosing, each call timed and retried through the stage's ``call``."""


def test_no_stage_but_the_base_touches_the_store() -> None:
    """Stages hold no store (docs/architecture.md); a call past the base would escape timing, retries and statistics."""
    offenders = []
    modules = sorted(STAGES.rglob("*.py"))
    assert STAGES / "manifest" / "rename_files.py" in modules, "every protocol's folder is searched"
    for module in modules:
        if module == STAGES / "base.py":
            continue
        name = str(module.relative_to(STAGES))
        tree = ast.parse(module.read_text())
        exempt = {
            id(inner)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef) and (name, function.name) in OTHER_STORES
            for inner in ast.walk(function)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("store", "_store") and id(node) not in exempt:
                offenders.append(f"{name}:{node.lineno} .{node.attr}")
    assert offenders == []
    for name, function in OTHER_STORES:
        assert f"def {function}(" in (STAGES / name).read_text(), f"{name} still has {function}"


def test_a_failing_manifest_save_is_tried_save_attempts_times_not_their_product(destination: str) -> None:
    config = CommitterConfig(
        manifest_save_attempts=3, store_retry_attempts=5, save_retry_interval=0.0, store_retry_interval=0.0
    )
    context = make_context(destination, config=config)
    set_up_job(context)
    manifest = commit_task(context, 0, {"a.csv": b"a"})
    store = FaultInjectingStore(context.store, [Fault("write_bytes", "manifest.json.tmp", times=None)])
    with pytest.raises(TimeoutError):
        SaveTaskManifestStage(fresh(context, store=store)).apply(SaveTaskManifestArguments(lambda: manifest))
    assert store.injected["write_bytes"] == 3, "one policy per call: 3 save attempts, not 3 x 5"


@pytest.mark.parametrize("error", [PermissionError, IsADirectoryError, FileNotFoundError])
def test_a_definite_answer_fails_the_save_at_once(destination: str, error: type[OSError]) -> None:
    context = make_context(destination)
    set_up_job(context)
    manifest = commit_task(context, 0, {"a.csv": b"a"})
    store = FaultInjectingStore(
        context.store, [Fault("write_bytes", "manifest.json.tmp", times=None, error=lambda: error("refused"))]
    )
    with pytest.raises(error):
        SaveTaskManifestStage(fresh(context, store=store)).apply(SaveTaskManifestArguments(lambda: manifest))
    assert store.injected["write_bytes"] == 1


def test_a_retry_warning_names_the_operation_and_path_even_for_a_silent_error(
    destination: str, caplog: pytest.LogCaptureFixture
) -> None:
    context = make_context(destination, config=FAST_CONFIG)
    set_up_job(context)
    store = FaultInjectingStore(context.store, [Fault("info", "manifests", error=TimeoutError)])
    stage_context = fresh(context, store=store)
    with caplog.at_level(logging.WARNING, logger="manifest_committer.retry"):
        SetupTaskStage(stage_context).apply(SetupTaskArguments(*task_ids(1)))
    warning = next(record.getMessage() for record in caplog.records if "retrying" in record.getMessage())
    assert OP_GET_FILE_STATUS in warning
    assert context.paths.manifest_dir in warning
    assert "TimeoutError" in warning
    counters = stage_context.stats.snapshot().counters
    assert counters[STORE_IO_RETRY] == 1
    assert counters[OP_GET_FILE_STATUS] >= 2


def test_the_upload_store_is_decided_once_per_store_and_again_when_the_store_changes(destination: str) -> None:
    """``UploadStore`` is a runtime-checkable protocol: ``isinstance`` probes each method, 100 us and more a call,
    so the context decides once per store object; a test (or wrapper) that swaps the store is seen."""
    context = make_context(destination)
    assert context.upload_store is None
    probes: list[str] = []

    class Uploads(FaultInjectingStore):
        def __getattribute__(self, name: str) -> object:
            if name in ("put_if_absent", "complete_upload", "holds", "abort_upload", "list_uploads"):
                probes.append(name)
                return lambda *args: None
            return super().__getattribute__(name)

    context.store = Uploads(context.store)
    for _ in range(3):
        assert context.upload_store is context.store
    assert len(probes) <= 5, "isinstance ran once, not on every call"
    with pytest.raises(mc.UnsupportedStoreError, match="S3 only"):
        SetupTaskStage(make_context(destination)).put_if_absent(f"{destination}/x", b"")


def test_a_gate_call_inside_another_never_waits_for_its_own_slot(tmp_path: Path) -> None:
    """With ``call_slots`` (a store that takes batches) and one slot, a gate call made inside another (the
    transactional abort times each delete of a destination file under a statistic of its own) used to wait for
    the slot its caller held, for ever."""
    committer = mc.create_committer(
        str(tmp_path),
        "job-nested",
        "transactional",
        config=CommitterConfig(
            io_threads=1, markers_type=MarkerType.DIRECT, save_retry_interval=0, store_retry_interval=0
        ),
        store_wrapper=InFlightTogether,
    )
    committer.setup_job()
    task = committer.setup_task("task_0", "attempt_0_0")
    with task.fs.open(task.work_path + "/a.csv", "wb") as stream:
        stream.write(b"a")
    committer.commit_task(task)
    aborted = threading.Thread(target=committer.abort_job, daemon=True)
    aborted.start()
    aborted.join(60)
    assert not aborted.is_alive(), "the abort hung on a call nested in another"
    assert [path.name for path in tmp_path.iterdir() if not path.name.startswith("_")] == []
    committer.close()
