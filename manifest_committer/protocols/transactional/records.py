"""The transactional protocol's files in the destination: names carrying a transaction id, and commit records.

The Databricks-style transactional commit (docs/formats.md) keeps its
whole state beside the data, so any reader can tell committed files from debris without the writer:

- ``_started_<tid>``: an empty file, written when the job is set up;
- data files named ``<stem>-tid-<tid>-<attempt tag><rest>`` (``part-00000.parquet`` of attempt A becomes
  ``part-00000-tid-<tid>-<tag of A>.parquet``): the tid ties a file to its job, the attempt tag keeps two
  attempts of one task (a retry, a speculative copy) from ever writing the same name;
- ``_committed_<tid>``: a JSON object ``{"added": [...], "removed": [...], "jobId": ...}`` naming files relative
  to its own directory. At job commit the destination's root gets one listing every file of the transaction (the
  commit point), then every other directory holding a file it adds or removes gets one listing that directory's
  files alone (``directory_records``), as Databricks writes them, so that a reader of one partition finds them.

``<tid>`` is a decimal number derived from the job id (any process computes the same one); the tag is derived from
the attempt id. A commit record is untrusted input (docs/safety.md, "Crafted input"): ``CommitRecord.from_json`` admits
only relative paths in normal form, so a crafted record can neither hide nor expose files outside its directory.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from ...admission import relative_problem
from ...errors import CommitterError, ManifestError
from ...markers.layout import MarkerPaths
from ...paths import JobPaths, is_hidden

STARTED_PREFIX = "_started_"
COMMITTED_PREFIX = "_committed_"
TID_SEPARATOR = "-tid-"

_TID_NAME = re.compile(r"(?P<stem>[^.]*)-tid-(?P<tid>[0-9]{1,20})-(?P<tag>[0-9a-f]{16})(?P<rest>\..*)?\Z", re.DOTALL)
_DATABRICKS_NAME = re.compile(
    r"part-[0-9]+-tid-(?P<tid>[0-9]{1,20})-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"(?:-[0-9]+)*(?:-c[0-9]+)?(?:\..*)?\Z",
    re.DOTALL,
)
"""Databricks' DBIO names: ``part-<n>-tid-<tid>-<write uuid>-<task>-<attempt>-c<n>.<ext>``
(Databricks' transactional commit, docs/formats.md)."""
_COMMITTED_NAME = re.compile(r"_committed_(?P<tid>[0-9]{1,20})\Z")


def transaction_id(job_id: str) -> str:
    """The job's transaction id: 63 bits of SHA-256 of the job id, in decimal, as Databricks' tids look."""
    digest = hashlib.sha256(job_id.encode("utf-8")).digest()
    return str(int.from_bytes(digest[:8], "big") >> 1)


def attempt_tag(attempt_id: str) -> str:
    """16 hex digits of SHA-256 of a task attempt id: what makes one attempt's file names its own."""
    return hashlib.sha256(attempt_id.encode("utf-8")).hexdigest()[:16]


def data_file_name(name: str, tid: str, attempt_id: str) -> str:
    """The name a task's file ``name`` gets in the destination: the tid and attempt tag after its stem.

    ``CommitterError`` for a name readers would skip (``_``/``.`` first) or without a stem before its first dot.
    """
    if not name or is_hidden(name) or "/" in name:
        raise CommitterError(
            f"{name!r}: a transactional data file name must not be empty or start with '_' or '.' (readers skip those)"
        )
    stem, dot, rest = name.partition(".")
    return f"{stem}{TID_SEPARATOR}{tid}-{attempt_tag(attempt_id)}{dot}{rest}"


@dataclass(frozen=True, slots=True)
class TidName:
    """What a data file's name says about its transaction."""

    tid: str
    tag: str
    """The attempt tag of this library's names; empty in Databricks' names (no attempt of ours wrote them)."""


def parse_data_file_name(name: str) -> TidName | None:
    """The tid (and attempt tag) a data file's name carries, this library's or Databricks' (judged by their
    ``_committed_<tid>`` alike), or ``None`` for a file without one (another tool's)."""
    if is_hidden(name):
        return None
    match = _TID_NAME.match(name)
    if match is not None:
        return TidName(match.group("tid"), match.group("tag"))
    match = _DATABRICKS_NAME.match(name)
    if match is not None:
        return TidName(match.group("tid"), "")
    return None


def committed_record_name(tid: str) -> str:
    return f"{COMMITTED_PREFIX}{tid}"


def started_record_name(tid: str) -> str:
    return f"{STARTED_PREFIX}{tid}"


def committed_record_tid(name: str) -> str | None:
    """The tid of a ``_committed_<tid>`` name, else ``None``."""
    match = _COMMITTED_NAME.match(name)
    return match.group("tid") if match else None


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """The content of ``_committed_<tid>``: files added and removed, relative to the record's directory."""

    added: tuple[str, ...]
    removed: tuple[str, ...] = ()
    job_id: str | None = None

    def to_json(self) -> bytes:
        document: dict[str, object] = {"added": sorted(self.added), "removed": sorted(self.removed)}
        if self.job_id is not None:
            document["jobId"] = self.job_id
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes, origin: str) -> TransactionRecord:
        """Parse and admit a record; ``ManifestError`` naming ``origin`` and the field for anything else."""
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise ManifestError(f"{origin}: not a JSON commit record ({error})") from None
        if not isinstance(raw, dict):
            raise ManifestError(f"{origin}: a commit record must be a JSON object, not {type(raw).__name__}")
        added = _relative_names(raw.get("added"), "added", origin)
        removed = _relative_names(raw.get("removed", []), "removed", origin)
        job_id = raw.get("jobId")
        if job_id is not None and not isinstance(job_id, str):
            raise ManifestError(f"{origin}: field jobId must be a string, not {type(job_id).__name__}")
        return cls(added, removed, job_id)


