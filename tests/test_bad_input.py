"""Every error of docs/safety.md's "Nothing touched on a bad manifest", and the job-state and config errors: the error
type, a message that names the file, key or task at fault, and a destination that the failed call did not touch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from tests.fixtures.committing import FAST, edit_manifest, output, run_task, tree, url_of

Document = dict[str, Any]
BAD_TASK = "task_00001"
BAD_MANIFEST = f"{BAD_TASK}-manifest.json"


def committed_job(destination: str, job_id: str = "job-bad", config: mc.CommitterConfig = FAST) -> mc.ManifestCommitter:
    """A destination with one older file, and a job of two committed tasks waiting for job commit."""
    committer = mc.ManifestCommitter(destination, job_id, config=config)
    committer.store.write_bytes(committer.paths.dest + "/keep.csv", b"older output")
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/a.csv": b"a", "b.csv": b"bb"})
    run_task(committer, BAD_TASK, "attempt_00001_0", {"dt=2/c.csv": b"ccc"})
    return committer


def fails_untouched(committer: mc.ManifestCommitter, error: type[mc.CommitterError], *names: str) -> str:
    """Job commit raises ``error`` naming every one of ``names``, and leaves the whole destination as it was."""
    before = tree(committer)
    with pytest.raises(error) as raised:
        committer.commit_job()
    message = str(raised.value)
    for name in names:
        assert name in message, f"{name!r} not named in: {message}"
    assert tree(committer) == before
    return message


def write_manifest_bytes(committer: mc.ManifestCommitter, data: bytes) -> None:
    committer.store.fs.pipe_file(committer.paths.manifest_path(BAD_TASK), data)


# --- missing, empty or unreadable manifests -----------------------------------------------------------------------


def test_manifest_deleted_before_job_commit_leaves_that_task_out(destination: str) -> None:
    """Without its manifest a task is simply not committed: the job commits fewer files and none of that task's."""
    committer = committed_job(destination)
    committer.store.delete_file(committer.paths.manifest_path(BAD_TASK))

    success = committer.commit_job()

    assert output(committer) == {"keep.csv": b"older output", "dt=1/a.csv": b"a", "b.csv": b"bb"}
    assert "dt=2" not in tree(committer)
    assert success.iostatistics.counters["committer_tasks_completed"] == 1


@pytest.mark.parametrize("data", [b"", b"  \n\t"], ids=["empty", "whitespace"])
def test_empty_manifest(destination: str, data: bytes) -> None:
    committer = committed_job(destination)
    write_manifest_bytes(committer, data)

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)


def test_manifest_that_is_a_directory(destination: str) -> None:
    committer = committed_job(destination)
    path = committer.paths.manifest_path(BAD_TASK)
    committer.store.delete_file(path)
    committer.store.write_bytes(path + "/inside.json", b"{}")

    message = fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)
    assert "directory" in message


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda raw: raw[: len(raw) // 2], id="truncated"),
        pytest.param(lambda raw: b"\x00\xff" + raw, id="binary garbage"),
        pytest.param(lambda raw: b"[1, 2, 3]", id="not an object"),
        pytest.param(lambda raw: b'{"type": ', id="unterminated"),
    ],
)
def test_corrupt_manifest(destination: str, corrupt: Callable[[bytes], bytes]) -> None:
    committer = committed_job(destination)
    raw = committer.store.read_bytes(committer.paths.manifest_path(BAD_TASK))
    write_manifest_bytes(committer, corrupt(raw))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_wrong_manifest_version(destination: str, version: object) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(version=version))

    message = fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)
    assert "version" in message


def test_rejected_manifest_is_reported_with_its_stage(destination: str, tmp_path: Path) -> None:
    config = mc.CommitterConfig(summary_report_directory=str(tmp_path), save_retry_interval=0, store_retry_interval=0)
    committer = committed_job(destination, job_id="job-reported", config=config)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(version=2))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)

    report = mc.SuccessData.load(str(tmp_path / "summary-job-reported.json"))
    assert report.success is False
    assert report.diagnostics["stage"] == "job_stage_load_manifests"
    assert BAD_MANIFEST in report.diagnostics["exception"]


