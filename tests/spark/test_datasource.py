"""The driver side of the data source without Spark: settings, and a job commit of accepted attempts only."""

from __future__ import annotations

from pathlib import Path

import pytest

import manifest_committer as mc
from manifest_committer.config import MANIFEST_PREFIX as M
from manifest_committer.spark import ManifestCommitMessage, ManifestWriter, PartitionOverwriteMode, WriteSettings
from manifest_committer.spark.datasource import task_ids
from manifest_committer.store import Fault, FaultInjectingStore, StoreOperations
from manifest_committer.writing.task_output import TaskOutput as _TaskOutput


def make_writer(destination: Path, *, overwrite: bool = False, **options: str) -> ManifestWriter:
    settings = WriteSettings.from_options({"path": str(destination), **options}, overwrite=overwrite)
    settings.committer().setup_job()
    return ManifestWriter(settings)


def run_attempt(
    writer: ManifestWriter, partition: int, spark_attempt: int, files: dict[str, bytes]
) -> ManifestCommitMessage:
    """What an executor does: write into the attempt directory, commit the task, describe it to the driver."""
    committer = writer.settings.committer()
    task_id, attempt_id = task_ids(partition, spark_attempt)
    task = committer.setup_task(task_id, attempt_id)
    for relative, data in files.items():
        with task.fs.open(f"{task.work_path}/{relative}", "wb") as handle:
            handle.write(data)
    committer.commit_task(task)
    return ManifestCommitMessage(
        job_id=writer.settings.job_id,
        partition_id=partition,
        attempt_number=0,
        spark_task_attempt_id=spark_attempt,
        task_id=task_id,
        task_attempt_id=attempt_id,
        rows=len(files),
        files=tuple(files),
        partitions=tuple(sorted({r.rsplit("/", 1)[0] for r in files if "/" in r})),
    )


def data_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not str(p.relative_to(root)).startswith("_")
    }


def test_only_accepted_attempts_reach_the_destination(tmp_path: Path) -> None:
    out = tmp_path / "out"
    writer = make_writer(out)
    # Partition 0: a speculative attempt that Spark killed still published a (partial) manifest, before and
    # after the winner; partition 1 failed once after its task commit (a lost executor), then succeeded.
    run_attempt(writer, 0, 10, {"part-0-a10.csv": b"partial"})
    winner = run_attempt(writer, 0, 11, {"part-0-a11.csv": b"complete 0"})
    run_attempt(writer, 0, 13, {"part-0-a13.csv": b"late"})
    run_attempt(writer, 1, 12, {"part-1-a12.csv": b"lost"})
    retry = run_attempt(writer, 1, 14, {"part-1-a14.csv": b"complete 1"})

    writer.commit([winner, retry])

    assert data_files(out) == {"part-0-a11.csv": b"complete 0", "part-1-a14.csv": b"complete 1"}
    success = mc.SuccessData.load(str(out / "_SUCCESS"))
    assert success.success
    assert [name.rsplit("/", 1)[-1] for name in success.filenames] == ["part-0-a11.csv", "part-1-a14.csv"]
    assert not (out / "_temporary" / writer.settings.job_id).exists()


def run_deferred_attempt(
    writer: ManifestWriter, partition: int, spark_attempt: int, files: dict[str, bytes]
) -> ManifestCommitMessage:
    """What an executor does where the task commit publishes (v2): write, and leave the commit to the driver."""
    committer = writer.settings.committer()
    assert committer.task_commit_publishes
    task_id, attempt_id = task_ids(partition, spark_attempt)
    task = committer.setup_task(task_id, attempt_id)
    for index, data in enumerate(files.values()):
        with task.fs.open(f"{task.work_path}/f{index}", "wb") as handle:
            handle.write(data)
    return ManifestCommitMessage(
        job_id=writer.settings.job_id,
        partition_id=partition,
        attempt_number=0,
        spark_task_attempt_id=spark_attempt,
        task_id=task_id,
        task_attempt_id=attempt_id,
        rows=len(files),
        files=tuple(files),
        partitions=(),
        task_committed=False,
        outputs=tuple((f"f{index}", relative) for index, relative in enumerate(files)),
    )


def test_v2_driver_commits_only_the_accepted_attempts_tasks(tmp_path: Path) -> None:
    """Under v2 the task commit publishes, so the driver runs it for the accepted attempts only: a speculative
    duplicate that finished ``write`` leaves nothing in the destination, and its attempt directory goes with the
    job's cleanup."""
    out = tmp_path / "out"
    writer = make_writer(out, protocol="v2")
    run_deferred_attempt(writer, 0, 10, {"dt=1/part-0-a10.csv": b"loser"})
    winner = run_deferred_attempt(writer, 0, 11, {"dt=1/part-0-a11.csv": b"winner"})
    other = run_deferred_attempt(writer, 1, 12, {"part-1-a12.csv": b"one"})

    assert data_files(out) == {}, "nothing visible before the driver's commit"
    writer.commit([winner, other])

    assert data_files(out) == {"dt=1/part-0-a11.csv": b"winner", "part-1-a12.csv": b"one"}
    assert not (out / "_temporary").exists()
    assert mc.SuccessData.load(str(out / "_SUCCESS")).committer == "v2"


