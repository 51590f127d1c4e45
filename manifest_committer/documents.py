"""The JSON documents the library writes and reads, and the JSON Schema of each, shipped in ``schemas/``.

The schemas are the one definition of every format: what each field means, which are required,
their types and patterns. This module names the documents (``DocumentKind``), loads their schemas from the
installed package, tells which document a file is by its name and place (``document_kind_of``), and validates a
parsed document against its schema (``schema_errors``, ``check_document``)::

    from manifest_committer.documents import DocumentKind, check_document, document_kind_of, schema

    schema(DocumentKind.TASK_MANIFEST)["title"]                      # 'TaskManifest'
    document_kind_of("s3://b/out/_temporary/job-1/00/commit-started")  # DocumentKind.COMMIT_STARTED
    check_document(DocumentKind.SUCCESS_DATA, document, "s3://b/out/_SUCCESS")   # ManifestError if invalid

Validation needs the ``jsonschema`` package (the ``schemas`` extra); loading schemas does not. The library's own
readers do not validate with these schemas: their hand-written decoders accept what the schemas accept
(``tests/test_schemas.py`` checks that), at a fraction of a generic validator's cost.
"""

from __future__ import annotations

import enum
import functools
import json
import posixpath
import re
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import CommitterError, ManifestError
from .manifest import MANIFEST_SUFFIX, TEMP_SUFFIX
from .markers.layout import HEARTBEAT_FILE, MARKERS_DIR, SERVER_STATE_FILE, TASK_HEARTBEATS_DIR
from .paths import (
    COMMIT_FINISHED_MARKER,
    COMMIT_STARTED_MARKER,
    JOURNAL_DIR,
    PREVIOUS_SUCCESS,
    TEMPORARY_DIR,
)
from .protocols.file_output.layout import (
    FILE_OUTPUT_COMMIT_FINISHED,
    FILE_OUTPUT_COMMIT_STARTED,
    FILE_OUTPUT_PREVIOUS_SUCCESS,
    FILE_OUTPUT_TASK_REPORTS,
)
from .protocols.transactional.records import committed_record_tid
from .protocols.upload.records import PENDING_DIR, PENDING_SUFFIX, STARTED_DIR
from .success_data import SUCCESS_MARKER

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Registry

SCHEMA_SUFFIX = ".schema.json"


class DocumentKind(enum.Enum):
    """Every JSON document the library writes or reads; the value is the schema's file name without suffix."""

    TASK_MANIFEST = "task-manifest"
    """``manifests/<taskId>-manifest.json`` (and the upload protocol's ``<taskAttemptId>-manifest.json``, v1/v2's
    ``_tasks/<taskId>.json``, the copies in ``diagnostics.manifest.directory``); Hadoop's format."""
    SUCCESS_DATA = "success-data"
    """``_SUCCESS``, ``summary-<jobId>.json``, ``commit-finished``, ``_COMMIT_FINISHED.json`` and a replaced
    ``_SUCCESS`` kept aside; Hadoop's format."""
    STATUS = "status"
    """What ``manifest-committer status DEST --json`` prints."""
    COMMITTED_RECORD = "committed-record"
    """The transactional protocol's ``_committed_<tid>``; Databricks' format."""
    PENDING_UPLOAD_RECORD = "pending-upload-record"
    """The upload protocol's ``pending/<taskAttemptId>/<token>.pending``."""
    UPLOAD_STARTED = "upload-started"
    """The upload protocol's ``uploads/<name>``: one multipart upload the job started."""
    COMMIT_STARTED = "commit-started"
    """The job commit's ``commit-started`` record (manifest, transactional and upload protocols)."""
    JOURNAL_UNIT_INTENT = "journal-unit-intent"
    """``journal/<run>/<taskAttemptId>-<start>.intent``."""
    JOURNAL_UNIT_DONE = "journal-unit-done"
    """``journal/<run>/<taskAttemptId>-<start>.done``."""
    JOURNAL_DIRECTORIES = "journal-directories"
    """``journal/dirs-<run>.json``."""
    FILE_OUTPUT_COMMIT_STARTED = "file-output-commit-started"
    """The v1/v2 protocols' ``_temporary/<appAttempt>/_COMMIT_STARTED.json``."""
    MARKER_SERVER_STATE = "marker-server-state"
    """``markers/server.json``: where the batched-marker server listens."""
    HEARTBEAT = "heartbeat"
    """``markers/heartbeat`` and ``heartbeats/<taskAttemptId>``."""
    MARKER_CREATE_REQUEST = "marker-create-request"
    """The body of the marker server's ``POST /v1/markers/create``."""
    MARKER_CREATE_ANSWER = "marker-create-answer"
    """The marker server's 200 answer to ``POST /v1/markers/create``."""
    MARKER_ERROR_ANSWER = "marker-error-answer"
    """The marker server's answer to a request it did not fulfil (400, 404, 500, 503)."""
    MARKER_PING_ANSWER = "marker-ping-answer"
    """The marker server's 200 answer to ``GET /v1/markers/ping``."""
    MARKER_LIST_ANSWER = "marker-list-answer"
    """The marker server's 200 answer to ``GET /v1/markers/all``."""
    ENTRY_CHUNK = "entry-chunk"
    """One chunk of a job commit's local spill file ``manifest-committer-<jobId>-<pid>-<random>.entries``."""
    SPARK_STORAGE_OPTIONS = "spark-storage-options"
    """The Spark data source's ``storage_options`` option."""

    @property
    def schema_file(self) -> str:
        """The schema's file name in ``schemas/`` (``task-manifest.schema.json``)."""
        return self.value + SCHEMA_SUFFIX


