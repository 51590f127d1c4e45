"""ManifestCommitter's own resources: the stores it opens are closed, by ``close()`` or its context manager."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import manifest_committer as mc
from manifest_committer.store import OpenedStore, StoreOperations, open_store
from manifest_committer.store.wrapping import WrappingStore
from tests.fixtures.committing import FAST, run_task


class ClosingSpy(WrappingStore):
    """Counts ``close`` calls of the store it wraps."""

    def __init__(self, inner: StoreOperations) -> None:
        super().__init__(inner)
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        super().close()


def test_the_context_manager_closes_the_committers_store(destination: str) -> None:
    spies: list[ClosingSpy] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        spies.append(ClosingSpy(inner))
        return spies[-1]

    with mc.ManifestCommitter(destination, "job_with", config=FAST, store_wrapper=wrap) as committer:
        assert isinstance(committer, mc.ManifestCommitter)
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
        committer.commit_job()
        assert spies[0].closes == 0
    assert spies[0].closes == 1
    committer.close()  # a second close is harmless
    assert spies[0].closes == 2


def test_the_context_manager_closes_on_error(destination: str) -> None:
    spies: list[ClosingSpy] = []

    def wrap(inner: StoreOperations) -> StoreOperations:
        spies.append(ClosingSpy(inner))
        return spies[-1]

    with pytest.raises(mc.CommitterError), mc.ManifestCommitter(destination, "job_fails", store_wrapper=wrap) as c:
        c.commit_job()  # never set up
    assert spies[0].closes == 1


def test_the_summary_report_store_is_closed(destination: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spies: list[ClosingSpy] = []

    def spying_open_store(url: str, storage_options: dict[str, Any] | None = None) -> OpenedStore:
        opened = open_store(url, storage_options)
        spies.append(ClosingSpy(opened.store))
        return OpenedStore(spies[-1], opened.path)

    monkeypatch.setattr("manifest_committer.protocols.base.open_store", spying_open_store)
    config = mc.CommitterConfig(summary_report_directory=str(tmp_path / "reports"))
    with mc.ManifestCommitter(destination, "job_report", config=config) as committer:
        committer.setup_job()
        run_task(committer, "task_00000", "attempt_00000_0", {"a.csv": b"a"})
        committer.commit_job()
        committer.abort_job()
    assert (tmp_path / "reports" / "summary-job_report.json").exists()
    assert len(spies) == 3  # the committer's own, then one per report (commit, abort)
    assert [spy.closes for spy in spies] == [1, 1, 1]