@pytest.mark.parametrize(
    "kind",
    [
        "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1",
        "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/2",
        None,
    ],
)
def test_wrong_manifest_type(destination: str, kind: str | None) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(type=kind))

    message = fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)
    assert "type" in message


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d["files"][0].update(z=-1), id="negative size"),
        pytest.param(lambda d: d["files"][0].update(z="3"), id="size not a number"),
        pytest.param(lambda d: d["files"][0].pop("d"), id="no destination"),
        pytest.param(lambda d: d["files"][0].pop("s"), id="no source"),
        pytest.param(lambda d: d.update(files={"s": "x"}), id="files not a list"),
        pytest.param(lambda d: d.pop("taskID"), id="no task id"),
        pytest.param(lambda d: d["directories"][0].update(l=-2), id="negative level"),
    ],
)
def test_invalid_manifest_entries(destination: str, edit: Callable[[Document], None]) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, edit)

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)


# --- sources --------------------------------------------------------------------------------------------------


SOURCE_CASES = [
    "an older output file",
    "another job attempt",
    "another job",
    "another task attempt",
    "dot-dot out of the attempt",
    "the attempt directory itself",
    "another scheme",
]


def outside_sources(committer: mc.ManifestCommitter) -> dict[str, str]:
    store, paths = committer.store, committer.paths
    own = paths.task_attempt_dir("attempt_00001_0")
    other_scheme = "s3://bucket" + own + "/c.csv"
    return {
        "an older output file": store.to_url(paths.dest + "/keep.csv"),  # would move it if it were trusted
        "another job attempt": store.to_url(f"{paths.job_dir}/01/tasks/attempt_00001_0/dt=2/c.csv"),
        "another job": store.to_url(f"{paths.temporary_dir}/job-other/00/tasks/attempt_00001_0/dt=2/c.csv"),
        "another task attempt": store.to_url(paths.task_attempt_dir("attempt_00000_0") + "/b.csv"),
        "dot-dot out of the attempt": store.to_url(own + "/../attempt_00000_0/b.csv"),
        "the attempt directory itself": store.to_url(own),
        "another scheme": other_scheme,
    }


