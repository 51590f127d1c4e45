"""Committer configuration: one frozen, picklable value that travels from the driver to every task."""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

log = logging.getLogger(__name__)

MANIFEST_PREFIX = "mapreduce.manifest.committer."
FILE_OUTPUT_PREFIX = "mapreduce.fileoutputcommitter."
SPARK_HADOOP_PREFIX = "spark.hadoop."

# Keys Hadoop knows that have no meaning here; they are accepted so a copied Hadoop or Spark configuration works.
_IGNORED_KEYS = frozenset(
    {
        MANIFEST_PREFIX + "store.operations.classname",
        FILE_OUTPUT_PREFIX + "algorithm.version",
        FILE_OUTPUT_PREFIX + "algorithm.version.v1.experimental.mv.threads",
        FILE_OUTPUT_PREFIX + "algorithm.version.v1.experimental.parallel.rename.recovery",
        FILE_OUTPUT_PREFIX + "algorithm.version.v1.experimental.parallel.task.commit",
        FILE_OUTPUT_PREFIX + "task.cleanup.enabled",
        FILE_OUTPUT_PREFIX + "task.commit.retry.count",
    }
)


def _parse_bool(key: str, value: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _parse_positive_int(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{key}: must be at least 1, got {value!r}")
    return number


def _parse_non_negative_number(key: str, value: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if not number >= 0 or number == float("inf"):  # also rejects nan
        raise ConfigError(f"{key}: must be a finite number >= 0, got {value!r}")
    return number


def _parse_optional_path(key: str, value: str) -> str | None:
    text = value.strip()
    return text or None


class MarkerType(enum.StrEnum):
    """How tasks record write markers (``markers.type``); each member equals its string."""

    DIRECT = "direct"
    """One empty object per data file, written by the task itself."""
    BATCHED = "batched"
    """Through the driver's marker server, which writes them in batches."""


MARKER_TYPES: tuple[MarkerType, ...] = tuple(MarkerType)


def _parse_marker_type(key: str, value: str) -> MarkerType:
    text = value.strip().lower()
    if text not in MARKER_TYPES:
        raise ConfigError(f"{key}: expected one of {', '.join(MARKER_TYPES)}, got {value!r}")
    return MarkerType(text)


def _parse_host(key: str, value: str) -> str | None:
    """A host name or IP address to bind and publish; empty means unset (this host's primary address)."""
    text = value.strip()
    if not text:
        return None
    problem = host_problem(text)
    if problem is not None:
        raise ConfigError(f"{key}: {problem}, got {value!r}")
    return text


def host_problem(host: str) -> str | None:
    """Why ``host`` is not a host name or IP address, or ``None``."""
    if len(host) > 255 or not host.isprintable() or any(c in host for c in " /@?#[]\\"):
        return "expected a host name or an IP address"
    return None


def _parse_port(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected a port number, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"{key}: must be a port from 0 (any free port) to 65535, got {value!r}")
    return number


def _parse_positive_number(key: str, value: str) -> float:
    number = _parse_non_negative_number(key, value)
    if number <= 0:
        raise ConfigError(f"{key}: must be a number > 0, got {value!r}")
    return number


def _suggestion(raw_key: str) -> str:
    """``; did you mean `<nearest known key>`?`` for a mistyped key, with the caller's prefix; empty if none is near.

    Only the part after the family's prefix is compared: every key shares the prefix, which would make any
    nonsense look close to something.
    """
    key = raw_key.removeprefix(SPARK_HADOOP_PREFIX)
    nearest = _nearest(key)
    if not nearest:
        return ""
    return f"; did you mean `{raw_key[: len(raw_key) - len(key)]}{nearest}`?"


_FAMILIES = (MANIFEST_PREFIX, FILE_OUTPUT_PREFIX)
_NEIGHBOUR_FAMILIES = frozenset({"mapreduce.outputcommitter"})
"""Hadoop's own families that are close in spelling to the committer's (``mapreduce.outputcommitter.factory.*``):
never taken for a mistyped prefix."""
_PREFIX_LIKENESS = 0.9
"""How alike (``difflib`` ratio) a key's first segments must be to a family's prefix to be a mistyped one: the
prefixes of Hadoop's other keys are further away (``mapreduce.job.committer``: 0.78)."""


def short_form(key: str) -> str | None:
    """The full key of a short form (``io.threads`` -> ``mapreduce.manifest.committer.io.threads``), or ``None``."""
    for family in _FAMILIES:
        if family + key in _HADOOP_KEYS or family + key in _IGNORED_KEYS:
            return family + key
    return None


def _misspelt_family(key: str) -> str | None:
    """``key`` with its family's prefix spelled right, when its first segments are a mistyped (or wrongly cased)
    prefix of one of the committer's families; ``None`` for every other key."""
    segments = key.split(".")
    for family in _FAMILIES:
        count = family.count(".")
        head = ".".join(segments[:count]).lower()
        if len(segments) <= count or head in _NEIGHBOUR_FAMILIES:
            continue
        if head == family[:-1] or difflib.SequenceMatcher(None, head, family[:-1]).ratio() >= _PREFIX_LIKENESS:
            return family + ".".join(segments[count:])
    return None


def check_key(raw_key: str) -> str | None:
    """The committer key ``raw_key`` names (without ``spark.hadoop.``), ``None`` for a key of no family of the
    committer's (a whole Spark or Hadoop configuration passes through), or a ``ConfigError`` naming it with a
    did-you-mean: an unknown key of a family, a mistyped or upper-case prefix of one, or a short form
    (``io.threads``) where the full key is needed."""
    key = raw_key.removeprefix(SPARK_HADOOP_PREFIX)
    if key.startswith(_FAMILIES):
        if key in _HADOOP_KEYS or key in _IGNORED_KEYS:
            return key
        raise ConfigError(f"{raw_key}: unknown committer configuration key{_suggestion(raw_key)}")
    corrected = _misspelt_family(key)
    if corrected is not None:
        near = _nearest(corrected)
        guess = f"; did you mean `{raw_key[: len(raw_key) - len(key)]}{near}`?" if near else ""
        why = "keys are lower case" if key.lower().startswith(_FAMILIES) else "its prefix is misspelt"
        raise ConfigError(f"{raw_key}: not a committer configuration key ({why}){guess}")
    full = short_form(key)
    if full is not None:
        raise ConfigError(f"{raw_key}: a short form; the full key is needed here: did you mean `{full}`?")
    return None


def nearest_key(key: str) -> str | None:
    """The committer key (without ``spark.hadoop.``) nearest to ``key``: the full key of a short form, or of a
    mistyped or upper-case prefix, or the nearest key of its family; ``None`` if none is near."""
    key = key.removeprefix(SPARK_HADOOP_PREFIX)
    if key.startswith(_FAMILIES):
        return _nearest(key)
    corrected = _misspelt_family(key)
    if corrected is not None:
        return _nearest(corrected)
    short_forms = {key.removeprefix(f): key for f in _FAMILIES for key in _HADOOP_KEYS if key.startswith(f)}
    nearest = difflib.get_close_matches(key.lower(), list(short_forms), n=1, cutoff=0.8)
    return short_forms[nearest[0]] if nearest else None


def _nearest(key: str) -> str | None:
    """The known key nearest to ``key`` (a key of one of the families), or ``None``."""
    if key in _HADOOP_KEYS or key in _IGNORED_KEYS:
        return key
    family = next(family for family in _FAMILIES if key.startswith(family))
    names = [known.removeprefix(family) for known in [*_HADOOP_KEYS, *_IGNORED_KEYS] if known.startswith(family)]
    nearest = difflib.get_close_matches(key.removeprefix(family).lower(), names, n=1, cutoff=0.7)
    return family + nearest[0] if nearest else None


# Hadoop key -> (CommitterConfig field, parser)
_HADOOP_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    MANIFEST_PREFIX + "io.threads": ("io_threads", _parse_positive_int),
    # Not Hadoop's: a JVM's threads use every core, Python's one process does not (docs/configuration.md).
    MANIFEST_PREFIX + "io.processes": ("io_processes", _parse_positive_int),
    MANIFEST_PREFIX + "io.rate": ("io_rate_limit", _parse_non_negative_number),
    MANIFEST_PREFIX + "writer.queue.capacity": ("writer_queue_capacity", _parse_positive_int),
    MANIFEST_PREFIX + "manifest.save.attempts": ("manifest_save_attempts", _parse_positive_int),
    MANIFEST_PREFIX + "delete.target.files": ("delete_target_files", _parse_bool),
    MANIFEST_PREFIX + "validate.output": ("validate_output", _parse_bool),
    MANIFEST_PREFIX + "summary.report.directory": ("summary_report_directory", _parse_optional_path),
    MANIFEST_PREFIX + "diagnostics.manifest.directory": (
        "diagnostics_manifest_directory",
        _parse_optional_path,
    ),
    MANIFEST_PREFIX + "cleanup.parallel.delete": ("cleanup_parallel_delete", _parse_bool),
    MANIFEST_PREFIX + "cleanup.parallel.delete.base.first": (
        "cleanup_parallel_delete_base_first",
        _parse_bool,
    ),
    # Not Hadoop's: its store operations have no retry policy of their own. Hadoop ignores these keys.
    MANIFEST_PREFIX + "store.retry.attempts": ("store_retry_attempts", _parse_positive_int),
    MANIFEST_PREFIX + "store.retry.interval": ("store_retry_interval", _parse_non_negative_number),
    MANIFEST_PREFIX + "store.retry.max.wait": ("store_retry_max_wait", _parse_non_negative_number),
    MANIFEST_PREFIX + "store.retry.max.time": ("store_retry_max_time", _parse_non_negative_number),
    MANIFEST_PREFIX + "store.direct.requests": ("store_direct_requests", _parse_bool),
    # Write markers of the transactional and upload protocols (docs/markers.md).
    MANIFEST_PREFIX + "markers.type": ("markers_type", _parse_marker_type),
    MANIFEST_PREFIX + "markers.batch.interval.ms": ("markers_batch_interval_ms", _parse_positive_int),
    MANIFEST_PREFIX + "markers.batch.threads": ("markers_batch_threads", _parse_positive_int),
    MANIFEST_PREFIX + "markers.server.address": ("markers_server_address", _parse_host),
    MANIFEST_PREFIX + "markers.server.port": ("markers_server_port", _parse_port),
    MANIFEST_PREFIX + "heartbeat.expiry.seconds": ("heartbeat_expiry_seconds", _parse_positive_number),
    FILE_OUTPUT_PREFIX + "marksuccessfuljobs": ("mark_successful_jobs", _parse_bool),
    FILE_OUTPUT_PREFIX + "cleanup.skipped": ("cleanup_skipped", _parse_bool),
    FILE_OUTPUT_PREFIX + "cleanup-failures.ignored": ("cleanup_failures_ignored", _parse_bool),
}


@dataclass(frozen=True)
class CommitterConfig:
    """Every setting of the committer, with Hadoop's defaults.

    The first group mirrors Hadoop's keys (see ``from_hadoop_conf``); the second holds settings Hadoop has no
    key for. ``manifest.save.attempts`` is honoured here, unlike Hadoop 3.5 where it is parsed and dropped.
    """

    io_threads: int = 32
    io_rate_limit: float = 0.0
    """Store operations per second across all threads of one committer (``io.rate``); 0 means no limit.
    Hadoop documents the key but never implemented it."""
    writer_queue_capacity: int = 32
    manifest_save_attempts: int = 5
    delete_target_files: bool = False
    validate_output: bool = False
    summary_report_directory: str | None = None
    diagnostics_manifest_directory: str | None = None
    cleanup_parallel_delete: bool = True
    cleanup_parallel_delete_base_first: bool = False
    mark_successful_jobs: bool = True
    cleanup_skipped: bool = False
    cleanup_failures_ignored: bool = False

    # Not in Hadoop.
    save_retry_interval: float = 0.5
    """Base sleep in seconds between manifest/summary save attempts; grows exponentially with jitter."""
    store_retry_attempts: int = 5
    """Attempts of a single store call that failed with a transient error (``store.retry.attempts``)."""
    store_retry_interval: float = 0.2
    """Base sleep in seconds between attempts of a transient store call, doubling each time, with jitter
    (``store.retry.interval``)."""
    store_retry_max_wait: float = 30.0
    """Longest single sleep between attempts of a store call, in seconds (``store.retry.max.wait``)."""
    store_retry_max_time: float = 120.0
    """Seconds after a store call's first attempt began when no further attempt starts; 0 means no limit
    (``store.retry.max.time``). The cloud stores' clients do not retry on their own, so this bounds a call."""
    store_direct_requests: bool = True
    """Whether the Azure, GCS and S3 stores send a job commit's hot requests themselves, on the client library's
    own session with its credentials (GCS's in batch requests), rather than through its calls one by one
    (``store.direct.requests``); ``False`` keeps every request on the client library's own path."""
    rename_batch_size: int = 128
    """Most files one unit of work renames; batching keeps per-file overhead in microseconds."""
    io_processes: int = 1
    """Processes that make a job commit's per-file store calls (``io.processes``): 1 makes them in the
    committer's process; more start that many worker processes for them, where one process's CPU is the limit."""
    markers_type: MarkerType = MarkerType.BATCHED
    """``direct``: one marker object per data file; ``batched``: through the driver's marker server
    (``markers.type``)."""
    markers_batch_interval_ms: int = 50
    """Milliseconds between the marker server's batch flushes (``markers.batch.interval.ms``)."""
    markers_batch_threads: int = 20
    """Most ``MARKERS<i>`` files, and concurrent flushes, of the marker server (``markers.batch.threads``)."""
    markers_server_address: str | None = None
    """The host the marker server binds and publishes (``markers.server.address``): an address the tasks on the
    cluster's other hosts reach. ``None``: the Spark helper's ``spark.driver.host``, else this host's primary
    address; ``127.0.0.1`` keeps the server on one host."""
    markers_server_port: int = 0
    """The marker server's port (``markers.server.port``); 0: any free port."""
    heartbeat_expiry_seconds: float = 120.0
    """A job whose lease (``markers/heartbeat``) was last renewed longer ago than this is dead, once its marker
    server does not answer either (``heartbeat.expiry.seconds``); the driver renews it every quarter of it."""

    def __post_init__(self) -> None:
        for name in (
            "io_threads",
            "io_processes",
            "writer_queue_capacity",
            "manifest_save_attempts",
            "store_retry_attempts",
            "rename_batch_size",
            "markers_batch_interval_ms",
            "markers_batch_threads",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: must be an integer of at least 1, got {value!r}")
        for name in ("save_retry_interval", "store_retry_interval", "store_retry_max_wait", "store_retry_max_time"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"{name}: must be a number of seconds >= 0, got {value!r}")
        if self.markers_type not in MARKER_TYPES:
            raise ConfigError(f"markers_type: must be one of {', '.join(MARKER_TYPES)}, got {self.markers_type!r}")
        object.__setattr__(self, "markers_type", MarkerType(self.markers_type))  # "direct" given as a plain string
        address = self.markers_server_address
        if address is not None and (not isinstance(address, str) or not address or host_problem(address)):
            raise ConfigError(f"markers_server_address: expected a host name or an IP address, got {address!r}")
        port = self.markers_server_port
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigError(f"markers_server_port: must be a port from 0 (any free port) to 65535, got {port!r}")
        expiry = self.heartbeat_expiry_seconds
        if isinstance(expiry, bool) or not isinstance(expiry, int | float) or not 0 < expiry < float("inf"):
            raise ConfigError(f"heartbeat_expiry_seconds: must be a finite number of seconds > 0, got {expiry!r}")
        rate = self.io_rate_limit
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < float("inf"):
            raise ConfigError(f"io_rate_limit: must be a finite number of operations per second >= 0, got {rate!r}")
        for field in dataclasses.fields(self):
            if field.type == "bool" and not isinstance(getattr(self, field.name), bool):
                raise ConfigError(f"{field.name}: must be True or False, got {getattr(self, field.name)!r}")

    @classmethod
    def from_hadoop_conf(cls, conf: Mapping[str, str], **overrides: Any) -> CommitterConfig:
        """Build a config from Hadoop/Spark keys, with or without the ``spark.hadoop.`` prefix.

        Keys outside the committer's families are ignored, since callers pass whole Hadoop or Spark
        configurations. Inside ``mapreduce.manifest.committer.`` and ``mapreduce.fileoutputcommitter.`` an unknown
        key is an error naming it, and so is a key whose prefix is a misspelt or upper-case one of theirs, or a
        short form (``io.threads``): a typo never silently falls back to a default (``check_key``).
        """
        values: dict[str, Any] = {}
        for raw_key, raw_value in conf.items():
            key = check_key(raw_key)
            if key is None:
                continue
            if key in _IGNORED_KEYS:
                log.debug("Ignoring Hadoop key %s: it has no meaning for this committer", raw_key)
                continue
            text = raw_value if isinstance(raw_value, str) else str(raw_value)
            if isinstance(raw_value, bool):
                text = text.lower()
            field_name, parse = _HADOOP_KEYS[key]
            values[field_name] = parse(raw_key, text)
        values.update(overrides)
        return cls(**values)

    def to_hadoop_conf(self) -> dict[str, str]:
        """The Hadoop keys of this config, as strings; the inverse of ``from_hadoop_conf``."""
        result: dict[str, str] = {}
        for key, (field_name, _) in _HADOOP_KEYS.items():
            value = getattr(self, field_name)
            if value is None:
                result[key] = ""
            elif isinstance(value, bool):
                result[key] = "true" if value else "false"
            else:
                result[key] = str(value)
        return result


HADOOP_KEYS = tuple(sorted(_HADOOP_KEYS))
"""Every Hadoop key ``from_hadoop_conf`` understands (without the ``spark.hadoop.`` prefix)."""