@functools.cache
def schema_text(kind: DocumentKind) -> str:
    """The schema of ``kind`` as shipped, read once from the installed package."""
    return (resources.files(__package__) / "schemas" / kind.schema_file).read_text(encoding="utf-8")


def schema(kind: DocumentKind) -> dict[str, Any]:
    """The schema of ``kind``, parsed: a fresh copy the caller may change."""
    parsed: dict[str, Any] = json.loads(schema_text(kind))
    return parsed


# --- which document a file is ---------------------------------------------------------------------------------


class _Place(NamedTuple):
    """A file's name and the names of the two directories above it."""

    name: str
    parent: str
    grandparent: str


_Rule = tuple[Callable[[_Place], bool], DocumentKind]

_SUCCESS_NAMES = frozenset(
    {
        SUCCESS_MARKER + TEMP_SUFFIX,
        PREVIOUS_SUCCESS,
        FILE_OUTPUT_PREVIOUS_SUCCESS,
        COMMIT_FINISHED_MARKER,
        FILE_OUTPUT_COMMIT_FINISHED,
    }
)
_SUMMARY_NAME = re.compile(r"summary-[^/]+\.json\Z")
_TWO_DIGITS_OR_MORE = re.compile(r"[0-9]{2,}\Z")
_JOURNAL_DIRECTORIES = re.compile(r"dirs-[0-9]{2,}\.json\Z")
_JSON_SUFFIXES = (".json", ".json" + TEMP_SUFFIX)

_ANYWHERE: list[_Rule] = [
    (
        lambda place: place.name == SUCCESS_MARKER or _SUMMARY_NAME.match(place.name) is not None,
        DocumentKind.SUCCESS_DATA,
    ),
    (lambda place: place.name.endswith((MANIFEST_SUFFIX, MANIFEST_SUFFIX + TEMP_SUFFIX)), DocumentKind.TASK_MANIFEST),
    (lambda place: committed_record_tid(place.name) is not None, DocumentKind.COMMITTED_RECORD),
]
"""Documents in the destination or a directory of the user's choosing (summary reports, kept manifests)."""

