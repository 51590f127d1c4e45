"""Write markers (docs/markers.md): a record of every data file a job is about to create, direct or batched.

One module per job: ``layout`` (paths, what a marker may name, retried store calls), ``direct`` (one empty
object per data file), ``server`` (the driver's batching HTTP server), ``client`` (a task's marker calls, with
fallback to direct markers), ``reader`` (every marker, from the files alone), ``heartbeat`` (is the job's
driver gone?). Each takes a ``StoreOperations`` and the committer's ``RetryPolicy`` from its caller.
"""

from __future__ import annotations

from ..config import MarkerType
from ..errors import MarkerError, MarkerServerError
from .client import MarkerClient, ping, read_server_state
from .direct import DirectMarkers
from .heartbeat import DEFAULT_EXPIRY_SECONDS, Heartbeat, Liveness, job_liveness, read_heartbeat
from .layout import BATCHED, IO_TYPES, MARKERS_TYPE_FILE, Marker, MarkerPaths, check_data_file, parse_marker
from .reader import MarkerReads, MarkerSet, read_marker_set, read_markers
from .server import MarkerServer, ServerState

__all__ = [
    "BATCHED",
    "DEFAULT_EXPIRY_SECONDS",
    "IO_TYPES",
    "MARKERS_TYPE_FILE",
    "DirectMarkers",
    "Heartbeat",
    "Liveness",
    "Marker",
    "MarkerClient",
    "MarkerError",
    "MarkerPaths",
    "MarkerReads",
    "MarkerServer",
    "MarkerServerError",
    "MarkerSet",
    "MarkerType",
    "ServerState",
    "check_data_file",
    "job_liveness",
    "parse_marker",
    "ping",
    "read_heartbeat",
    "read_marker_set",
    "read_markers",
    "read_server_state",
]
