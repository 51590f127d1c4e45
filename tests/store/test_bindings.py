"""Store bindings: a user's own fsspec filesystem, bound at run time or through an entry point, commits whole jobs
with the committer's promises; unbound schemes and clashing bindings are refused, saying what to do."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.statistic_names import COMMIT_FILE_RENAME_RECOVERED, STORE_IO_RETRY
from manifest_committer.store import (
    ENTRY_POINT_GROUP,
    DeclaredFsspecStore,
    OpenedStore,
    StoreBindings,
    open_destination_store,
    open_store,
)
from manifest_committer.store.azure import AzureBlobStore
from manifest_committer.store.gcs import GCSStore
from manifest_committer.store.local import LocalStore
from manifest_committer.store.memory import MEMORY_BINDING, MemoryStore
from manifest_committer.store.registry import BUILT_IN_STORES
from manifest_committer.store.s3 import S3Store
from tests.fixtures.committing import FAST, run_task
from tests.fixtures.faulty_filesystem import (
    FAULTY_BINDING,
    FAULTY_CAPABILITIES,
    FaultyFileSystem,
    FilesystemFault,
)

REPO = Path(__file__).resolve().parents[2]
DEST = "faulty://bucket/table"
ROOT = "/bucket/table"
TASKS = {f"task_{n:05d}": {f"dt=2026-11-2{n}/part-{n:04d}.csv": f"row {n}\n".encode()} for n in range(3)}
"""Three tasks, one file each, in partition directories."""
EXPECTED = {path: data for files in TASKS.values() for path, data in files.items()}


def run_job(committer: mc.Committer) -> mc.SuccessData:
    committer.setup_job()
    for task_id, files in TASKS.items():
        run_task(committer, task_id, f"attempt_{task_id[5:]}_0", files)  # type: ignore[arg-type]
    return committer.commit_job()


def published(filesystem: type[FaultyFileSystem]) -> dict[str, bytes]:
    """The files in the destination (``_temporary`` left out), by relative path."""
    fs = filesystem()
    found: dict[str, bytes] = {}
    for path in fs.find(ROOT):
        relative = path[len(ROOT) + 1 :]
        if not relative.startswith("_temporary/"):
            found[relative] = fs.cat_file(path)
    return found


# --- a user's filesystem, bound at run time, commits whole jobs -------------------------------------------------------


def test_a_registered_filesystem_commits_a_whole_job(faulty_filesystem: type[FaultyFileSystem]) -> None:
    committer = mc.create_committer(DEST, "job-1", config=FAST)  # auto: the store renames safely, so manifest
    assert committer.protocol == "manifest"
    assert type(committer.store) is DeclaredFsspecStore
    assert committer.store.capabilities == FAULTY_CAPABILITIES

    summary = run_job(committer)

    assert summary.success
    assert summary.filenames == sorted(f"faulty://{ROOT}/{path}" for path in EXPECTED)
    files = published(faulty_filesystem)
    assert json.loads(files.pop("_SUCCESS"))["jobId"] == "job-1"
    assert files == EXPECTED


def test_a_fresh_committer_of_the_same_url_commits_a_task(faulty_filesystem: type[FaultyFileSystem]) -> None:
    """As another process would: the binding is found again from the URL alone."""
    driver = mc.create_committer(DEST, "job-1", "manifest", config=FAST)
    driver.setup_job()
    worker = mc.create_committer(DEST, "job-1", "manifest", config=FAST)
    run_task(worker, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    assert driver.commit_job().filenames == [f"faulty://{ROOT}/a.csv"]


def test_the_store_maps_its_urls_both_ways(faulty_filesystem: type[FaultyFileSystem]) -> None:
    opened = open_store(DEST)
    store, root = opened.store, opened.path
    assert root == ROOT
    assert store.to_url(f"{root}/a b.csv") == "faulty:///bucket/table/a%20b.csv"
    assert store.from_url("faulty:///bucket/table/a%20b.csv") == f"{root}/a b.csv"
    assert store.from_url("faulty://bucket/table/a.csv") == f"{root}/a.csv"
    with pytest.raises(ValueError, match="not a URL of the faulty:// store"):
        store.from_url("memory://bucket/table/a.csv")


def test_transient_faults_are_retried_by_the_committers_policy(faulty_filesystem: type[FaultyFileSystem]) -> None:
    fault = FilesystemFault("mv", "part-0001.csv", lambda: ConnectionError("connection reset"), times=2)
    faulty_filesystem.faults.append(fault)

    summary = run_job(mc.create_committer(DEST, "job-1", config=FAST))

    assert fault.hits == 2
    assert summary.iostatistics.counters[STORE_IO_RETRY] >= 2
    published_files = published(faulty_filesystem)
    del published_files["_SUCCESS"]
    assert published_files == EXPECTED


def test_a_rename_whose_answer_was_lost_is_recovered_once(faulty_filesystem: type[FaultyFileSystem]) -> None:
    """The rename took effect, then the call failed: the retry finds the file moved, and it is committed once."""
    fault = FilesystemFault("mv", "part-0002.csv", lambda: TimeoutError("answer lost"), after=True)
    faulty_filesystem.faults.append(fault)

    summary = run_job(mc.create_committer(DEST, "job-1", config=FAST))

    assert fault.hits == 1
    assert summary.iostatistics.counters[COMMIT_FILE_RENAME_RECOVERED] == 1
    published_files = published(faulty_filesystem)
    del published_files["_SUCCESS"]
    assert published_files == EXPECTED


def _fail_one_rename_for_good(filesystem: type[FaultyFileSystem]) -> FilesystemFault:
    fault = FilesystemFault("mv", "part-0002.csv", lambda: PermissionError("denied"), times=None)
    filesystem.faults.append(fault)
    return fault


def test_a_failed_job_commit_is_undone_by_abort(faulty_filesystem: type[FaultyFileSystem]) -> None:
    fs = faulty_filesystem()
    fs.pipe_file(f"{ROOT}/before.csv", b"kept")
    before = published(faulty_filesystem)
    fault = _fail_one_rename_for_good(faulty_filesystem)
    committer = mc.create_committer(DEST, "job-1", config=FAST)

    with pytest.raises(PermissionError):
        run_job(committer)

    assert fault.hits >= 1
    assert "_SUCCESS" not in published(faulty_filesystem)
    committer.abort_job()
    assert published(faulty_filesystem) == before


def test_a_rerun_finishes_a_failed_job_commit(faulty_filesystem: type[FaultyFileSystem]) -> None:
    _fail_one_rename_for_good(faulty_filesystem)
    with pytest.raises(PermissionError):
        run_job(mc.create_committer(DEST, "job-1", config=FAST))
    assert "_SUCCESS" not in published(faulty_filesystem)
    faulty_filesystem.faults.clear()

    summary = mc.create_committer(DEST, "job-1", config=FAST).commit_job()  # a fresh committer, as after a crash

    assert summary.success
    published_files = published(faulty_filesystem)
    del published_files["_SUCCESS"]
    assert published_files == EXPECTED


# --- what a binding declares -----------------------------------------------------------------------------------------


def test_a_store_without_the_rename_guarantees_is_refused_for_renames_and_opened_for_the_tools(
    store_bindings: StoreBindings,
) -> None:
    lax = mc.fsspec_store_binding(
        FaultyFileSystem,
        mc.StoreCapabilities(atomic_rename=False, etags_preserved_in_rename=False, real_directories=False),
        schemes=("lax",),
    )
    mc.register_store_binding(lax)

    with pytest.raises(mc.UnsupportedStoreError) as raised:
        mc.create_committer("lax://bucket/table", "job-1")
    message = str(raised.value)
    assert "lax://bucket/table" in message
    assert "store binding 'lax' does not declare" in message
    assert "a rename that never overwrites (rename_never_overwrites)" in message
    assert "says whether it happened (rename_outcome_known)" in message
    opened = open_destination_store("lax://bucket/table")  # status and rollback still read it
    store, root = opened.store, opened.path
    assert root == ROOT
    assert not store.capabilities.rename_never_overwrites


def test_the_upload_protocol_needs_a_binding_with_pending_uploads(faulty_filesystem: type[FaultyFileSystem]) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match=r"needs S3 .* the faulty store has none"):
        mc.create_committer(DEST, "job-1", "upload")


@pytest.mark.parametrize(
    ("url", "reason"), [("s3n://b/t", "Hadoop 3 removed"), ("hdfs://nn/t", "HDFS is not supported")]
)
def test_the_upload_protocol_on_a_refused_store_gives_the_stores_reason(url: str, reason: str) -> None:
    with pytest.raises(mc.UnsupportedStoreError, match=reason):
        mc.create_committer(url, "job-1", "upload")


def test_a_missing_backend_names_what_installs_it(store_bindings: StoreBindings) -> None:
    binding = mc.fsspec_store_binding(
        FaultyFileSystem,
        FAULTY_CAPABILITIES,
        schemes=("remote",),
        backend_module="no_such_backend_module",
        backend_requirement="remote-filesystem>=1.2",
    )
    mc.register_store_binding(binding)
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        open_store("remote://bucket/out")
    assert str(raised.value) == (
        "remote://bucket/out: the remote store needs no_such_backend_module, which is not installed: "
        "pip install 'remote-filesystem>=1.2'"
    )


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"schemes": ()}, "serves no URL scheme"),
        ({"schemes": ("Faulty",)}, "'Faulty' is not a URL scheme"),
        ({"schemes": ("faulty://",)}, "is not a URL scheme"),
        ({"capabilities": None}, "declares no capabilities"),
        ({"opener": None}, "neither an opener nor a refusal"),
        ({"opener": "open"}, "its opener 'open' is not a function"),
        ({"name": ""}, "needs a name"),
        ({"backend_module": None, "backend_requirement": "x"}, "no backend module"),
    ],
)
def test_an_invalid_binding_is_refused_naming_it(fields: dict[str, object], complaint: str) -> None:
    arguments: dict[str, object] = {
        "name": "mine",
        "schemes": ("mine",),
        "opener": FAULTY_BINDING.opener,
        "capabilities": FAULTY_CAPABILITIES,
        **fields,
    }
    with pytest.raises(mc.ConfigError, match=complaint):
        mc.StoreBinding(**arguments)  # type: ignore[arg-type]


def _open_faulty_by_hand(url: str, storage_options: dict[str, Any]) -> OpenedStore[DeclaredFsspecStore]:
    """A user's opener written without ``fsspec_store_binding``: the store, and the URL's path in it."""
    fs = FaultyFileSystem(**storage_options)
    path = str(fs._strip_protocol(url.removeprefix("byhand://"))).rstrip("/")
    return OpenedStore(DeclaredFsspecStore(fs, "byhand", FAULTY_CAPABILITIES), path)


def test_a_binding_built_by_hand_opens_through_its_opener_and_commits(
    faulty_filesystem: type[FaultyFileSystem],
) -> None:
    mc.register_store_binding(
        mc.StoreBinding(
            name="byhand", schemes=("byhand",), opener=_open_faulty_by_hand, capabilities=FAULTY_CAPABILITIES
        )
    )
    opened = open_store("byhand://bucket/table/")
    assert isinstance(opened, mc.OpenedStore)
    assert type(opened.store) is DeclaredFsspecStore
    assert opened.path == ROOT

    summary = run_job(mc.create_committer("byhand://bucket/table", "job-1", config=FAST))

    assert summary.success
    files = published(faulty_filesystem)
    del files["_SUCCESS"]
    assert files == EXPECTED


def _returns(value: object) -> Callable[[str, dict[str, Any]], Any]:
    def open_wrongly(url: str, storage_options: dict[str, Any]) -> Any:
        return value

    return open_wrongly


@pytest.mark.parametrize(
    ("returned", "kind"),
    [
        (lambda store, path: (store, path), "tuple"),
        (lambda store, path: store, "DeclaredFsspecStore"),
        (lambda store, path: None, "NoneType"),
    ],
    ids=["a (store, path) tuple", "the store alone", "nothing"],
)
def test_an_opener_returning_anything_but_an_opened_store_is_refused_naming_it(
    returned: Callable[[object, str], object], kind: str, store_bindings: StoreBindings
) -> None:
    right = _open_faulty_by_hand("byhand://bucket/table", {})
    opener = _returns(returned(right.store, right.path))
    mc.register_store_binding(
        mc.StoreBinding(name="byhand", schemes=("byhand",), opener=opener, capabilities=FAULTY_CAPABILITIES)
    )

    with pytest.raises(mc.ConfigError) as raised:
        mc.create_committer("byhand://bucket/table", "job-1")

    assert str(raised.value) == (
        f"byhand://bucket/table: store binding 'byhand': its opener {__name__}._returns.<locals>.open_wrongly "
        f"returned a {kind}, not an OpenedStore: return manifest_committer.OpenedStore(store, path), the store "
        "and the URL's path in it (docs/stores.md)"
    )
    with pytest.raises(mc.ConfigError, match=r"its opener .* returned a"):
        open_destination_store("byhand://bucket/table")  # status and rollback say the same


def test_an_opened_store_is_one_class_exported_beside_the_binding() -> None:
    assert mc.OpenedStore is OpenedStore
    opened = OpenedStore(MemoryStore(None), "/x")
    with pytest.raises(AttributeError):
        opened.path = "/y"  # type: ignore[misc]


# --- the registry -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["nosuchscheme://bucket/out", "sftp://host/out"])
def test_an_unbound_scheme_is_refused_saying_what_a_binding_provides(url: str, store_bindings: StoreBindings) -> None:
    mc.register_store_binding(FAULTY_BINDING)
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        mc.create_committer(url, "job-1")
    message = str(raised.value)
    scheme = url.split(":", maxsplit=1)[0]
    assert f"{url}: " in message
    assert f"{scheme}://" in message
    for needed in ("rename_never_overwrites", "rename_outcome_known", "real_directories", "etags_preserved_in_rename"):
        assert needed in message
    assert "manifest_committer.register_store_binding" in message
    assert ENTRY_POINT_GROUP in message
    assert "Registered: local (file://, local://, plain paths), memory (memory://)" in message
    assert "faulty (faulty://)" in message
    assert "hdfs" not in message.split("Registered:")[1], "refused stores are not offered"


def test_a_binding_for_a_built_in_scheme_is_refused_unless_it_replaces(
    store_bindings: StoreBindings, caplog: pytest.LogCaptureFixture
) -> None:
    impostor = mc.fsspec_store_binding(FaultyFileSystem, FAULTY_CAPABILITIES, name="impostor", schemes=("memory",))
    with pytest.raises(mc.ConfigError) as raised:
        mc.register_store_binding(impostor)
    message = str(raised.value)
    assert "'impostor' (registered at run time)" in message
    assert "memory:// by 'memory' (built in, manifest_committer.store.memory:MEMORY_BINDING)" in message
    assert "replace=True" in message
    assert type(open_store("memory://bucket/out").store) is MemoryStore

    caplog.set_level(logging.INFO, logger="manifest_committer.store.registry")
    mc.register_store_binding(impostor, replace=True)
    assert type(open_store("memory://bucket/out").store) is DeclaredFsspecStore
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        (
            "WARNING",
            "Store binding 'impostor' (registered at run time) replaces 'memory' (built in, "
            "manifest_committer.store.memory:MEMORY_BINDING) for memory://",
        )
    ]


def test_registering_the_same_binding_again_changes_nothing_and_another_is_refused(
    store_bindings: StoreBindings,
) -> None:
    mc.register_store_binding(FAULTY_BINDING)
    mc.register_store_binding(FAULTY_BINDING)
    other = mc.fsspec_store_binding(FaultyFileSystem, FAULTY_CAPABILITIES, name="other")
    with pytest.raises(mc.ConfigError, match=r"faulty:// by 'faulty' \(registered at run time\)"):
        mc.register_store_binding(other)
    assert store_bindings.find(DEST) is FAULTY_BINDING
    with pytest.raises(mc.ConfigError, match="is not a StoreBinding"):
        mc.register_store_binding("faulty")  # type: ignore[arg-type]


def _entry_points(*pairs: tuple[str, str]) -> list[EntryPoint]:
    return [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in pairs]


def test_entry_points_are_loaded_once_whatever_the_threads() -> None:
    calls: list[int] = []

    def discover() -> Iterable[EntryPoint]:
        calls.append(1)
        return _entry_points(("faulty", "tests.fixtures.faulty_filesystem:FAULTY_BINDING"))

    bindings = StoreBindings(discover=discover)
    barrier = threading.Barrier(8)
    found: list[mc.StoreBinding | None] = []

    def look_up() -> None:
        barrier.wait()
        found.append(bindings.find(DEST))

    threads = [threading.Thread(target=look_up) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1]
    assert found == [FAULTY_BINDING] * 8


def test_an_entry_point_may_name_a_function_that_makes_the_binding() -> None:
    bindings = StoreBindings(
        discover=lambda: _entry_points(("made", "tests.fixtures.faulty_filesystem:make_faulty_binding"))
    )
    binding = bindings.find("faultier://bucket/out")
    assert binding is not None and binding.name == "faultier"
    assert bindings.failures == []


def test_a_broken_entry_point_is_named_and_stops_no_other_store() -> None:
    bindings = StoreBindings(
        discover=lambda: _entry_points(
            ("gone", "no_such_plugin_module:BINDING"), ("wrong", "tests.fixtures.faulty_filesystem:SCHEME")
        )
    )
    assert bindings.binding_for("memory://x").name == "memory"
    failures = bindings.failures
    assert len(failures) == 2
    assert failures[0].startswith("entry point gone = no_such_plugin_module:BINDING (ModuleNotFoundError")
    assert "it gives a str, not a StoreBinding" in failures[1]
    with pytest.raises(mc.UnsupportedStoreError, match="Store bindings that failed to load: entry point gone"):
        bindings.binding_for("plugin://x")


def test_two_entry_points_for_one_scheme_leave_it_refused_until_one_is_chosen() -> None:
    bindings = StoreBindings(
        discover=lambda: _entry_points(
            ("faulty", "tests.fixtures.faulty_filesystem:FAULTY_BINDING"),
            ("rival", "tests.fixtures.faulty_filesystem:FAULTY_RIVAL"),
        )
    )
    with pytest.raises(mc.UnsupportedStoreError) as raised:
        bindings.binding_for(DEST)
    message = str(raised.value)
    assert "more than one store binding claims faulty://" in message
    assert "'faulty' (entry point faulty = tests.fixtures.faulty_filesystem:FAULTY_BINDING)" in message
    assert "'rival' (entry point rival = tests.fixtures.faulty_filesystem:FAULTY_RIVAL)" in message
    assert bindings.find(DEST) is None
    assert bindings.binding_for("file:///tmp").name == "local", "the other stores still serve"

    assert "faulty" not in [binding.name for binding in bindings.bindings()]
    with pytest.raises(mc.ConfigError, match=r"faulty:// by 'faulty' .* and 'rival'"):
        bindings.register(mc.StoreBinding(name="third", schemes=("faulty",), refusal="no"))
    bindings.register(FAULTY_BINDING, replace=True)
    assert bindings.binding_for(DEST) is FAULTY_BINDING


def test_an_entry_point_claiming_a_built_ins_scheme_is_refused_and_the_built_in_serves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bindings = StoreBindings(
        discover=lambda: _entry_points(("impostor", "tests.fixtures.faulty_filesystem:MEMORY_IMPOSTOR"))
    )
    with caplog.at_level(logging.WARNING, logger="manifest_committer.store.registry"):
        assert bindings.binding_for("memory://x") is MEMORY_BINDING
    (warning,) = [record.getMessage() for record in caplog.records]
    assert "'impostor' (entry point impostor = tests.fixtures.faulty_filesystem:MEMORY_IMPOSTOR)" in warning
    assert "memory:// by 'memory' (built in, manifest_committer.store.memory:MEMORY_BINDING)" in warning
    assert "refused, the built-ins keep them" in warning


# --- the built-in bindings --------------------------------------------------------------------------------------------


def test_the_built_in_stores_are_the_entry_points_that_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert {entry_point.name: entry_point.value for entry_point in BUILT_IN_STORES} == declared[ENTRY_POINT_GROUP]
    assert {entry_point.group for entry_point in BUILT_IN_STORES} == {ENTRY_POINT_GROUP}


def test_each_built_in_binding_is_named_as_its_entry_point_and_declares_its_stores_capabilities() -> None:
    stores = {"local": LocalStore, "memory": MemoryStore, "azure": AzureBlobStore, "gcs": GCSStore, "s3": S3Store}
    for entry_point in BUILT_IN_STORES:
        binding = entry_point.load()
        assert isinstance(binding, mc.StoreBinding)
        assert binding.name == entry_point.name
        if entry_point.name in stores:
            assert binding.capabilities == stores[entry_point.name].capabilities
        else:
            assert binding.opener is None and binding.refusal


@pytest.mark.parametrize(
    ("discovered", "origin"),
    [([], "not installed, or installed before the stores were entry points"), (BUILT_IN_STORES, "installed")],
)
def test_the_built_ins_serve_whether_or_not_the_package_is_installed(
    discovered: tuple[EntryPoint, ...], origin: str
) -> None:
    bindings = StoreBindings(discover=lambda: discovered)
    assert [binding.name for binding in bindings.bindings()] == [entry_point.name for entry_point in BUILT_IN_STORES]
    assert bindings.failures == [], origin
    assert type(open_store("memory://x").store) is MemoryStore


@pytest.mark.parametrize(
    ("url", "protocol"), [("s3://b/t", "upload"), ("s3a://b/t", "upload"), ("gs://b/t", "manifest")]
)
def test_auto_asks_the_bindings_capabilities(url: str, protocol: str) -> None:
    from manifest_committer.protocols.registry import resolve_protocol

    assert resolve_protocol(url) == protocol


# --- entry points of an installed distribution, for real -------------------------------------------------------------

PLUGIN = """
from tests.fixtures.faulty_filesystem import FAULTY_BINDING, make_faulty_binding

