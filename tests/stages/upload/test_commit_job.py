"""UploadCommitJob on moto: what may already be at the keys the job completes, and what a job may claim.

The protocol's other cases (completion, crashes, throttling, crafted documents) are in
tests/protocols/upload/test_committer.py; tests/protocols/test_end_to_end.py runs the shared protocol tests on it.
"""

from __future__ import annotations

import pytest

import manifest_committer as mc
from manifest_committer.protocols.upload.committer import UploadCommitter
from manifest_committer.store.s3 import S3Store

pytestmark = pytest.mark.s3


def upload_job(dest: str, *, delete_target_files: bool = False) -> UploadCommitter:
    config = mc.CommitterConfig(
        store_retry_interval=0, markers_type=mc.MarkerType.DIRECT, delete_target_files=delete_target_files
    )
    job = mc.create_committer(dest, "job-1", "upload", config=config)
    assert isinstance(job, UploadCommitter)
    job.setup_job()
    return job


def commit_task(job: UploadCommitter, index: int, files: dict[str, bytes]) -> None:
    task = job.setup_task(f"task_{index}", f"attempt_{index}_0")
    for relative, data in files.items():
        with task.fs.open(f"{task.work_path}/{relative}", "wb") as file:
            file.write(data)
    job.commit_task(task)


def objects(store: S3Store, root: str) -> dict[str, bytes]:
    store.fs.invalidate_cache()
    keys = [key for key in store.fs.find(root) if "/_temporary/" not in key]
    return {key.removeprefix(root + "/"): store.fs.cat_file(key) for key in sorted(keys)}


@pytest.mark.parametrize("delete_target_files", [False, True])
def test_a_directory_at_a_files_key_is_a_conflict_unless_delete_target_files(
    s3_bucket: str, s3_store: S3Store, delete_target_files: bool
) -> None:
    """S3 would hold ``a.csv`` beside ``a.csv/inner.txt``: a tree s3fs, S3A and Spark's listing see as broken.
    It was completed regardless (found by tests/protocols/test_end_to_end.py on S3)."""
    root = f"{s3_bucket}/table"
    s3_store.fs.pipe_file(f"{root}/dt=1/a.csv/inner.txt", b"someone else's")
    with upload_job(f"s3://{root}", delete_target_files=delete_target_files) as job:
        commit_task(job, 0, {"dt=1/a.csv": b"ours", "dt=1/b.csv": b"b"})
        if delete_target_files:
            job.commit_job()
            found = objects(s3_store, root)
            assert found.pop("_SUCCESS")
            assert found == {"dt=1/a.csv": b"ours", "dt=1/b.csv": b"b"}, "the directory went, the file replaced it"
            return
        with pytest.raises(mc.OutputConflictError, match=r"table/dt=1/a\.csv: a directory.*delete\.target\.files"):
            job.commit_job()
        assert objects(s3_store, root)["dt=1/a.csv/inner.txt"] == b"someone else's"
        assert "dt=1/a.csv" not in objects(s3_store, root), "nothing beside the directory"
        job.abort_job()
    assert objects(s3_store, root) == {"dt=1/a.csv/inner.txt": b"someone else's"}
    assert s3_store.list_uploads(root + "/") == []


def test_a_file_of_one_task_under_the_path_of_anothers_is_refused_before_anything_is_completed(
    s3_bucket: str, s3_store: S3Store
) -> None:
    """Both would be completed, and a rerun after a crash would find the job's own ``dt=1/`` in its way."""
    root = f"{s3_bucket}/table"
    with upload_job(f"s3://{root}") as job:
        commit_task(job, 0, {"dt=1": b"a file"})
        commit_task(job, 1, {"dt=1/part-0.csv": b"a file below it"})
        with pytest.raises(mc.ManifestError, match=r"table/dt=1: a file of task task_0 and a directory of task task_1"):
            job.commit_job()
        assert objects(s3_store, root) == {}
        job.abort_job()
    assert s3_store.list_uploads(root + "/") == []
