"""Black-box attacks on the ``upload`` protocol (issue 23), on moto: a crafted marker naming another writer's key
must never make the job abort that writer's multipart upload."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import pytest

import manifest_committer as mc
from manifest_committer.protocols.upload.committer import UploadCommitter
from manifest_committer.store.s3 import S3Store

pytestmark = pytest.mark.s3


@pytest.fixture
def store(s3_store: S3Store) -> Iterator[S3Store]:
    s3_store.fs.invalidate_cache()
    yield s3_store


def uploads(store: S3Store, bucket: str) -> list[tuple[str, str]]:
    return sorted((upload.key, upload.upload_id) for upload in store.list_uploads(bucket + "/"))


def another_writers_upload(store: S3Store, bucket: str, key: str) -> str:
    """A multipart upload another tool has in flight at ``key`` (the same bucket and prefix); its id."""
    answer = store.fs.call_s3("create_multipart_upload", Bucket=bucket, Key=key)
    upload_id: str = answer["UploadId"]
    return upload_id


def craft_marker(job: UploadCommitter, relative: str) -> None:
    """A marker naming ``relative``, written into the job's markers as anyone who can write its state could."""
    markers_dir = job.marker_paths.markers_dir
    job.store.write_bytes(f"{markers_dir}/MARKERS19", f"{relative}.marker.CREATE\n".encode())
    if job.store.info(f"{markers_dir}/MARKERS.type") is None:
        job.store.write_bytes(f"{markers_dir}/MARKERS.type", b"BATCHED")


@pytest.mark.parametrize("then", ["commit", "abort"])
@pytest.mark.parametrize("markers", ["batched", "direct"])
def test_a_crafted_marker_never_aborts_another_writers_upload(
    s3_bucket: str, store: S3Store, markers: str, then: str
) -> None:
    """Found: a forged marker made the job commit abort another writer's multipart upload in flight under the
    destination."""
    dest = f"s3://{s3_bucket}/table"
    victim = another_writers_upload(store, s3_bucket, "table/victim.csv")
    config = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, markers_type=mc.MarkerType(markers))
    with mc.create_committer(dest, "job-1", "upload", config=config) as job:
        assert isinstance(job, UploadCommitter)
        job.setup_job()
        task = job.setup_task("task_0", "attempt_0")
        with task.fs.open(task.work_path + "/a.csv", "wb") as handle:
            handle.write(b"a")
        job.commit_task(task)
        craft_marker(job, "victim.csv")

        if then == "commit":
            summary = job.commit_job()
            assert summary.success
        else:
            job.abort_job()

    assert uploads(store, s3_bucket) == [("table/victim.csv", victim)]


def test_each_upload_is_recorded_by_id_as_it_starts(s3_bucket: str, store: S3Store) -> None:
    """The record the abort relies on exists before the file is even closed, named by the upload's id."""
    from manifest_committer.protocols.upload.records import upload_id_of_record
    from tests.fixtures.stage_context import load_schema

    dest = f"s3://{s3_bucket}/table"
    config = mc.CommitterConfig(save_retry_interval=0, store_retry_interval=0, markers_type=mc.MarkerType.DIRECT)
    with mc.create_committer(dest, "job-1", "upload", config=config) as job:
        assert isinstance(job, UploadCommitter)
        job.setup_job()
        task = job.setup_task("task_0", "attempt_0")
        handle = task.fs.open(task.work_path + "/a.csv", "wb")
        handle.write(b"a" * 10)
        handle.flush()
        handle._file.flush(force=True)  # the upload exists; the file is still open
        ((key, upload_id),) = uploads(store, s3_bucket)
        store.fs.invalidate_cache()
        (record,) = store.fs.ls(job.layout.started_dir)
        document = json.loads(store.fs.cat_file(record))
        handle.close()
        job.abort_job()

    assert upload_id_of_record(record.rsplit("/", 1)[1]) == upload_id
    assert (document["key"], document["uploadId"], document["taskAttemptID"]) == ("table/a.csv", upload_id, "attempt_0")
    assert list(jsonschema.Draft202012Validator(load_schema("upload-started.schema.json")).iter_errors(document)) == []
    assert key == "table/a.csv" and uploads(store, s3_bucket) == []