_UNDER_TEMPORARY: list[_Rule] = [
    (lambda place: place.name in _SUCCESS_NAMES, DocumentKind.SUCCESS_DATA),
    (
        lambda place: place.parent == FILE_OUTPUT_TASK_REPORTS and place.name.endswith(_JSON_SUFFIXES),
        DocumentKind.TASK_MANIFEST,
    ),
    (lambda place: place.name == COMMIT_STARTED_MARKER, DocumentKind.COMMIT_STARTED),
    (lambda place: place.name == FILE_OUTPUT_COMMIT_STARTED, DocumentKind.FILE_OUTPUT_COMMIT_STARTED),
    (
        lambda place: place.parent == JOURNAL_DIR and _JOURNAL_DIRECTORIES.match(place.name) is not None,
        DocumentKind.JOURNAL_DIRECTORIES,
    ),
    (lambda place: _in_journal_run(place) and place.name.endswith(".intent"), DocumentKind.JOURNAL_UNIT_INTENT),
    (lambda place: _in_journal_run(place) and place.name.endswith(".done"), DocumentKind.JOURNAL_UNIT_DONE),
    (
        lambda place: place.grandparent == PENDING_DIR and place.name.endswith(PENDING_SUFFIX),
        DocumentKind.PENDING_UPLOAD_RECORD,
    ),
    (
        lambda place: place.parent == STARTED_DIR and _TWO_DIGITS_OR_MORE.match(place.grandparent) is not None,
        DocumentKind.UPLOAD_STARTED,
    ),
    (lambda place: place.parent == MARKERS_DIR and place.name == SERVER_STATE_FILE, DocumentKind.MARKER_SERVER_STATE),
    (lambda place: place.parent == MARKERS_DIR and place.name == HEARTBEAT_FILE, DocumentKind.HEARTBEAT),
    (
        lambda place: place.parent == TASK_HEARTBEATS_DIR and _TWO_DIGITS_OR_MORE.match(place.grandparent) is not None,
        DocumentKind.HEARTBEAT,
    ),
]
"""Documents of a job's state: only below a ``_temporary`` directory."""


def _in_journal_run(place: _Place) -> bool:
    return place.grandparent == JOURNAL_DIR and _TWO_DIGITS_OR_MORE.match(place.parent) is not None


def document_kind_of(path: str) -> DocumentKind | None:
    """The document a file is, judged by its name and place as this library lays them out; ``None`` for any
    other file (data files, markers, ``MARKERS<i>``, the upload protocol's ``protocol`` sign, ``_JOB``, empty
    ``_started_<tid>`` and ``run-<n>`` records: none of them is JSON).

    ``path`` is a URL, a store path or a local path. Documents of a job's state count only under a
    ``_temporary`` directory, so a data file that happens to share a name is not taken for one.
    """
    path = path.rstrip("/")
    parent_path = posixpath.dirname(path)
    place = _Place(
        posixpath.basename(path), posixpath.basename(parent_path), posixpath.basename(posixpath.dirname(parent_path))
    )
    if not place.name or place.name.startswith("."):
        return None
    rules = _ANYWHERE + _UNDER_TEMPORARY if f"/{TEMPORARY_DIR}/" in f"/{path}" else _ANYWHERE
    return next((kind for matches, kind in rules if matches(place)), None)


# --- validation (needs jsonschema) -----------------------------------------------------------------------------


@functools.cache
def schema_registry() -> Registry[Any]:
    """Every shipped schema under its ``$id``, so that one schema's ``$ref`` to another resolves offline."""
    try:
        from referencing import Registry, Resource
    except ImportError as error:  # pragma: no cover - jsonschema brings referencing
        raise _missing(error) from None
    resources_by_id = [(schema(kind)["$id"], Resource.from_contents(schema(kind))) for kind in DocumentKind]
    return Registry().with_resources(resources_by_id)


@functools.cache
def validator(kind: DocumentKind) -> Validator:
    """A Draft 2020-12 validator of ``kind``, built once."""
    try:
        from jsonschema import Draft202012Validator
    except ImportError as error:
        raise _missing(error) from None
    return Draft202012Validator(schema(kind), registry=schema_registry())


def schema_errors(kind: DocumentKind, document: Any) -> list[str]:
    """What is wrong with ``document`` by the schema of ``kind``: one message per error, each starting with
    the field's path (``files[3].z: -1 is less than the minimum of 0``); empty when it is valid."""
    return [
        f"{_field_path(error.absolute_path)}: {error.message}"
        for error in sorted(validator(kind).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]


def check_document(kind: DocumentKind, document: Any, origin: str) -> None:
    """A ``ManifestError`` naming ``origin`` and the first field at fault unless ``document`` is valid."""
    errors = schema_errors(kind, document)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ManifestError(f"{origin}: not a valid {kind.value} document: {errors[0]}{more}")


def _field_path(path: Any) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "(document)"


def _missing(error: ImportError) -> CommitterError:
    return CommitterError(
        f"validating documents needs the jsonschema package, the 'schemas' extra ({error}): "
        "pip install jsonschema, or pip install '.[schemas]' in a clone"
    )


__all__ = [
    "SCHEMA_SUFFIX",
    "DocumentKind",
    "check_document",
    "document_kind_of",
    "schema",
    "schema_errors",
    "schema_registry",
    "schema_text",
    "validator",
]
