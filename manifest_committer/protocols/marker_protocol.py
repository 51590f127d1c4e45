"""The seam's part shared by the protocols whose tasks write in place and record a write marker first.

``transactional`` (files at their final names, each named by a marker) and ``upload`` (pending multipart uploads
to the final keys) differ in what a task attempt leaves and how the job publishes it, but not in the rest: the
committer that sets the job up runs the driver's side of the markers (``markers.driver.JobMarkers``), a task's
work path is only a name (nothing is created for it), and this process keeps a register of what each attempt
wrote through it, which commit and abort read and which an attempt written by another process lacks.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Generic

from typing_extensions import TypeVar

from ..iostatistics import StatisticsStore
from ..markers import MarkerPaths, MarkerServer
from ..markers.driver import JobMarkers, check_marker_type
from .base import AbortT_co, CommitT_co, CommitterBase
from .direct_write_fs import AttemptRegister

V = TypeVar("V", default=Any)


class MarkerProtocolCommitter(CommitterBase[CommitT_co, AbortT_co], Generic[V, CommitT_co, AbortT_co]):
    """A committer whose tasks write in place behind write markers; ``V`` is what its register keeps per file.

    ``setup_job`` starts the driver's side of the markers (``_job_started``); ``abort_job`` stops it first
    (``_job_ending``); ``commit_job`` stops the marker server first but keeps the job's lease renewed (starting
    one in a process that did not set the job up) until its stage has recorded the outcome (``outcome_recorded``
    of its arguments) or the call ends: a job is never judged dead while it commits. The abort stage also runs as
    a dry run (``plan_abort``).
    """

    task_writes_in_place = True
    job_hosts_marker_server = True

    def _init_protocol(self) -> None:
        check_marker_type(self.config, self.destination_url)
        self._lock = threading.Lock()
        self._registers: dict[str, AttemptRegister[V]] = {}
        self._markers = JobMarkers(self._store, self.marker_paths, self.config, self._retry_for)

    @property
    def marker_paths(self) -> MarkerPaths:
        return MarkerPaths(self.paths)

    @property
    def marker_server(self) -> MarkerServer | None:
        """The marker server this committer runs (batched markers, after ``setup_job``), else ``None``."""
        return self._markers.server

    def task_work_path(self, attempt_id: str) -> str:
        return self.paths.task_attempt_dir(attempt_id)

    def close(self) -> None:
        self._markers.close()
        super().close()

    def keep_alive(self, attempt_id: str) -> AbstractContextManager[object]:
        """With direct markers, beat ``heartbeats/<attempt>`` while the attempt runs (``JobMarkers.keep_alive``)."""
        return self._markers.keep_alive(attempt_id)

    def _job_started(self) -> None:
        self._markers.start()

    def _job_ending(self) -> None:
        self._markers.stop()

    def _commit_starting(self) -> None:
        self._markers.stop_server()  # its waiting markers written: the commit reads them all
        self._markers.hold_lease()

    def _outcome_recorded(self) -> None:
        """Called by the job commit stage once its outcome is recorded, before its cleanup deletes the job's state:
        the lease's last beat must not bring a piece of that state back."""
        self._markers.end_lease()

    @abstractmethod
    def _abort_job_arguments(self, *, dry_run: bool = False) -> object:
        """What ``abort_job_stage`` is applied to; ``dry_run``: decide what it would do and change nothing."""

    def plan_abort(self) -> AbortT_co:
        """What ``abort_job`` would do now, decided by the same stage with every change left out (a dry run).
        Writes nothing, not even a failure report."""
        with self._job_pool() as pool:
            result: AbortT_co = self.abort_job_stage(self._context(StatisticsStore(), pool)).apply(
                self._abort_job_arguments(dry_run=True)
            )
        return result

    def _register(self, attempt_id: str) -> AttemptRegister[V]:
        """The attempt's register in this process, made on first use (``task_attempt`` hands it to ``task.fs``)."""
        with self._lock:
            return self._registers.setdefault(attempt_id, AttemptRegister())

    def _registered(self, attempt_id: str) -> list[tuple[str, V]] | None:
        """What the attempt wrote through this committer, or ``None`` if it wrote through another one (or nothing)."""
        with self._lock:
            register = self._registers.get(attempt_id)
        items = register.items() if register is not None else []
        return items or None

    def _forget(self, attempt_id: str) -> AttemptRegister[V] | None:
        """Drop the attempt's register (after an abort); returns it."""
        with self._lock:
            return self._registers.pop(attempt_id, None)