BINDING = FAULTY_BINDING


def make_binding():
    return make_faulty_binding()
"""

JOB = """
import json, sys
import manifest_committer as mc
from manifest_committer.store import store_bindings

committer = mc.create_committer("faulty://bucket/table", "job-ep")
committer.setup_job()
task = committer.setup_task("task_00000", "attempt_00000_0")
with task.fs.open(task.work_path + "/dt=1/part-0.csv", "wb") as handle:
    handle.write(b"row\\n")
committer.commit_task(task)
summary = committer.commit_job()
try:
    mc.create_committer("broken://bucket/table", "job-ep")
except mc.UnsupportedStoreError as error:
    refusal = str(error)
json.dump(
    {
        "protocol": committer.protocol,
        "files": summary.filenames,
        "bindings": [binding.name for binding in store_bindings().bindings()],
        "failures": store_bindings().failures,
        "refusal": refusal,
    },
    sys.stdout,
)
"""


def _distribution(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: a ``*.dist-info`` directory with its entry points."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}", encoding="utf-8")


def test_an_installed_distributions_entry_points_bind_its_stores(tmp_path: Path) -> None:
    """In a fresh interpreter, with no registration call: a plugin distribution binds ``faulty://`` (a binding
    object) and ``faultier://`` (a function), one broken entry point is named in refusals, and the package's own
    entry points, installed as pyproject declares them, add nothing twice."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "faulty_store_plugin.py").write_text(PLUGIN, encoding="utf-8")
    _distribution(
        site,
        "faulty_store_plugin",
        {
            "faulty": "faulty_store_plugin:BINDING",
            "faultier": "faulty_store_plugin:make_binding",
            "broken": "faulty_store_plugin_gone:BINDING",
        },
    )
    _distribution(site, "manifest_committer", {entry_point.name: entry_point.value for entry_point in BUILT_IN_STORES})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}

    result = subprocess.run(
        [sys.executable, "-c", JOB], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout)
    assert outcome["protocol"] == "manifest"
    assert outcome["files"] == ["faulty:///bucket/table/dt=1/part-0.csv"]
    assert outcome["bindings"] == [*(entry_point.name for entry_point in BUILT_IN_STORES), "faultier", "faulty"]
    assert len(outcome["failures"]) == 1
    assert outcome["failures"][0].startswith(
        "entry point broken = faulty_store_plugin_gone:BINDING of faulty_store_plugin 1.0 (ModuleNotFoundError"
    )
    assert "unknown scheme broken://" in outcome["refusal"]
    assert "faultier (faultier://), faulty (faulty://)" in outcome["refusal"]


