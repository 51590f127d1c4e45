"""A server-side copy that real Azure answers ``pending`` and that then ends ``failed``, against Azurite.

Azurite finishes every copy at once, so the fault is made here: the copy's answer says ``pending``, and the
destination's properties, whenever read, say that this copy (by its copy id) ended ``failed`` and holds nothing
(size 0, no Content-MD5), as a failed copy leaves its blob. Everything else (the blobs, the copy properties
naming the source, the deletes) is Azurite's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store.azure_direct import Answer, DirectBlobRequests
from tests.fixtures.committing import FAST, output, run_task, tree

pytestmark = pytest.mark.azure

FILES = {"p=1/a.csv": b"first file, its copy fails", "p=2/b.csv": b"second file"}
FAILING = "p=1/a.csv"


@dataclass
class FailingCopy:
    """Makes the first copy into a blob whose name ends with ``FAILING`` end ``failed``."""

    leave_blob: bool
    """The rename's own delete of what the failed copy left fails too (as if the process died first)."""
    armed: bool = True
    failing_blob: str | None = None
    """The blob whose copy was answered ``pending``: the copy id its properties show first is the failed one."""
    failed_ids: set[str] = field(default_factory=set)
    refused_deletes: int = 0

    def fails(self, blob: str) -> bool:
        if not self.armed or not blob.endswith(FAILING):
            return False
        self.armed = False
        self.failing_blob = blob
        return True

    def failed(self, blob: str, copy_id: str | None) -> bool:
        if copy_id is not None and blob == self.failing_blob and not self.failed_ids:
            self.failed_ids.add(copy_id)
        return copy_id in self.failed_ids


@pytest.fixture(params=["its blob removed at once", "its blob left behind"])
def failing_copy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FailingCopy]:
    from azure.core.exceptions import ServiceRequestError
    from azure.storage.blob.aio import BlobClient

    fault = FailingCopy(leave_blob=request.param == "its blob left behind")
    direct_copy = DirectBlobRequests.copy
    sdk_copy = BlobClient.start_copy_from_url
    get_properties = BlobClient.get_blob_properties
    delete_blob = BlobClient.delete_blob

    async def copy_directly(self: DirectBlobRequests, container: str, blob: str, *args: Any) -> Answer:
        answer = await direct_copy(self, container, blob, *args)
        if 200 <= answer.status < 300 and fault.fails(blob):
            return Answer(answer.status, None, "pending", *vars_after_copy_status(answer))
        return answer

    async def copy_through_sdk(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = await sdk_copy(self, *args, **kwargs)
        if fault.fails(self.blob_name):
            answer = {**answer, "copy_status": "pending"}
        return answer

    async def properties(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = await get_properties(self, *args, **kwargs)
        if found.copy is not None and fault.failed(self.blob_name, found.copy.id):
            found.copy.status = "failed"
            found.size = 0
            found.content_settings.content_md5 = None
        return found

    async def delete(self: Any, *args: Any, **kwargs: Any) -> Any:
        if fault.leave_blob and fault.refused_deletes == 0 and self.blob_name.endswith(FAILING):
            fault.refused_deletes += 1
            raise ServiceRequestError("connection lost")
        return await delete_blob(self, *args, **kwargs)

    monkeypatch.setattr(DirectBlobRequests, "copy", copy_directly)
    monkeypatch.setattr(BlobClient, "start_copy_from_url", copy_through_sdk)
    monkeypatch.setattr(BlobClient, "get_blob_properties", properties)
    monkeypatch.setattr(BlobClient, "delete_blob", delete)
    yield fault


def vars_after_copy_status(answer: Answer) -> tuple[Any, ...]:
    """The fields an ``Answer`` has after ``copy_status`` (its ``copy_id``), whichever of them it has."""
    names = [name for name in Answer.__dataclass_fields__ if name not in ("status", "error_code", "copy_status")]
    return tuple(getattr(answer, name) for name in names)


def _fail_a_commit(url: str, job_id: str, fault: FailingCopy) -> mc.ManifestCommitter:
    committer = mc.ManifestCommitter(url, job_id, config=FAST)
    committer.setup_job()
    run_task(committer, "task_00000", "attempt_00000_0", FILES)
    with pytest.raises(OSError, match="failed"):
        committer.commit_job()
    assert not fault.armed, "the fault struck"
    assert fault.refused_deletes == (1 if fault.leave_blob else 0), "the rename tried to remove what it left"
    return committer


def test_a_rerun_after_a_copy_that_ended_failed_finishes_the_job(
    azure_container: str, failing_copy: FailingCopy
) -> None:
    url = f"abfs://{azure_container}/out"
    _fail_a_commit(url, "job-failed-copy", failing_copy)
    rerun = mc.ManifestCommitter(url, "job-failed-copy", config=FAST)
    summary = rerun.commit_job()
    assert summary.success
    assert output(rerun) == FILES
    assert all(path.startswith(("p=", "_SUCCESS")) for path in tree(rerun)), "no _temporary left"


def test_an_abort_after_a_copy_that_ended_failed_leaves_the_destination_as_before(
    azure_container: str, failing_copy: FailingCopy
) -> None:
    url = f"abfs://{azure_container}/out"
    before = mc.ManifestCommitter(url, "job-before", config=FAST)
    before.store.write_bytes(f"{before.paths.dest}/p=1/theirs.csv", b"a file of someone else")
    _fail_a_commit(url, "job-failed-copy", failing_copy)
    aborting = mc.ManifestCommitter(url, "job-failed-copy", config=FAST)
    aborting.abort_job()
    assert {path: data for path, data in tree(aborting).items() if data is not None} == {
        "p=1/theirs.csv": b"a file of someone else"
    }
    aborting.abort_job()  # a second abort does nothing and succeeds