def test_a_job_id_option_names_the_job(tmp_path: Path) -> None:
    settings = WriteSettings.from_options({"path": str(tmp_path), "jobId": "spark-given"}, overwrite=False)
    assert settings.job_id == "spark-given"
    assert WriteSettings.from_options({"path": str(tmp_path)}, overwrite=False).job_id.startswith("spark-")


def test_missing_accepted_manifest_fails_and_abort_restores(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.csv").write_bytes(b"old")
    writer = make_writer(out)
    accepted = run_attempt(writer, 0, 1, {"new.csv": b"new"})
    task_id, attempt_id = task_ids(1, 2)
    never_committed = ManifestCommitMessage(writer.settings.job_id, 1, 0, 2, task_id, attempt_id, 0, (), ())

    with pytest.raises(mc.ManifestError, match=task_id):
        writer.commit([accepted, never_committed])
    assert data_files(out) == {"old.csv": b"old"}
    writer.abort([accepted, never_committed])
    assert data_files(out) == {"old.csv": b"old"}
    assert not (out / "_temporary" / writer.settings.job_id).exists()


def test_messages_must_belong_to_the_job(tmp_path: Path) -> None:
    writer = make_writer(tmp_path / "out")
    other = make_writer(tmp_path / "out")
    foreign = run_attempt(other, 0, 1, {"a.csv": b"a"})
    with pytest.raises(mc.CommitterError, match=f"belongs to job {other.settings.job_id}"):
        writer.commit([foreign])
    with pytest.raises(mc.CommitterError, match="commit message 0 is NoneType"):
        writer.commit([None])
    mine = run_attempt(writer, 0, 2, {"b.csv": b"b"})
    with pytest.raises(mc.CommitterError, match="two commit messages of partition 0"):
        writer.commit([mine, mine])


def test_overwrite_deletes_old_files_after_commit_and_spares_other_jobs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "dt=1").mkdir(parents=True)
    (out / "dt=1" / "old.csv").write_bytes(b"old 1")
    (out / "old.csv").write_bytes(b"old")
    concurrent = out / "_temporary" / "other-job" / "00" / "tasks" / "x" / "f.csv"
    concurrent.parent.mkdir(parents=True)
    concurrent.write_bytes(b"in flight")
    writer = make_writer(out, overwrite=True)
    writer.commit([run_attempt(writer, 0, 1, {"dt=2/new.csv": b"new 2"})])
    assert data_files(out) == {"dt=2/new.csv": b"new 2"}
    assert not (out / "dt=1").exists()
    assert concurrent.read_bytes() == b"in flight"
    assert (out / "_SUCCESS").exists()


