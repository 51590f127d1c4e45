"""Names Azure rewrites (it keeps ``a\\b`` as ``a/b``), against Azurite: what a record names is what the store holds.

A task of a protocol that records the names its tasks open (transactional) is refused a name holding ``\\`` before
anything of it is written; a task that wrote ``..\\..\\x`` (kept by the service as ``../../x``) gets a clear error,
and its job's abort leaves no ``_temporary`` behind.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

import manifest_committer as mc
from manifest_committer.protocols.base import CommitterBase
from tests.fixtures.committing import FAST, run_task, tree, write

pytestmark = pytest.mark.azure


def _config(markers: str) -> mc.CommitterConfig:
    return mc.CommitterConfig.from_hadoop_conf(
        {"mapreduce.manifest.committer.markers.type": markers}, save_retry_interval=0, store_retry_interval=0
    )


def _files(committer: CommitterBase) -> dict[str, bytes]:
    return {path: data for path, data in tree(committer).items() if data is not None}


@pytest.mark.parametrize("markers", ["direct", "batched"])
def test_a_name_azure_rewrites_is_refused_at_the_task_and_the_abort_leaves_nothing(
    azure_container: str, markers: str
) -> None:
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-names", protocol="transactional", config=_config(markers))
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    with pytest.raises(mc.CommitterError, match=r"attempt_00000_0/win\\name\.csv: .*keeps as"):
        write(task, "win\\name.csv", b"refused")
    assert not [path for path in _files(committer) if "win" in path], "nothing of the refused file was written"
    committer.abort_task(task)
    committer.abort_job()
    assert _files(committer) == {}, "the abort leaves nothing"


@pytest.mark.parametrize("markers", ["direct", "batched"])
def test_after_a_refused_name_the_job_commits_exactly_what_the_store_holds(azure_container: str, markers: str) -> None:
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-names", protocol="transactional", config=_config(markers))
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    write(task, "win/ok.csv", b"kept")
    with pytest.raises(mc.CommitterError):
        write(task, "win\\name.csv", b"refused")
    committer.commit_task(task)
    summary = committer.commit_job()
    committed = mc.committed_files(url)
    assert sorted(summary.filenames) == committed and len(committed) == 1
    assert committed[0].rpartition("/")[0].endswith("/out/win")
    assert mc.vacuum(url, retention_hours=0) == []
    assert mc.committed_files(url) == committed, "vacuum deleted no committed file"


@pytest.mark.parametrize(
    ("protocol", "markers"),
    [("transactional", "direct"), ("transactional", "batched"), ("manifest", "batched"), ("v1", "batched")],
)
def test_a_task_writing_dot_dot_backslashes_gets_a_clear_error_and_the_abort_leaves_no_temporary(
    azure_container: str, protocol: str, markers: str
) -> None:
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-dots", protocol=protocol, config=_config(markers))
    committer.setup_job()
    with pytest.raises(mc.CommitterError, match=r"\.\."):
        run_task(committer, "task_00000", "attempt_00000_0", {"ok.csv": b"ok", "..\\..\\x.csv": b"x"})
    committer.abort_job()
    assert _files(committer) == {}, "the abort leaves no _temporary (nor anything else) behind"
    fs = committer.store.fs
    assert fs.find(azure_container) == [], "nothing outside the destination either"


def test_a_rename_never_meets_an_alias_under_the_manifest_protocol(azure_container: str) -> None:
    """The manifest protocol records what its task commit lists: the store's own name (``win/name.csv``)."""
    url = f"abfs://{azure_container}/out"
    committer = mc.ManifestCommitter(url, "job-listed", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"win\\name.csv": b"listed"})
    summary = committer.commit_job()
    assert [name.rpartition("/out/")[2] for name in summary.filenames] == ["win/name.csv"]
    assert _files(committer) == {"win/name.csv": b"listed", "_SUCCESS": _files(committer)["_SUCCESS"]}


def test_a_record_naming_a_backslash_counts_the_file_the_store_holds_and_vacuum_keeps_it(azure_container: str) -> None:
    """A ``_committed_<tid>`` naming ``win\\name-…`` (as this library wrote before it refused such names) governs
    the blob Azure holds, ``win/name-…``; one whose name leaves its directory once read so (``..\\…``) governs
    nothing, and deletes nothing."""
    import time

    import orjson

    from manifest_committer.protocols.transactional.records import attempt_tag, transaction_id

    url = f"abfs://{azure_container}/out"
    store = mc.ManifestCommitter(url, "job-reader", config=FAST).store
    root = f"{azure_container}/out"
    tid = transaction_id("job-old")
    name = f"name-tid-{tid}-{attempt_tag('attempt_00000_0')}.csv"
    store.write_bytes(f"{root}/win/{name}", b"committed by job-old")
    store.write_bytes(f"{root}/sub/{name}", b"committed by job-old too")
    record = {"added": [f"win\\{name}", f"sub\\{name}"], "removed": [], "jobId": "job-old"}
    store.write_bytes(f"{root}/_committed_{tid}", orjson.dumps(record))
    crafted = transaction_id("job-crafted")
    store.write_bytes(
        f"{root}/sub/_committed_{crafted}",
        orjson.dumps({"added": [], "removed": [f"..\\win\\{name}", f"..\\sub\\{name}"], "jobId": "job-crafted"}),
    )
    committed = [url_.rpartition("/out/")[2] for url_ in mc.committed_files(url)]
    assert committed == [f"sub/{name}", f"win/{name}"]
    assert mc.vacuum(url, retention_hours=0, now=time.time() + 60) == []
    assert store.read_bytes(f"{root}/win/{name}") == b"committed by job-old"
    assert store.read_bytes(f"{root}/sub/{name}") == b"committed by job-old too"


