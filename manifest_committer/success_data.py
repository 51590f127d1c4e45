"""``_SUCCESS`` and summary reports: the JSON document people read after a job, in Hadoop's S3A format."""

from __future__ import annotations

import datetime
import getpass
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from ._decode import (
    FieldError,
    boolean,
    integer,
    integer_map,
    json_array,
    optional_text,
    required,
    text,
    text_map,
)
from ._json import dump_json, load_json_document
from .errors import ManifestError
from .iostatistics import IOStatisticsSnapshot

SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
COMMITTER_NAME = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
SUCCESS_FILENAME_LIMIT = 100
SUCCESS_MARKER = "_SUCCESS"

# Diagnostic keys (Hadoop's DiagnosticKeys).
DIAGNOSTIC_STAGE = "stage"
DIAGNOSTIC_PRINCIPAL = "principal"
DIAGNOSTIC_EXCEPTION = "exception"
DIAGNOSTIC_STACKTRACE = "stacktrace"
DIAGNOSTIC_MANIFESTS = "manifests"


def _principal() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(slots=True)
class SuccessData:
    """What ``_SUCCESS`` (and ``summary-<jobId>.json``) holds."""

    job_id: str
    success: bool = True
    job_id_source: str = "JobID"
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    date: str = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat())
    hostname: str = field(default_factory=socket.gethostname)
    committer: str = COMMITTER_NAME
    description: str | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    filenames: list[str] = field(default_factory=list)
    iostatistics: IOStatisticsSnapshot = field(default_factory=IOStatisticsSnapshot)
    state: str | None = None
    stage: str | None = None

    @classmethod
    def create(cls, job_id: str, job_id_source: str, stage: str) -> SuccessData:
        return cls(
            job_id=job_id,
            job_id_source=job_id_source,
            diagnostics={DIAGNOSTIC_PRINCIPAL: _principal(), DIAGNOSTIC_STAGE: stage},
        )

    def record_failure(self, error: BaseException) -> None:
        """Mark the report failed, with the exception and its stack trace as Hadoop does."""
        import traceback

        self.success = False
        self.diagnostics[DIAGNOSTIC_EXCEPTION] = f"{type(error).__module__}.{type(error).__qualname__}: {error}"
        self.diagnostics[DIAGNOSTIC_STACKTRACE] = "".join(
            traceback.format_exception(type(error), error, error.__traceback__)
        )

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "name": SUCCESS_NAME,
            "timestamp": self.timestamp,
            "success": self.success,
            "date": self.date,
            "hostname": self.hostname,
            "committer": self.committer,
        }
        if self.description is not None:
            raw["description"] = self.description
        raw.update(
            {
                "jobId": self.job_id,
                "jobIdSource": self.job_id_source,
                "metrics": dict(self.metrics),
                "diagnostics": dict(sorted(self.diagnostics.items())),
                "filenames": list(self.filenames),
                "iostatistics": self.iostatistics.to_dict(),
            }
        )
        if self.state is not None:
            raw["state"] = self.state
        if self.stage is not None:
            raw["stage"] = self.stage
        return raw

    def to_json(self) -> bytes:
        """The document as UTF-8 JSON bytes."""
        return dump_json(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes, origin: str = "<bytes>") -> SuccessData:
        """Parse a ``_SUCCESS`` or summary report; ``origin`` names the file in every error.

        A zero-byte ``_SUCCESS`` (FileOutputCommitter's marker) is reported as such, not as corrupt JSON.
        """
        if not data:
            raise ManifestError(
                f"{origin}: zero-byte _SUCCESS marker: written by a committer that keeps no summary "
                "(such as FileOutputCommitter)"
            )
        return cls.from_dict(load_json_document(data, origin), origin)

    @classmethod
    def from_dict(cls, raw: Any, origin: str = "<dict>") -> SuccessData:
        """Decode a document exactly as ``schemas/success-data.schema.json`` defines it; anything the schema
        refuses is a ``ManifestError`` naming ``origin`` and the field."""
        if not isinstance(raw, dict):
            raise ManifestError(f"{origin}: not a success file: the document is not a JSON object")
        name = raw.get("name")
        if name != SUCCESS_NAME:
            raise ManifestError(f"{origin}: not a success file: wrong name {name!r}, expected {SUCCESS_NAME!r}")
        try:
            diagnostics = text_map(required(raw, "diagnostics"), "diagnostics")
            for key in (DIAGNOSTIC_STAGE, DIAGNOSTIC_PRINCIPAL):
                required(diagnostics, key, "diagnostics")
            filenames = json_array(required(raw, "filenames"), "filenames")
            if len(filenames) > SUCCESS_FILENAME_LIMIT:
                raise FieldError("filenames", f"lists {len(filenames)} files, at most {SUCCESS_FILENAME_LIMIT}")
            return cls(
                job_id=text(required(raw, "jobId"), "jobId"),
                success=boolean(required(raw, "success"), "success"),
                job_id_source=text(required(raw, "jobIdSource"), "jobIdSource"),
                timestamp=integer(required(raw, "timestamp"), "timestamp", minimum=0),
                date=text(required(raw, "date"), "date"),
                hostname=text(required(raw, "hostname"), "hostname"),
                committer=text(required(raw, "committer"), "committer"),
                description=optional_text(raw, "description"),
                metrics=integer_map(required(raw, "metrics"), "metrics"),
                diagnostics=diagnostics,
                filenames=[text(item, f"filenames[{index}]", min_length=1) for index, item in enumerate(filenames)],
                iostatistics=IOStatisticsSnapshot.from_dict(required(raw, "iostatistics")),
                state=optional_text(raw, "state"),
                stage=optional_text(raw, "stage"),
            )
        except FieldError as error:
            raise ManifestError(f"{origin}: invalid success file: {error}") from None

    @classmethod
    def load(cls, url: str, storage_options: dict[str, Any] | None = None) -> SuccessData:
        """Load ``_SUCCESS`` or a summary report from a plain path or fsspec URL."""
        from ._json import read_url

        return cls.from_json(read_url(url, storage_options), url)
