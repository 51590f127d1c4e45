"""Kill tests of an earlier job's ``_SUCCESS``: SIGKILL a whole job (setup, tasks, commit) at the steps around its
set-aside and its commit point, then abort with a fresh committer or ``manifest-committer abort DEST --job ID``.

Before the commit point the destination is byte for byte as before the job, the earlier ``_SUCCESS`` included
(put back from where setup set it aside); after it the job's output and its ``_SUCCESS`` stay. The scenario is
``tests/fixtures/killing/success_aside.py``; v2 is left out (its task commits publish files that no abort
undoes, so "as before the job" is not its promise), and the upload protocol, whose setup leaves ``_SUCCESS`` in
place, is killed on moto below.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import manifest_committer as mc
from tests.fixtures.emulators import Emulator
from tests.fixtures.killing.cases import parametrize_kills
from tests.fixtures.killing.child import Kill
from tests.fixtures.killing.events import KillPoint, NthCall
from tests.fixtures.killing.follow_ups import abort_after_kill, history
from tests.fixtures.killing.listing import Listing, outside_temporary
from tests.fixtures.killing.report import Report, killed_state
from tests.fixtures.killing.states import KilledStates, in_place
from tests.fixtures.killing.success_aside import SetAsideScenario
from tests.fixtures.killing.upload import UploadScenario

SCENARIOS = [
    *(SetAsideScenario(Path("."), protocol) for protocol in ("manifest", "v1")),
    SetAsideScenario(Path("."), "manifest", newer_meanwhile=True),
]
ROOT = Path(__file__).resolve().parents[2]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_kills(metafunc, SCENARIOS, case_id)


def case_id(template: SetAsideScenario, point: KillPoint) -> str:
    return f"{template.protocol}{' newer meanwhile' if template.newer_meanwhile else ''} {point.id}"


def test_abort_after_kill(commit_kill: KillPoint, scenario: SetAsideScenario, killed_states: KilledStates) -> None:
    """A fresh committer's ``abort_job``, twice: the earlier ``_SUCCESS`` back before the commit point, the job's
    own after it."""
    abort_after_kill(scenario, killed_states, ("commit", commit_kill))


def test_command_line_abort_after_kill(
    commit_kill: KillPoint, scenario: SetAsideScenario, killed_states: KilledStates
) -> None:
    """``manifest-committer abort DEST --job ID`` in a process of its own does what the library's abort does."""
    kill: Kill = ("commit", commit_kill)
    before = killed_states.restore(scenario, kill)
    killed = scenario.listing(temporary=True)
    committed = scenario.committed()
    report = Report(
        scenario,
        f"{scenario.key}: command-line abort after {history((kill,))}",
        killed_state(scenario, before, killed),
    )
    expected = before
    if committed:
        expected = scenario.expected_after_commit(before) | {"_SUCCESS": killed["_SUCCESS"]}
    done = subprocess.run(
        [sys.executable, "-m", "manifest_committer.cli", "abort", scenario.destination, "--job", scenario.job_id],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "TMPDIR": str(scenario.spill),  # where the killed child's spill file is, for the abort to remove
        },
        check=False,
    )
    if done.returncode != 0:
        report.problems.append(f"abort exited {done.returncode}: {done.stderr.strip()}")
    everything = scenario.listing(temporary=True)
    report.compare(expected, outside_temporary(everything), "destination after the command-line abort")
    report.finish(everything, "abort")


# --- the upload protocol on S3: setup leaves the earlier _SUCCESS in place, the commit point replaces it ---------

UPLOAD_KILLS = [
    NthCall("complete_upload", 2, ""),  # one upload completed: a partial commit
    NthCall("write_bytes", 3, "_SUCCESS"),  # right before the commit point (after the lease and commit-started)
    NthCall("list_uploads", 1, ""),  # after it
]


class UploadAfterAnEarlierJob(UploadScenario):
    """The upload kill scenario with an earlier job's ``_SUCCESS`` in the bucket before the job."""

    def prepare(self) -> Listing:
        opened = self.store()
        earlier = mc.SuccessData.create("job-1", "test", "committer_commit_job")
        opened.store.write_bytes(f"{opened.path}/_SUCCESS", earlier.to_json())
        return super().prepare()


@pytest.fixture
def upload_scenario(
    moto_s3: Emulator, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> UploadAfterAnEarlierJob:
    return in_place(UploadAfterAnEarlierJob(tmp_path, f"s3://{s3_bucket}/out", moto_s3.storage_options), monkeypatch)


@pytest.mark.s3
@pytest.mark.parametrize("upload_kill", UPLOAD_KILLS, ids=[kill.id for kill in UPLOAD_KILLS])
def test_upload_abort_after_kill_keeps_the_earlier_success(
    upload_kill: NthCall, upload_scenario: UploadAfterAnEarlierJob, killed_states: KilledStates
) -> None:
    """Killed before the commit point, the abort leaves the earlier ``_SUCCESS`` byte for byte; after it, the
    job's own."""
    abort_after_kill(upload_scenario, killed_states, ("commit", upload_kill))