@pytest.mark.parametrize("case", SOURCE_CASES)
def test_source_outside_the_job_attempt_directory(destination: str, case: str) -> None:
    committer = committed_job(destination)
    bad = outside_sources(committer)[case]

    edit_manifest(committer, BAD_TASK, lambda document: document["files"][0].update(s=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


# --- destinations ---------------------------------------------------------------------------------------------


def outside_destinations(committer: mc.ManifestCommitter) -> dict[str, str]:
    store, dest = committer.store, committer.paths.dest
    other_authority = "memory://other-bucket/out/c.csv" if store.scheme == "memory" else "file://otherhost" + dest
    other_scheme = "file:///tmp/out/c.csv" if store.scheme == "memory" else "memory:///" + dest.lstrip("/")
    return {
        "dot-dot": store.to_url(dest + "/dt=2/../../escaped.csv"),
        "dot-dot at the start": store.to_url(dest + "/../escaped.csv"),
        "single dot": store.to_url(dest + "/./c.csv"),
        "another root": store.to_url("/elsewhere/out/c.csv"),
        "sibling with the same prefix": store.to_url(dest + "-sibling/c.csv"),
        "the destination itself": store.to_url(dest),
        "another bucket or host": other_authority,
        "another scheme": other_scheme,
        "s3": "s3://bucket/out/c.csv",
        "inside _temporary": store.to_url(committer.paths.job_attempt_dir + "/c.csv"),
        "inside another job's _temporary": store.to_url(dest + "/_temporary/job-other/00/c.csv"),
    }


DESTINATION_CASES = [
    "dot-dot",
    "dot-dot at the start",
    "single dot",
    "another root",
    "sibling with the same prefix",
    "the destination itself",
    "another bucket or host",
    "another scheme",
    "s3",
    "inside _temporary",
    "inside another job's _temporary",
]


@pytest.mark.parametrize("case", DESTINATION_CASES)
def test_file_destination_outside_the_destination(destination: str, case: str) -> None:
    committer = committed_job(destination)
    bad = outside_destinations(committer)[case]

    edit_manifest(committer, BAD_TASK, lambda document: document["files"][0].update(d=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


@pytest.mark.parametrize("case", ["dot-dot", "another root", "another scheme", "inside _temporary"])
def test_directory_entry_outside_the_destination(destination: str, case: str) -> None:
    committer = committed_job(destination)
    bad = outside_destinations(committer)[case]

    edit_manifest(committer, BAD_TASK, lambda document: document["directories"][0].update(d=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


def test_two_tasks_claiming_one_destination(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-dup", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"dt=1/same.csv": b"from task 0", "dt=1/a.csv": b"a"})
    run_task(committer, "task_00001", "attempt_00001_0", {"dt=1/same.csv": b"from task 1!", "z.csv": b"z"})
    run_task(committer, "task_00002", "attempt_00002_0", {"dt=3/fine.csv": b"fine"})

    fails_untouched(
        committer,
        mc.DuplicateDestinationError,
        url_of(committer, "dt=1/same.csv"),
        "attempt_00000_0",
        "attempt_00001_0",
    )
    assert output(committer) == {}


def test_one_manifest_listing_a_destination_twice(destination: str) -> None:
    committer = committed_job(destination)

    def duplicate(document: Document) -> None:
        first = dict(document["files"][0])
        first["s"] = first["s"].replace("c.csv", "c2.csv")
        document["files"].append(first)

    edit_manifest(committer, BAD_TASK, duplicate)

    fails_untouched(committer, mc.DuplicateDestinationError, BAD_MANIFEST, url_of(committer, "dt=2/c.csv"))


NON_NORMAL_DESTINATIONS = {
    # x.csv and /x.csv were two claims on one file: task 0 already writes b.csv.
    "leading slash: a second claim on b.csv": "/b.csv",
    "empty segment": "dt=2//c.csv",
    "trailing slash": "dt=2/c.csv/",
    # out//_temporary passed the prefix test of _temporary: a file landed in another job's manifests/.
    "empty segment before _temporary": "/_temporary/job-other/00/manifests/task_00009-manifest.json",
    "NUL": "dt=2/c\x00.csv",
}


@pytest.mark.parametrize("case", list(NON_NORMAL_DESTINATIONS))
def test_destination_not_in_normal_form(destination: str, case: str) -> None:
    committer = committed_job(destination)
    bad = url_of(committer, NON_NORMAL_DESTINATIONS[case])

    edit_manifest(committer, BAD_TASK, lambda document: document["files"][0].update(d=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


@pytest.mark.parametrize(
    ("case", "suffix"),
    [
        ("NUL naming the attempt directory itself", "/\x00"),
        ("NUL inside the name", "/dt=2/c.csv\x00"),
        ("empty segment", "//dt=2/c.csv"),
    ],
)
def test_source_not_in_normal_form(destination: str, case: str, suffix: str) -> None:
    """``%00`` decodes to NUL, where the C rename stops: it published the whole attempt directory."""
    committer = committed_job(destination)
    bad = committer.store.to_url(committer.paths.task_attempt_dir("attempt_00001_0") + suffix)

    edit_manifest(committer, BAD_TASK, lambda document: document["files"][0].update(s=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


@pytest.mark.parametrize("suffix", ["//dt=2", "/dt=2\x00", "//_temporary/job-other"])
def test_directory_entry_not_in_normal_form(destination: str, suffix: str) -> None:
    committer = committed_job(destination)
    bad = committer.store.to_url(committer.paths.dest + suffix)

    edit_manifest(committer, BAD_TASK, lambda document: document["directories"][0].update(d=bad))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, bad)


# --- identity -------------------------------------------------------------------------------------------------


def test_manifest_of_another_job(destination: str) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(jobId="job-someone-else"))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, "job-someone-else")


def test_manifest_of_another_job_attempt(destination: str) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(jobAttemptNumber=3))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, "attempt 3")


def test_manifest_file_name_not_matching_its_task_id(destination: str) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(taskID="task_00009"))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, "task_00009")


def test_manifest_copied_under_another_task_name(destination: str) -> None:
    committer = committed_job(destination)
    store = committer.store
    store.write_bytes(
        committer.paths.manifest_path("task_00002"), store.read_bytes(committer.paths.manifest_path(BAD_TASK))
    )

    fails_untouched(committer, mc.ManifestError, "task_00002-manifest.json", BAD_TASK)


def test_manifest_naming_another_attempt_directory(destination: str) -> None:
    committer = committed_job(destination)
    other = committer.store.to_url(committer.paths.task_attempt_dir("attempt_00000_0"))
    edit_manifest(committer, BAD_TASK, lambda document: document.update(taskAttemptDir=other))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, other)


@pytest.mark.parametrize("field", ["taskAttemptID", "taskID", "jobId"])
@pytest.mark.parametrize("value", ["/elsewhere/victim", "a/b", "..", "x y", ""])
def test_manifest_ids_are_checked_like_api_ids(destination: str, field: str, value: str) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update({field: value}))

    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, field)


def test_absolute_task_attempt_id_reaches_nothing_outside_the_job(destination: str) -> None:
    """``posixpath.join`` turned ``taskAttemptID = /elsewhere/victim`` into that path: a foreign directory was
    accepted as the attempt's, emptied, and its file published. Now the id itself is refused."""
    committer = committed_job(destination)
    store = committer.store
    victim = committer.paths.dest.rsplit("/", 1)[0] + "/elsewhere/victim"
    store.write_bytes(victim + "/secret.csv", b"not the job's")

    def point_at_victim(document: Document) -> None:
        document["taskAttemptID"] = victim
        document["taskAttemptDir"] = store.to_url(victim)
        document["files"][0]["s"] = store.to_url(victim + "/secret.csv")

    edit_manifest(committer, BAD_TASK, point_at_victim)

    message = fails_untouched(committer, mc.ManifestError, BAD_MANIFEST, "taskAttemptID", victim)
    assert "not a valid id" in message
    assert store.read_bytes(victim + "/secret.csv") == b"not the job's"


def test_abort_after_a_rejected_manifest_keeps_the_destination(destination: str) -> None:
    committer = committed_job(destination)
    edit_manifest(committer, BAD_TASK, lambda document: document.update(version=9))
    fails_untouched(committer, mc.ManifestError, BAD_MANIFEST)

    committer.abort_job()

    assert tree(committer) == {"keep.csv": b"older output"}


# --- job state ------------------------------------------------------------------------------------------------


def test_setup_task_before_setup_job(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-early", config=FAST)

    with pytest.raises(mc.JobStateError) as raised:
        committer.setup_task("task_00000", "attempt_00000_0")

    assert "job-early" in str(raised.value)
    assert "attempt_00000_0" in str(raised.value)
    assert tree(committer) == {}


def test_setup_job_twice(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-twice", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
    before = tree(committer)

    for again in (committer, mc.ManifestCommitter(destination, "job-twice", config=FAST)):
        with pytest.raises(mc.JobStateError) as raised:
            again.setup_job()
        assert "job-twice" in str(raised.value)
        assert tree(committer) == before

    mc.ManifestCommitter(destination, "job-twice", job_attempt=1, config=FAST).setup_job()


def test_setup_task_attempt_twice(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-1", config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"}, commit=False)

    with pytest.raises(mc.JobStateError, match="attempt_00000_0"):
        committer.setup_task("task_00000", "attempt_00000_0")
    assert committer.store.read_bytes(committer.paths.task_attempt_dir("attempt_00000_0") + "/a.csv") == b"a"


def test_commit_task_of_an_attempt_never_set_up(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-1", config=FAST)
    committer.setup_job()
    before = tree(committer)

    with pytest.raises(mc.JobStateError) as raised:
        committer.commit_task(committer.task_attempt("task_00005", "attempt_00005_0"))

    assert "attempt_00005_0" in str(raised.value)
    assert tree(committer) == before


def test_commit_task_of_an_aborted_attempt(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-1", config=FAST)
    committer.setup_job()
    task = run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"}, commit=False)
    committer.abort_task(task)

    with pytest.raises(mc.JobStateError, match="attempt_00000_0"):
        committer.commit_task(task)
    assert committer.store.info(committer.paths.manifest_path("task_00000")) is None


def test_commit_job_before_setup_job(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-never-set-up", config=FAST)
    committer.store.write_bytes(committer.paths.dest + "/keep.csv", b"older output")

    fails_untouched(committer, mc.JobStateError, "job-never-set-up")


def test_commit_job_after_abort_job(destination: str) -> None:
    committer = committed_job(destination, job_id="job-aborted")
    committer.abort_job()

    fails_untouched(committer, mc.JobStateError, "job-aborted")
    assert output(committer) == {"keep.csv": b"older output"}


def test_destination_that_is_a_file(destination: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-1", config=FAST)
    committer.store.write_bytes(committer.paths.dest, b"a file, not a directory")

    with pytest.raises(mc.OutputConflictError) as raised:
        committer.setup_job()

    assert committer.paths.dest in str(raised.value)
    assert committer.store.read_bytes(committer.paths.dest) == b"a file, not a directory"


@pytest.mark.parametrize("job_id", ["job/1", "..", "", "job 1", "../etc"])
def test_bad_job_id(destination: str, job_id: str) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.ManifestCommitter(destination, job_id)
    assert repr(job_id) in str(raised.value)


@pytest.mark.parametrize("attempt", [-1, 100, True])
def test_bad_job_attempt(destination: str, attempt: int) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.ManifestCommitter(destination, "job-1", job_attempt=attempt)
    assert "job-1" in str(raised.value)
    assert repr(attempt) in str(raised.value)


@pytest.mark.parametrize(("task_id", "attempt_id"), [("task/0", "attempt_0"), ("task_0", "attempt 0"), ("..", "a")])
def test_bad_task_ids(destination: str, task_id: str, attempt_id: str) -> None:
    committer = mc.ManifestCommitter(destination, "job-1", config=FAST)
    committer.setup_job()
    before = tree(committer)

    with pytest.raises(mc.ConfigError) as raised:
        committer.setup_task(task_id, attempt_id)

    assert repr(task_id) in str(raised.value) or repr(attempt_id) in str(raised.value)
    assert tree(committer) == before


# --- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "mapreduce.manifest.committer.io.thread",
        "mapreduce.manifest.committer.validate.outputs",
        "mapreduce.fileoutputcommitter.marksuccessfuljob",
        "spark.hadoop.mapreduce.manifest.committer.summary.report.dir",
    ],
)
def test_unknown_config_key(key: str) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.CommitterConfig.from_hadoop_conf({key: "true"})
    assert key in str(raised.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mapreduce.manifest.committer.io.threads", "many"),
        ("mapreduce.manifest.committer.io.threads", "0"),
        ("mapreduce.manifest.committer.io.threads", "-4"),
        ("mapreduce.manifest.committer.io.threads", "2.5"),
        ("mapreduce.manifest.committer.manifest.save.attempts", "0"),
        ("mapreduce.manifest.committer.validate.output", "yes"),
        ("mapreduce.manifest.committer.delete.target.files", "1"),
        ("mapreduce.manifest.committer.cleanup.parallel.delete", ""),
        ("mapreduce.fileoutputcommitter.marksuccessfuljobs", "maybe"),
        ("spark.hadoop.mapreduce.fileoutputcommitter.cleanup.skipped", "nope"),
    ],
)
def test_bad_config_value(key: str, value: str) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.CommitterConfig.from_hadoop_conf({key: value})
    message = str(raised.value)
    assert key in message
    assert repr(value) in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("io_threads", 0), ("manifest_save_attempts", -1), ("save_retry_interval", -0.5), ("validate_output", "true")],
)
def test_bad_config_argument(field: str, value: object) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.CommitterConfig(**{field: value})  # type: ignore[arg-type]
    assert field in str(raised.value)
    assert repr(value) in str(raised.value)


def test_spark_hadoop_prefix_is_accepted() -> None:
    config = mc.CommitterConfig.from_hadoop_conf(
        {
            "spark.hadoop.mapreduce.manifest.committer.io.threads": "7",
            "spark.hadoop.mapreduce.manifest.committer.validate.output": "TRUE",
            "spark.hadoop.mapreduce.fileoutputcommitter.cleanup.skipped": "true",
            "mapreduce.manifest.committer.manifest.save.attempts": "2",
            "spark.sql.shuffle.partitions": "5",
            "fs.s3a.committer.name": "magic",
        }
    )
    assert config.io_threads == 7
    assert config.validate_output is True
    assert config.cleanup_skipped is True
    assert config.manifest_save_attempts == 2
    assert config == mc.CommitterConfig.from_hadoop_conf(config.to_hadoop_conf())
