"""The committer's side of a job's write markers: the driver's lease and server, and each task's client.

Shared by the protocols whose tasks record a marker before creating a data file (``transactional``,
``upload``): the committer that called ``setup_job`` runs the driver's side until the job is committed, aborted
or the committer closed: the job's lease (``heartbeat.py``), renewed whatever the marker type, and with
``batched`` markers the job's secret and a marker server taking every task's markers over HTTP, on the address
``address.py`` chooses; each task attempt gets one ``MarkerClient``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from ..config import MARKER_TYPES, CommitterConfig, MarkerType
from ..errors import ConfigError
from ..paths import check_id
from ..retry import RetryPolicy
from ..store import StoreOperations
from .address import bind_host, server_host
from .client import MarkerClient
from .heartbeat import Heartbeat
from .layout import MarkerPaths, MarkerStoreCalls
from .server import MarkerServer

log = logging.getLogger(__name__)


def check_marker_type(config: CommitterConfig, destination: str) -> None:
    """``ConfigError`` naming the key unless ``markers.type`` is one this committer knows."""
    if config.markers_type not in MARKER_TYPES:
        raise ConfigError(
            f"unknown marker type {config.markers_type!r} (mapreduce.manifest.committer.markers.type) "
            f"for {destination}: use direct or batched"
        )


@contextmanager
def _beating(heartbeat: Heartbeat) -> Iterator[Heartbeat]:
    heartbeat.start()
    try:
        yield heartbeat
    finally:
        heartbeat.stop(remove=True)


class JobMarkers:
    """The driver's side of one job attempt's markers, and the marker client of each task attempt.

    ``retry_for`` gives the retry policy of a call: ``None`` for the driver's own, an attempt id for a task's.
    """

    def __init__(
        self,
        store: StoreOperations,
        paths: MarkerPaths,
        config: CommitterConfig,
        retry_for: Callable[[str | None], RetryPolicy],
    ) -> None:
        self._store = store
        self.paths = paths
        self._config = config
        self._retry_for = retry_for
        self._lock = threading.Lock()
        self._clients: dict[str, MarkerClient] = {}
        self.server: MarkerServer | None = None
        self._heartbeat: Heartbeat | None = None

    def start(self) -> None:
        """Renew the job's lease from now on; with batched markers, write the job's secret and start the marker
        server (the lease first: the job is alive before its server is published)."""
        config = self._config
        retry = self._retry_for(None)
        self._heartbeat = Heartbeat(
            self._store, self.paths, retry, expiry_seconds=config.heartbeat_expiry_seconds
        ).start()
        if config.markers_type is not MarkerType.BATCHED:
            return
        try:
            published = server_host(config.markers_server_address)
            self.server = MarkerServer(
                self._store,
                self.paths,
                retry,
                batch_interval_ms=config.markers_batch_interval_ms,
                batch_threads=config.markers_batch_threads,
                host=bind_host(published),
                port=config.markers_server_port,
                advertised_host=published,
            ).start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server (its waiting markers written first) and the lease's renewal, if running: before an
        abort, after a job commit, and at ``close()``."""
        self.stop_server()
        self.end_lease()

    def stop_server(self) -> None:
        """Stop the marker server, its waiting markers written first: before the job's markers are read for a
        commit. The lease beats on (``hold_lease``)."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def hold_lease(self) -> None:
        """Keep the job's lease renewed for a job commit: the driver's own, or, in a process that did not set the
        job up (a rerun, ``manifest-committer commit``), a lease started here while the job's marker state is
        there, so no rollback or vacuum judges the job dead while it commits. ``end_lease`` stops it once the
        commit's outcome is recorded."""
        if self._heartbeat is not None:
            return
        retry = self._retry_for(None)
        if MarkerStoreCalls(self._store, retry).info(self.paths.markers_dir) is None:
            return  # no state to keep alive (never set up, or its commit finished long ago): write none
        self._heartbeat = Heartbeat(
            self._store, self.paths, retry, expiry_seconds=self._config.heartbeat_expiry_seconds
        ).start()

    def end_lease(self) -> None:
        """Stop renewing the lease (idempotent): its last beat stays, so the job looks alive for the expiry still,
        and then dead unless its outcome is recorded."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()

    def client(self, attempt_id: str) -> MarkerClient:
        """The one marker client of a task attempt in this process."""
        with self._lock:
            client = self._clients.get(attempt_id)
            if client is None:
                marker_type = self._config.markers_type
                client = MarkerClient(self._store, self.paths, self._retry_for(attempt_id), marker_type=marker_type)
                self._clients[attempt_id] = client
            return client

    def keep_alive(self, attempt_id: str) -> AbstractContextManager[object]:
        """With direct markers, beat ``heartbeats/<attempt>`` while the attempt runs (removed at its end), so a
        job whose driver side lives in no process (Spark's ``format("manifest")``) is alive while tasks run."""
        if self._config.markers_type is not MarkerType.DIRECT:
            return nullcontext()  # the marker server in the driver is the job's liveness
        check_id("task attempt id", attempt_id)
        heartbeat = Heartbeat(
            self._store,
            self.paths,
            self._retry_for(attempt_id),
            expiry_seconds=self._config.heartbeat_expiry_seconds,
            path=self.paths.task_heartbeat(attempt_id),
        )
        return _beating(heartbeat)

    def close(self) -> None:
        """Stop the driver's side and close every task's client."""
        self.stop()
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()