SNEAKY_PLUGIN = """
import manifest_committer as mc
from tests.fixtures.faulty_filesystem import FAULTY_CAPABILITIES, FaultyFileSystem

IMPOSTOR = mc.fsspec_store_binding(
    FaultyFileSystem, FAULTY_CAPABILITIES, name="impostor", schemes=("file", "local", "sneaky")
)
mc.register_store_binding(IMPOSTOR, replace=True)  # run by the import of the entry point's module

BINDING = IMPOSTOR
"""

TAKEOVER = """
import json, logging, sys
import manifest_committer as mc
from manifest_committer.store import open_store, store_bindings

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=sys.stderr)
root = sys.argv[1]
before = type(open_store(root).store).__name__
sneaky = store_bindings().binding_for("sneaky://bucket/x").name
with mc.create_committer(root + "/table", "job-local") as committer:
    committer.setup_job()
    summary = committer.commit_job()
print("---", file=sys.stderr)
import sneaky_store_plugin
mc.register_store_binding(sneaky_store_plugin.IMPOSTOR, replace=True)  # the user's own choice, at run time
json.dump(
    {"before": before, "sneaky": sneaky, "committed": summary.success, "after": type(open_store(root).store).__name__},
    sys.stdout,
)
"""


def test_an_entry_point_whose_import_replaces_a_built_in_is_refused_and_the_users_own_call_is_logged(
    tmp_path: Path,
) -> None:
    """In a fresh interpreter: an installed plugin whose module, imported as an entry point, registers a binding for
    ``file://`` with ``replace=True`` leaves ``file://`` to the built-in (with a warning naming both bindings and
    the entry point) and still serves its own scheme; the user's own call at run time replaces it, logged."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sneaky_store_plugin.py").write_text(SNEAKY_PLUGIN, encoding="utf-8")
    _distribution(site, "sneaky_store_plugin", {"sneaky": "sneaky_store_plugin:BINDING"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    local = tmp_path / "local"
    local.mkdir()

    result = subprocess.run(
        [sys.executable, "-c", TAKEOVER, str(local)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == {
        "before": "LocalStore",
        "sneaky": "impostor",
        "committed": True,
        "after": "DeclaredFsspecStore",
    }
    discovery, run_time = result.stderr.split("---\n")
    entry_point = "entry point sneaky = sneaky_store_plugin:BINDING of sneaky_store_plugin 1.0"
    refusals = [line for line in discovery.splitlines() if line.startswith("WARNING") and "refused" in line]
    assert refusals and all(entry_point in line for line in refusals), discovery
    assert all(
        "file:// by 'local' (built in, manifest_committer.store.local:LOCAL_BINDING)" in line for line in refusals
    )
    assert "'impostor'" in refusals[0]
    assert " replaces '" not in discovery, "nothing replaced a built-in while the entry point was loaded"
    (takeover,) = [line for line in run_time.splitlines() if " replaces '" in line and "file://" in line]
    assert takeover == (
        "WARNING manifest_committer.store.registry Store binding 'impostor' (registered at run time) replaces "
        "'local' (built in, manifest_committer.store.local:LOCAL_BINDING) for file://"
    )


# --- docs/stores.md ---------------------------------------------------------------------------------------------------

DOC_BLOCKS = re.findall(
    r"^```python\n(.*?)^```", (REPO / "docs" / "stores.md").read_text(encoding="utf-8"), re.M | re.S
)


@pytest.mark.parametrize(
    ("binds", "printed"),
    [
        ("mc.fsspec_store_binding(", "['scratch:///bucket/table/dt=2026-11-22/part-0.csv']"),
        ("mc.StoreBinding(", "manifest notes:///bucket/table"),
    ],
    ids=["fsspec_store_binding", "an opener by hand"],
)
def test_the_docs_examples_bind_a_filesystem_as_pasted(binds: str, printed: str, tmp_path: Path) -> None:
    (example,) = [block for block in DOC_BLOCKS if "register_store_binding(" in block and binds in block]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == printed


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=[f"block-{index}" for index in range(len(DOC_BLOCKS))])
def test_each_docs_example_is_python(block: str) -> None:
    compile(block, "docs/stores.md", "exec")
