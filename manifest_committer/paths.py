"""Where a job keeps its state: Hadoop 3.5's directory layout under the destination."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from .errors import ConfigError
from .manifest import MANIFEST_SUFFIX, TEMP_SUFFIX
from .success_data import SUCCESS_MARKER

TEMPORARY_DIR = "_temporary"
COMMIT_STARTED_MARKER = "commit-started"
COMMIT_FINISHED_MARKER = "commit-finished"
ROLLED_BACK_MARKER = "rolled-back"
JOURNAL_DIR = "journal"
PREVIOUS_SUCCESS = "previous-" + SUCCESS_MARKER
TRASH_DIR = ".trash"
"""Under ``_temporary``: committed jobs' state waiting to be deleted. A leading dot makes it no valid job id, so
whatever lists ``_temporary`` for jobs (``status``, ``rollback``) must skip it: it never holds a live job."""
TRASH_SEPARATOR = "="
"""Between the job id and the unique part of a trash entry's name: a character no id may hold."""
HIDDEN_PREFIXES = ("_", ".")
"""Names readers skip (Spark's and Hive's rule): commit records, ``_SUCCESS``, ``_temporary``, dot files."""
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]*\Z")


MAX_ID_LENGTH = 200
"""Longest id: a file name of the store holds 255 bytes, and a name such as ``<taskAttemptId>-manifest.json.tmp``
or ``summary-<jobId>.json`` adds to the id."""
ID_RULE = f"use at most {MAX_ID_LENGTH} letters, digits and . _ : + - (no '/', spaces or '..')"


def is_valid_id(value: object) -> bool:
    """Ids become directory and file names, so they must be plain names: no ``/``, spaces or ``..``, and short
    enough for a file name."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_ID_LENGTH
        and _ID_PATTERN.match(value) is not None
        and ".." not in value
    )


def is_hidden(name: str) -> bool:
    """A name readers skip: ``HIDDEN_PREFIXES``."""
    return name.startswith(HIDDEN_PREFIXES)


def trash_entry_job_id(name: str) -> str | None:
    """The job id of a trash entry's name ``<jobId>=<unique>``; ``None`` for any other name."""
    job_id, separator, unique = name.partition(TRASH_SEPARATOR)
    return job_id if separator and unique and is_valid_id(job_id) else None


def check_id(kind: str, value: str) -> str:
    """An id given to the API: a ``ConfigError`` naming ``kind`` unless ``is_valid_id``."""
    if not is_valid_id(value):
        shown = (
            f"{value[:40]!r}... ({len(value)} characters)"
            if isinstance(value, str) and len(value) > 60
            else repr(value)
        )
        raise ConfigError(f"{kind} {shown} is not a valid id: {ID_RULE}")
    return value


@dataclass(frozen=True, slots=True)
class JobPaths:
    """The paths of one job attempt, in the store's own (decoded) path form.

    ``$dest/_temporary/$jobId/$NN/{tasks/$taskAttemptId, manifests/$taskId-manifest.json}``, NN = ``%02d``.
    """

    dest: str
    job_id: str
    job_attempt: int = 0

    @property
    def temporary_dir(self) -> str:
        return posixpath.join(self.dest, TEMPORARY_DIR)

    @property
    def job_dir(self) -> str:
        return posixpath.join(self.temporary_dir, self.job_id)

    @property
    def job_attempt_dir(self) -> str:
        return posixpath.join(self.job_dir, f"{self.job_attempt:02d}")

    @property
    def manifest_dir(self) -> str:
        return posixpath.join(self.job_attempt_dir, "manifests")

    @property
    def task_attempts_dir(self) -> str:
        return posixpath.join(self.job_attempt_dir, "tasks")

    @property
    def success_path(self) -> str:
        return posixpath.join(self.dest, SUCCESS_MARKER)

    @property
    def temp_success_path(self) -> str:
        return posixpath.join(self.job_attempt_dir, SUCCESS_MARKER + TEMP_SUFFIX)

    @property
    def commit_started_path(self) -> str:
        """What a job commit accepted, written before it first changes the destination: a rerun commits exactly
        that, and abort reverts exactly that."""
        return posixpath.join(self.job_attempt_dir, COMMIT_STARTED_MARKER)

    @property
    def rolled_back_path(self) -> str:
        """The fence of a rollback: written before it deletes anything of a job it judged dead, and checked by a
        job commit right after it writes ``commit-started``, so a driver paused past its lease never publishes
        files a rollback deleted (one side always sees the other's record)."""
        return posixpath.join(self.job_attempt_dir, ROLLED_BACK_MARKER)

    @property
    def commit_finished_path(self) -> str:
        """The job's summary, written once the output is complete (and ``_SUCCESS`` saved), so abort never
        reverts a committed job, even without ``_SUCCESS`` or after another job replaced it; deleted last."""
        return posixpath.join(self.job_attempt_dir, COMMIT_FINISHED_MARKER)

    @property
    def journal_dir(self) -> str:
        """The job commit's write-ahead records of what it changes in the destination (``stages/journal.py``)."""
        return posixpath.join(self.job_attempt_dir, JOURNAL_DIR)

    @property
    def previous_success_path(self) -> str:
        """Where a job commit keeps the ``_SUCCESS`` it replaces, so an abort before the commit point can put it
        back."""
        return posixpath.join(self.job_attempt_dir, PREVIOUS_SUCCESS)

    @property
    def trash_dir(self) -> str:
        """``_temporary/.trash``: where a committed job's state is moved in one call, to be deleted after
        ``commit_job`` returns (``stages/cleanup.py``)."""
        return posixpath.join(self.temporary_dir, TRASH_DIR)

    def trash_entry(self, unique: str) -> str:
        """``_temporary/.trash/<jobId>=<unique>``: this job's directory once moved into the trash; the job id
        first, so a rerun finds its own ``commit-finished`` there with one listing."""
        return posixpath.join(self.trash_dir, self.job_id + TRASH_SEPARATOR + unique)

    def task_attempt_dir(self, task_attempt_id: str) -> str:
        return posixpath.join(self.task_attempts_dir, task_attempt_id)

    def manifest_path(self, task_id: str) -> str:
        return posixpath.join(self.manifest_dir, task_id + MANIFEST_SUFFIX)

    def temp_manifest_path(self, task_attempt_id: str) -> str:
        return posixpath.join(self.manifest_dir, task_attempt_id + MANIFEST_SUFFIX + TEMP_SUFFIX)
