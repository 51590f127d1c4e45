"""SIGKILL an ``upload`` job commit or abort on S3 (moto) before a chosen store call, then finish with a fresh one.

The scenario (``tests/fixtures/killing/upload.py``): three tasks committed, a speculative copy of task 0 that also
committed, an attempt of task 1 that never did, and the user's files. A child process runs ``commit_job`` (or
``abort_job``) and is killed right before the n-th call of one operation; then a fresh committer in this process
reruns the commit or aborts, and the bucket is compared object by object (``tests/fixtures/killing/follow_ups.py``):
after a commit exactly the chosen attempts' bytes beside the user's, after an abort nothing of the job (or, once its
``_SUCCESS`` is in place, exactly the committed output) — and in both cases no incomplete upload and no job state
left. Each test makes its state in a bucket of its own: pending uploads cannot be copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.emulators import Emulator
from tests.fixtures.killing.child import Kill
from tests.fixtures.killing.events import NthCall
from tests.fixtures.killing.follow_ups import (
    abort_after_kill,
    abort_again_after_killed_abort,
    rerun_after_kill,
    rollback_and_vacuum_after_kill,
)
from tests.fixtures.killing.states import KilledStates, in_place
from tests.fixtures.killing.upload import UploadScenario

pytestmark = pytest.mark.s3

COMMIT_KILLS = [  # the first write is the fresh committer's beat of the job's lease, which it holds while it commits
    NthCall("write_bytes", 2, "~/commit-started"),
    NthCall("complete_upload", 2, ""),  # one upload completed: a partial commit
    NthCall("write_bytes", 3, "_SUCCESS"),
    NthCall("list_uploads", 1, ""),  # after the commit point: cleanup, the other attempts' uploads
    NthCall("delete_dir", 1, "~/"),  # cleanup: the job's state
]
PARTIAL_COMMIT: Kill = ("commit", NthCall("complete_upload", 3, ""))
"""Two uploads completed: two of the job's files visible."""
ABORT_KILLS = [NthCall("abort_upload", 1, ""), NthCall("delete_dir", 1, "_temporary/job-2")]
ROLLBACK_KILLS = COMMIT_KILLS[:4]
"""Before ``commit-started``, in the commit (one upload and every upload completed), past the commit point."""
each_commit_kill = pytest.mark.parametrize("commit_kill", COMMIT_KILLS, ids=[kill.id for kill in COMMIT_KILLS])


@pytest.fixture
def scenario(moto_s3: Emulator, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> UploadScenario:
    return in_place(UploadScenario(tmp_path, f"s3://{s3_bucket}/out", moto_s3.storage_options), monkeypatch)


@each_commit_kill
def test_rerun_after_kill(commit_kill: NthCall, scenario: UploadScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``commit_job`` finishes the job: exactly the chosen attempts' objects, ``_SUCCESS``
    right, no incomplete upload, no job state."""
    rerun_after_kill(scenario, killed_states, ("commit", commit_kill))


@pytest.mark.parametrize("commit_kill", ROLLBACK_KILLS, ids=[kill.id for kill in ROLLBACK_KILLS])
def test_rollback_after_kill(commit_kill: NthCall, scenario: UploadScenario, killed_states: KilledStates) -> None:
    """The driver killed in its job commit, its lease expired: ``rollback`` from a fresh committer leaves a job
    that began its commit exactly as the kill left it (its uploads too), and a rerun finishes it; a job killed
    before ``commit-started`` is dead and rolled back."""
    rollback_and_vacuum_after_kill(scenario, killed_states, ("commit", commit_kill))


@each_commit_kill
def test_abort_after_kill(commit_kill: NthCall, scenario: UploadScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``, twice: before the commit point nothing of the job stays; after it, the
    committed output does."""
    abort_after_kill(scenario, killed_states, ("commit", commit_kill))


@pytest.mark.parametrize("abort_kill", ABORT_KILLS, ids=[kill.id for kill in ABORT_KILLS])
def test_an_abort_killed_after_a_partial_commit_is_finished_by_a_fresh_abort(
    abort_kill: NthCall, scenario: UploadScenario, killed_states: KilledStates
) -> None:
    """The commit dies after completing two uploads; the abort that follows dies too (after deleting them, in the
    middle of aborting the rest, or in its cleanup); a third process aborts."""
    killed_states.restore(scenario, PARTIAL_COMMIT)
    killed, job = scenario.listing(), scenario.job_listing()
    assert sum(1 for path in job if killed.get(path) == job[path]) == 2, "two objects of the job are visible"

    abort_again_after_killed_abort(scenario, killed_states, PARTIAL_COMMIT, ("abort", abort_kill))
