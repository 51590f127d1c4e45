"""The task manifest: what one committed task attempt asks the job commit to rename.

Key-for-key compatible with Hadoop's ``TaskManifest`` JSON (``schemas/task-manifest.schema.json``): file entries
use the short keys ``s``/``d``/``z``/``e``, directory entries ``d``/``t``/``l``. Readers ignore unknown keys.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from typing import Any, NamedTuple

from ._decode import FieldError, integer, json_array, json_object, required, text, text_map
from ._json import dump_json, load_json_document
from .errors import DuplicateDestinationError, ManifestError
from .iostatistics import IOStatisticsSnapshot
from .store.pending_upload import PendingUpload

MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
MANIFEST_VERSION = 1
MANIFEST_SUFFIX = "-manifest.json"
TEMP_SUFFIX = ".tmp"


class EntryStatus(enum.IntEnum):
    """What a task found at a destination directory when it committed (Hadoop's ``EntryStatus`` ordinals)."""

    UNKNOWN = 0
    NOT_FOUND = 1
    FILE = 2
    DIR = 3
    CREATED_DIR = 4

    @classmethod
    def of(cls, value: int) -> EntryStatus:
        """Out-of-range values mean unknown, as in Hadoop. (Documents are decoded more strictly: the schema
        allows 0 to 4 only.)"""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file to rename: percent-encoded source and destination URLs, size, and etag if the store has one."""

    source: str
    dest: str
    size: int
    etag: str | None = None

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"s": self.source, "d": self.dest, "z": self.size}
        if self.etag is not None:
            raw["e"] = self.etag
        return raw


@dataclass(frozen=True, slots=True)
class DirEntry:
    """A destination directory a task's files go into, with its depth below the destination (1 = child)."""

    dir: str
    status: EntryStatus
    level: int

    def to_dict(self) -> dict[str, Any]:
        return {"d": self.dir, "t": int(self.status), "l": self.level}


@dataclass(slots=True)
class TaskManifest:
    """The manifest one task attempt saves at task commit."""

    job_id: str
    job_attempt_number: int
    task_id: str
    task_attempt_id: str
    task_attempt_dir: str
    files: list[FileEntry] = field(default_factory=list)
    directories: list[DirEntry] = field(default_factory=list)
    iostatistics: IOStatisticsSnapshot = field(default_factory=IOStatisticsSnapshot)
    extra_data: dict[str, str] = field(default_factory=dict)
    pending_uploads: list[PendingUpload] | None = None
    """The ``upload`` protocol's pending uploads, ``pendingUploads[i]`` completing ``files[i]``; ``None`` (no
    field) for every other protocol. Hadoop's readers ignore the field."""

    @property
    def total_size(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_dict(self) -> dict[str, Any]:
        document = {
            "extraData": dict(self.extra_data),
            "type": MANIFEST_TYPE,
            "version": MANIFEST_VERSION,
            "jobId": self.job_id,
            "jobAttemptNumber": self.job_attempt_number,
            "taskID": self.task_id,
            "taskAttemptID": self.task_attempt_id,
            "taskAttemptDir": self.task_attempt_dir,
            "files": [entry.to_dict() for entry in self.files],
            "directories": [entry.to_dict() for entry in self.directories],
            "iostatistics": self.iostatistics.to_dict(),
        }
        if self.pending_uploads is not None:
            document["pendingUploads"] = [upload.to_dict() for upload in self.pending_uploads]
        return document

    def to_json(self) -> bytes:
        """The manifest as UTF-8 JSON bytes."""
        return dump_json(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes, origin: str = "<bytes>") -> TaskManifest:
        """Parse and validate a manifest; ``origin`` names the file in every error."""
        return cls.from_dict(load_json_document(data, origin), origin)

    @classmethod
    def from_dict(cls, raw: Any, origin: str = "<dict>") -> TaskManifest:
        """Decode a document exactly as ``schemas/task-manifest.schema.json`` defines it.

        Anything the schema refuses is a ``ManifestError`` naming ``origin`` and the field; so is a destination
        listed twice (a ``DuplicateDestinationError``).
        """
        manifest, files = cls.from_dict_with_columns(raw, origin)
        manifest.files = files.entries()
        return manifest

    @classmethod
    def from_dict_with_columns(cls, raw: Any, origin: str = "<dict>") -> tuple[TaskManifest, FileColumns]:
        """``from_dict`` with the file entries as columns, the manifest's ``files`` left empty: the job commit
        checks and spills whole lists, and an object per entry would be most of its cost."""
        if not isinstance(raw, dict):
            raise ManifestError(f"{origin}: not a task manifest: the document is not a JSON object")
        kind = raw.get("type")
        if kind != MANIFEST_TYPE:
            raise ManifestError(f"{origin}: not a task manifest: wrong type {kind!r}, expected {MANIFEST_TYPE!r}")
        version = raw.get("version")
        if version != MANIFEST_VERSION or isinstance(version, bool):
            raise ManifestError(f"{origin}: unsupported task manifest version {version!r}, expected 1")
        try:
            job_id = text(required(raw, "jobId"), "jobId", min_length=1)
            job_attempt_number = integer(required(raw, "jobAttemptNumber"), "jobAttemptNumber", minimum=0)
            task_id = text(required(raw, "taskID"), "taskID", min_length=1)
            task_attempt_id = text(required(raw, "taskAttemptID"), "taskAttemptID", min_length=1)
            task_attempt_dir = text(required(raw, "taskAttemptDir"), "taskAttemptDir", min_length=1)
            files = _file_columns(required(raw, "files"))
            manifest = cls(
                job_id,
                job_attempt_number,
                task_id,
                task_attempt_id,
                task_attempt_dir,
                directories=_dir_entries(required(raw, "directories")),
                iostatistics=IOStatisticsSnapshot.from_dict(required(raw, "iostatistics")),
                extra_data=text_map(required(raw, "extraData"), "extraData"),
            )
        except FieldError as error:
            raise ManifestError(f"{origin}: invalid task manifest: {error}") from None
        if "pendingUploads" in raw:
            manifest.pending_uploads = _pending_uploads(raw["pendingUploads"], len(files.dests), origin)
        if len(set(files.dests)) != len(files.dests):
            seen: set[str] = set()
            for dest in files.dests:
                if dest in seen:
                    raise DuplicateDestinationError(
                        f"{origin}: destination {dest} is written to by more than one file of task "
                        f"{manifest.task_attempt_id}"
                    )
                seen.add(dest)
        return manifest, files

    @classmethod
    def load(cls, url: str, storage_options: dict[str, Any] | None = None) -> TaskManifest:
        """Load a manifest from a plain path or fsspec URL."""
        from ._json import read_url

        return cls.from_json(read_url(url, storage_options), url)


class FileColumns(NamedTuple):
    """A manifest's file entries as four lists, entry ``i`` being ``sources[i]``, ``dests[i]``, ``sizes[i]`` and
    ``etags[i]``: how a job commit reads them, list by list."""

    sources: list[str]
    dests: list[str]
    sizes: list[int]
    etags: list[str | None]

    def entries(self) -> list[FileEntry]:
        return list(map(FileEntry, *self))

    @classmethod
    def of(cls, entries: list[FileEntry]) -> FileColumns:
        return cls(
            [entry.source for entry in entries],
            [entry.dest for entry in entries],
            [entry.size for entry in entries],
            [entry.etag for entry in entries],
        )


_SOURCE, _DEST, _SIZE = itemgetter("s"), itemgetter("d"), itemgetter("z")
_ETAG_OR_EMPTY = methodcaller("get", "e", "")


def _file_columns(value: Any) -> FileColumns:
    """``files``, the hot loop of a job commit (one entry per file): entries of the common shape are checked list
    by list, in C; any other shape goes entry by entry, which names the field at fault."""
    items = json_array(value, "files")
    if not items:
        return FileColumns([], [], [], [])
    if set(map(type, items)) == {dict}:
        try:
            sources, dests, sizes = list(map(_SOURCE, items)), list(map(_DEST, items)), list(map(_SIZE, items))
        except KeyError:
            pass
        else:
            etags: list[str] = list(map(_ETAG_OR_EMPTY, items))  # absent is "", null stays None and is refused
            if (
                set(map(type, sources)) == {str}
                and set(map(type, dests)) == {str}
                and set(map(type, sizes)) == {int}
                and set(map(type, etags)) == {str}
                and all(sources)
                and all(dests)
                and min(sizes) >= 0
            ):
                return FileColumns(sources, dests, sizes, [etag or None for etag in etags])
    return FileColumns.of([_file_entry(item, f"files[{index}]") for index, item in enumerate(items)])


def _file_entry(item: Any, field: str) -> FileEntry:
    """One entry, field by field: the slow path, taken for unusual shapes and to name what is wrong."""
    raw = json_object(item, field)
    source = text(required(raw, "s", field, "source"), f"{field}.s (source)", min_length=1)
    dest = text(required(raw, "d", field, "destination"), f"{field}.d (destination)", min_length=1)
    size = integer(required(raw, "z", field, "size"), f"{field}.z (size)", minimum=0)
    etag = text(raw["e"], f"{field}.e (etag)") if "e" in raw else None
    return FileEntry(source, dest, size, etag or None)


def _pending_uploads(value: Any, files: int, origin: str) -> list[PendingUpload]:
    """``pendingUploads``: one per file entry, in the same order; each checked field by field."""
    if not isinstance(value, list):
        raise ManifestError(f"{origin}: invalid task manifest: pendingUploads must be an array")
    if len(value) != files:
        raise ManifestError(
            f"{origin}: invalid task manifest: pendingUploads lists {len(value)} uploads for {files} file entries"
        )
    return [PendingUpload.from_dict(item, f"{origin}: pendingUploads[{index}]") for index, item in enumerate(value)]


_STATUSES = tuple(EntryStatus)
"""``EntryStatus`` by ordinal: the schema's 0 to 4, looked up without the enum's call."""


def _dir_entries(value: Any) -> list[DirEntry]:
    """``directories``: one entry per task and directory, so the common shape is tested inline as for files."""
    entries: list[DirEntry] = []
    append = entries.append
    statuses = _STATUSES
    for index, item in enumerate(json_array(value, "directories")):
        if type(item) is dict:
            path, status, level = item.get("d"), item.get("t"), item.get("l")
            if (
                type(path) is str
                and path
                and type(status) is int
                and 0 <= status < len(statuses)
                and type(level) is int
                and level >= 0
            ):
                append(DirEntry(path, statuses[status], level))
                continue
        append(_dir_entry(item, f"directories[{index}]"))
    return entries


def _dir_entry(item: Any, field: str) -> DirEntry:
    """One directory entry, field by field: the slow path, which names what is wrong."""
    raw = json_object(item, field)
    path = text(required(raw, "d", field, "directory"), f"{field}.d (directory)", min_length=1)
    status = integer(
        required(raw, "t", field, "status"), f"{field}.t (status)", minimum=0, maximum=len(EntryStatus) - 1
    )
    level = integer(required(raw, "l", field, "level"), f"{field}.l (level)", minimum=0)
    return DirEntry(path, EntryStatus(status), level)


__all__ = [
    "MANIFEST_SUFFIX",
    "MANIFEST_TYPE",
    "MANIFEST_VERSION",
    "TEMP_SUFFIX",
    "DirEntry",
    "EntryStatus",
    "FileColumns",
    "FileEntry",
    "TaskManifest",
]