def _relative_names(value: object, field: str, origin: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ManifestError(f"{origin}: field {field} must be a list of relative file names")
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ManifestError(f"{origin}: {field}[{index}] must be a string, not {type(item).__name__}")
        problem = relative_problem(item)
        if problem is not None:
            raise ManifestError(f"{origin}: {field}[{index}] {item!r} {problem}")
        names.append(item)
    return tuple(names)


def directory_records(record: TransactionRecord) -> dict[str, TransactionRecord]:
    """The records of the directories below the destination that hold a file ``record`` adds or removes, by
    destination-relative directory, each listing the names in its own directory only (as Databricks writes them).

    ``record`` is the root's (every file, relative to the destination); it stays the commit point, and these are
    written after it, so that a record beside a partition's files never precedes the transaction's commit."""
    added: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    for relatives, into in ((record.added, added), (record.removed, removed)):
        for relative in relatives:
            directory, _, name = relative.rpartition("/")
            if directory:
                into.setdefault(directory, []).append(name)
    return {
        directory: TransactionRecord(tuple(added.get(directory, ())), tuple(removed.get(directory, ())), record.job_id)
        for directory in sorted(added.keys() | removed.keys())
    }


def relative_to(directory: str, path: str) -> str | None:
    """``path`` relative to ``directory`` when it lies below it, else ``None`` (string test only)."""
    prefix = directory.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def parent_dirs(directory: str, root: str) -> list[str]:
    """``directory`` and each of its ancestors down to ``root`` (inclusive), deepest first."""
    chain = [directory]
    while directory != root and directory.startswith(root.rstrip("/") + "/"):
        directory = posixpath.dirname(directory)
        chain.append(directory)
    return chain


@dataclass(frozen=True, slots=True)
class TransactionPaths:
    """The store paths of one job's transaction: its records in the destination and its markers."""

    job: JobPaths

    @property
    def tid(self) -> str:
        return transaction_id(self.job.job_id)

    @property
    def started(self) -> str:
        return posixpath.join(self.job.dest, started_record_name(self.tid))

    @property
    def committed(self) -> str:
        return posixpath.join(self.job.dest, committed_record_name(self.tid))

    def committed_in(self, directory: str) -> str:
        """The transaction's ``_committed_<tid>`` in the destination-relative ``directory`` (``""``: the root)."""
        return posixpath.join(self.job.dest, directory, committed_record_name(self.tid))

    @property
    def markers(self) -> MarkerPaths:
        return MarkerPaths(self.job)

    def data_path(self, relative: str) -> str:
        return posixpath.join(self.job.dest, relative)


def final_name_function(tid: str, attempt_id: str) -> Callable[[str], str]:
    """What ``DirectWriteFileSystem`` calls to name a task's file in the destination."""
    return lambda name: data_file_name(name, tid, attempt_id)
