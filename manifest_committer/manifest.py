"""The task manifest: what one committed task attempt asks the job commit to rename.

Key-for-key compatible with Hadoop's ``TaskManifest`` JSON (``schemas/task-manifest.schema.json``): file entries
use the short keys ``s``/``d``/``z``/``e``, directory entries ``d``/``t``/``l``. Readers ignore unknown keys.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ._json import dump_json, load_json_document
from .errors import DuplicateDestinationError, ManifestError
from .iostatistics import IOStatisticsSnapshot

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
        """Out-of-range values mean unknown, as in Hadoop."""
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

    @property
    def total_size(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
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

    def to_json(self) -> bytes:
        """The manifest as UTF-8 JSON bytes."""
        return dump_json(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes, origin: str = "<bytes>") -> TaskManifest:
        """Parse and validate a manifest; ``origin`` names the file in every error."""
        return cls.from_dict(load_json_document(data, origin), origin)

    @classmethod
    def from_dict(cls, raw: Any, origin: str = "<dict>") -> TaskManifest:
        if not isinstance(raw, dict):
            raise ManifestError(f"{origin}: not a task manifest: the document is not a JSON object")
        kind = raw.get("type")
        if kind != MANIFEST_TYPE:
            raise ManifestError(f"{origin}: not a task manifest: wrong type {kind!r}, expected {MANIFEST_TYPE!r}")
        version = raw.get("version")
        if version != MANIFEST_VERSION:
            raise ManifestError(f"{origin}: unsupported task manifest version {version!r}, expected 1")
        try:
            files = [_file_entry(item) for item in raw.get("files") or ()]
            directories = [_dir_entry(item) for item in raw.get("directories") or ()]
            extra = raw.get("extraData") or {}
            if not isinstance(extra, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in extra.items()
            ):
                raise ValueError("extraData must map strings to strings")
            manifest = cls(
                job_id=_text(raw, "jobId"),
                job_attempt_number=_int(raw, "jobAttemptNumber", 0),
                task_id=_text(raw, "taskID"),
                task_attempt_id=_text(raw, "taskAttemptID"),
                task_attempt_dir=_text(raw, "taskAttemptDir"),
                files=files,
                directories=directories,
                iostatistics=IOStatisticsSnapshot.from_dict(raw.get("iostatistics")),
                extra_data=dict(extra),
            )
        except (ValueError, TypeError, KeyError) as error:
            raise ManifestError(f"{origin}: invalid task manifest: {error}") from error
        seen: set[str] = set()
        for entry in files:
            if entry.dest in seen:
                raise DuplicateDestinationError(
                    f"{origin}: destination {entry.dest} is written to by more than one file of task "
                    f"{manifest.task_attempt_id}"
                )
            seen.add(entry.dest)
        return manifest

    @classmethod
    def load(cls, url: str, storage_options: dict[str, Any] | None = None) -> TaskManifest:
        """Load a manifest from a plain path or fsspec URL."""
        from ._json import read_url

        return cls.from_json(read_url(url, storage_options), url)


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _int(raw: dict[str, Any], key: str, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return value


def _file_entry(item: Any) -> FileEntry:
    if not isinstance(item, dict):
        raise ValueError(f"file entry {item!r} is not an object")
    source, dest, size, etag = item.get("s"), item.get("d"), item.get("z"), item.get("e")
    if not isinstance(source, str) or not source:
        raise ValueError(f"file entry {item!r}: 's' (source) must be a non-empty string")
    if not isinstance(dest, str) or not dest:
        raise ValueError(f"file entry {item!r}: 'd' (destination) must be a non-empty string")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"file entry {dest}: 'z' (size) must be an integer >= 0, got {size!r}")
    if etag is not None and not isinstance(etag, str):
        raise ValueError(f"file entry {dest}: 'e' (etag) must be a string")
    return FileEntry(source, dest, size, etag or None)


def _dir_entry(item: Any) -> DirEntry:
    if not isinstance(item, dict):
        raise ValueError(f"directory entry {item!r} is not an object")
    path, status, level = item.get("d"), item.get("t", 0), item.get("l", 0)
    if not isinstance(path, str) or not path:
        raise ValueError(f"directory entry {item!r}: 'd' must be a non-empty string")
    if isinstance(status, bool) or not isinstance(status, int):
        raise ValueError(f"directory entry {path}: 't' must be an integer")
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"directory entry {path}: 'l' (level) must be an integer >= 0")
    return DirEntry(path, EntryStatus.of(status), level)


__all__ = [
    "MANIFEST_SUFFIX",
    "MANIFEST_TYPE",
    "MANIFEST_VERSION",
    "TEMP_SUFFIX",
    "DirEntry",
    "EntryStatus",
    "FileEntry",
    "TaskManifest",
]
