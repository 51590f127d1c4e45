"""The seam's part shared by the protocols whose tasks write in place and record a write marker first.

``transactional`` (files at their final names, each named by a marker) and ``upload`` (pending multipart uploads
to the final keys) differ in what a task attempt leaves and how the job publishes it, but not in the rest: the
committer that sets the job up runs the driver's side of the markers (``markers.driver.JobMarkers``), a task's
work path is only a name (nothing is created for it), and this process keeps a register of what each attempt
wrote through it, which commit and abort read and which an attempt written by another process lacks.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

from ..markers import MarkerPaths, MarkerServer
from ..markers.driver import JobMarkers, check_marker_type
from .base import CommitterBase, TaskAttempt
from .transactional.task_fs import AttemptRegister

V = TypeVar("V")


class MarkerProtocolCommitter(CommitterBase, Generic[V]):
    """A committer whose tasks write in place behind write markers; ``V`` is what its register keeps per file."""

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

    def setup_task(self, task_id: str, attempt_id: str) -> TaskAttempt:
        """Nothing to create: the attempt's files go to their final names, its markers to the job's state."""
        return self.task_attempt(task_id, attempt_id)

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