def test_overwrite_retries_a_transient_error_while_deleting_old_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old files go after the commit point: a lost delete would leave old and new rows side by side."""
    out = tmp_path / "out"
    (out / "dt=1").mkdir(parents=True)
    (out / "dt=1" / "old-a.csv").write_bytes(b"old row a")
    (out / "old-b.csv").write_bytes(b"old row b")
    faulty: list[FaultInjectingStore] = []

    def wrap(store: StoreOperations) -> StoreOperations:
        faulty.append(FaultInjectingStore(store, [Fault("delete_file", path_contains="old-", times=3)]))
        return faulty[-1]

    writer = make_writer(out, overwrite=True, **{M + "store.retry.interval": "0"})
    message = run_attempt(writer, 0, 1, {"dt=2/new.csv": b"new row"})
    plain_committer = WriteSettings.committer
    monkeypatch.setattr(WriteSettings, "committer", lambda self: plain_committer(self, store_wrapper=wrap))
    writer.commit([message])

    assert data_files(out) == {"dt=2/new.csv": b"new row"}
    assert sum(store.injected["delete_file"] for store in faulty) == 3
    assert mc.SuccessData.load(str(out / "_SUCCESS")).success


def test_the_committer_deletes_only_below_its_destination(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "outside.csv").write_bytes(b"keep")
    committer = mc.ManifestCommitter(str(tmp_path / "out"), "job-x")
    for path in (str(tmp_path / "outside.csv"), str(tmp_path / "out" / ".." / "outside.csv")):
        with pytest.raises(mc.CommitterError, match="not below the destination"):
            committer.delete_destination_files([path])
    assert (tmp_path / "outside.csv").read_bytes() == b"keep"


def test_dynamic_overwrite_replaces_written_partitions_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for directory in ("dt=1", "dt=2"):
        (out / directory).mkdir(parents=True)
        (out / directory / "old.csv").write_bytes(directory.encode())
    writer = make_writer(out, overwrite=True, partitionBy="dt", partitionOverwriteMode="dynamic")
    assert writer.settings.dynamic_overwrite
    writer.commit(
        [run_attempt(writer, 0, 1, {"dt=2/new.csv": b"new 2"}), run_attempt(writer, 1, 2, {"dt=3/new.csv": b"new 3"})]
    )
    assert data_files(out) == {"dt=1/old.csv": b"dt=1", "dt=2/new.csv": b"new 2", "dt=3/new.csv": b"new 3"}


def test_settings_from_options_and_session_conf() -> None:
    settings = WriteSettings.from_options(
        {
            "path": "/data/out",
            "format": "JSONL",
            "partitionby": " dt , country ",
            "maxrecordsperfile": "10",
            "storage_options": '{"auto_mkdir": true}',
            "mapreduce.manifest.committer.io.threads": "4",
        },
        overwrite=True,
        session_conf={
            "spark.hadoop.mapreduce.manifest.committer.validate.output": "true",
            "spark.hadoop.mapreduce.manifest.committer.io.threads": "64",
            "spark.sql.sources.partitionOverwriteMode": "DYNAMIC",
        },
    )
    assert settings.output_format.name == "json"
    assert settings.partition_by == ("dt", "country")
    assert settings.max_records_per_file == 10
    assert settings.max_open_files == 64
    assert settings.storage_options == {"auto_mkdir": True}
    assert settings.config.io_threads == 4  # the option wins over the session
    assert settings.config.validate_output is True
    assert settings.partition_overwrite_mode is PartitionOverwriteMode.DYNAMIC
    assert settings.dynamic_overwrite
    assert settings.job_id.startswith("spark-")
    assert WriteSettings.from_options({"path": "/x"}, overwrite=False).job_id != settings.job_id
    parquet = WriteSettings.from_options({"path": "/x"}, overwrite=False).output_format
    assert (parquet.name, parquet.extension) == ("parquet", ".snappy.parquet")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "/x", "partitionBys": "a"}, "unknown option 'partitionbys'"),
        ({"path": "/x", "mapreduce.manifest.committer.io.thread": "2"}, "mapreduce.manifest.committer.io.thread"),
        ({"path": "/x", "mapreduce.manifest.committer.io.threads": "many"}, "'many'"),
        ({"path": "/x", "format": "orc"}, "format 'orc' is not supported"),
        ({"path": "/x", "compression": "lzo"}, "compression 'lzo'"),
        ({"path": "/x", "storage_options": "[1]"}, "storage_options: expected a JSON object"),
        ({"path": "/x", "partitionBy": "a,a"}, "partitionBy names a column twice"),
        ({"path": "/x", "partitionOverwriteMode": "sometimes"}, "partitionOverwriteMode 'sometimes'"),
        ({"format": "csv"}, "needs a destination"),
        ({"path": "/x", "maxOpenFiles": "0"}, "maxOpenFiles: must be at least 1"),
        ({"path": "/x", "maxOpenFiles": "all"}, "maxOpenFiles: expected an integer, got 'all'"),
    ],
)
def test_bad_options_name_what_is_wrong(options: dict[str, str], message: str) -> None:
    with pytest.raises(mc.ConfigError, match=message):
        WriteSettings.from_options(options, overwrite=False)


def test_a_task_keeps_at_most_max_open_files_open(tmp_path: Path) -> None:
    """Three partitions, interleaved over two batches, with one file open at a time: every row still lands once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = make_writer(tmp_path / "out", partitionBy="p", maxOpenFiles="1")
    committer = writer.settings.committer()
    task = committer.setup_task(*task_ids(0, 0))
    output = _TaskOutput(task, writer.settings, 0, 0, in_place=False)
    batches = [pa.record_batch({"id": [0, 1, 2, 3], "p": ["a", "b", "c", "a"]}), pa.record_batch(
        {"id": [4, 5, 6], "p": ["c", "b", "a"]})]  # fmt: skip
    for batch in batches:
        output.write(batch)
        assert len(output._open) <= 1
    output.close()
    committer.commit_task(task, output.outputs)
    committer.commit_job()
    out = tmp_path / "out"
    rows = {
        (part.name, value)
        for part in out.iterdir()
        if part.is_dir() and not part.name.startswith("_")
        for file in part.iterdir()
        for value in pq.read_table(file).column("id").to_pylist()
    }
    assert rows == {("p=a", 0), ("p=a", 3), ("p=a", 6), ("p=b", 1), ("p=b", 5), ("p=c", 2), ("p=c", 4)}
    # First batch: a (ids 0 and 3), b, c, each evicting the one before; the second batch goes on in c's open
    # file, then starts new files for b and a.
    assert len(output.files) == 5