@pytest.mark.parametrize("markers", ["direct", "batched"])
@pytest.mark.parametrize("name", ["part.csv?", "part.csv#", "year=2024?/part.csv", "a?b#c.csv"])
def test_a_name_adlfs_would_keep_otherwise_is_refused_at_the_task(
    azure_container: str, markers: str, name: str
) -> None:
    """adlfs reads a path as a URL: ``part-….csv?`` would be kept as ``part-….csv``, and a directory ``year=2024?``
    could be written to but never listed: refused before its marker, naming the file and what the store would keep."""
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-query", protocol="transactional", config=_config(markers))
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    with pytest.raises(mc.CommitterError, match=rf"attempt_00000_0/{re.escape(name)}: .*would keep .* as "):
        write(task, name, b"refused")
    assert not [path for path in _files(committer) if "part" in path or "a?b" in path], "nothing of it was written"
    committer.abort_task(task)
    committer.abort_job()
    assert _files(committer) == {}, "the abort leaves nothing"


@pytest.mark.parametrize("markers", ["direct", "batched"])
def test_names_adlfs_keeps_as_written_are_committed_as_named(azure_container: str, markers: str) -> None:
    """A ``?`` or ``#`` inside a name, or ending a name that has no dot (its tid and tag follow it), is kept."""
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-query", protocol="transactional", config=_config(markers))
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    names = ["a?b.csv", "x#y.csv", "q#x/y.csv", "z?"]
    for name in names:
        write(task, name, name.encode())
    committer.commit_task(task)
    summary = committer.commit_job()
    committed = mc.committed_files(url)
    assert sorted(summary.filenames) == committed and len(committed) == len(names)
    held = {path: data for path, data in _files(committer).items() if not path.rpartition("/")[2].startswith("_")}
    assert sorted(held.values()) == sorted(name.encode() for name in names), "every file is held, none collapsed"
    assert sorted(held) == sorted(unquote(url_.rpartition("/out/")[2]) for url_ in committed), "the records name them"


def test_a_declared_output_adlfs_would_keep_otherwise_is_refused_at_task_commit(azure_container: str) -> None:
    """Under the manifest protocol a task writes through the store's own filesystem: ``a.csv?`` lands as ``a.csv``,
    so a listing cannot tell; a writer's declared outputs can, and ``commit_task`` refuses them, naming the file."""
    url = f"abfs://{azure_container}/out"
    committer = mc.ManifestCommitter(url, "job-declared", config=FAST)
    committer.setup_job()
    task = committer.setup_task("task_00000", "attempt_00000_0")
    write(task, "a.csv?", b"first")
    write(task, "a.csv", b"second")
    with pytest.raises(mc.CommitterError, match=r"/a\.csv%3F: declared output of task attempt attempt_00000_0: .*'"):
        committer.commit_task(task, outputs={"a.csv?": "a.csv?", "a.csv": "a.csv"})
    committer.abort_task(task)
    committer.abort_job()
    assert _files(committer) == {}


def test_a_directory_adlfs_cannot_list_by_its_name_fails_the_manifest_task_commit_naming_it(
    azure_container: str,
) -> None:
    """A manifest task writes through the store's own filesystem: ``year=2024?/x.csv`` is kept as written, but its
    directory is listed as ``year=2024``, which holds nothing: task commit fails naming it, and why."""
    url = f"abfs://{azure_container}/out"
    committer = mc.ManifestCommitter(url, "job-dir", config=FAST)
    committer.setup_job()
    with pytest.raises(
        mc.CommitterError, match=r"/year=2024: a directory of task attempt attempt_00000_0 .* cannot be listed.*'\?'"
    ):
        run_task(committer, "task_00000", "attempt_00000_0", {"ok.csv": b"ok", "year=2024?/x.csv": b"x"})
    committer.abort_job()
    assert _files(committer) == {}, "the abort leaves nothing behind"


@pytest.mark.parametrize("protocol", ["v1", "v2"])
def test_a_directory_adlfs_cannot_list_by_its_name_fails_the_file_output_task_commit(
    azure_container: str, protocol: str
) -> None:
    """The baselines' task commit fails on such a directory too (the store's error names it); v2 keeps what it
    merged before (its known flaw), v1 nothing."""
    url = f"abfs://{azure_container}/out"
    committer = mc.create_committer(url, job_id="job-dir", protocol=protocol, config=FAST)
    committer.setup_job()
    with pytest.raises(FileNotFoundError, match=r"year=2024"):
        run_task(committer, "task_00000", "attempt_00000_0", {"ok.csv": b"ok", "year=2024?/x.csv": b"x"})
    committer.abort_job()
    assert set(_files(committer)) <= ({"ok.csv"} if protocol == "v2" else set())


def test_a_name_adlfs_cuts_under_the_manifest_protocol_is_one_blob_the_scan_cannot_tell(azure_container: str) -> None:
    """The documented limit (docs/stores.md): ``a.csv?`` is written as ``a.csv``, so a task writing both holds one
    file, the last written; the listing of its task commit cannot see there were two."""
    url = f"abfs://{azure_container}/out"
    committer = mc.ManifestCommitter(url, "job-cut", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv?": b"first", "a.csv": b"second"})
    summary = committer.commit_job()
    assert [name.rpartition("/out/")[2] for name in summary.filenames] == ["a.csv"]
    assert _files(committer)["a.csv"] == b"second"
