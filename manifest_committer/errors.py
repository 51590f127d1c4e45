"""Errors the committer raises on purpose.

Hierarchy::

    CommitterError                    root: every deliberate error; the message names the path, task or key
    ├── ConfigError                   a bad or unknown configuration key or value
    ├── JobStateError                 a call out of protocol order (job not set up, attempt dir exists, ...)
    ├── ManifestError                 a task manifest or summary that is missing, corrupt, of the wrong
    │   │                             type or version, or that points outside the job or destination
    │   └── DuplicateDestinationError two files claim one destination
    ├── MarkerError                   a marker file or directory that cannot be trusted or read (names file, line)
    ├── MarkerServerError             the marker server refused or failed a request, or cannot be reached
    ├── OutputConflictError           the destination holds something that is not this job's file
    ├── OutputValidationError         a committed file is missing or differs from its manifest entry
    ├── SourceChangedError            a file changed while the committer was moving it (not retried)
    ├── UploadOutcomeUnknownError     a retried upload completion whose result the evidence cannot decide
    ├── UnsupportedStoreError         the store cannot give the guarantees the protocol needs
    └── WorkerProcessError            a worker process of a job commit (io.processes) failed to start or died

Errors of one surface are defined beside it and exported from ``manifest_committer`` all the same:
``DestinationExistsError`` and ``TaskResultError`` (the writers), ``SchemaConflictError`` (a task's tables that
cannot share a schema), ``PartlyFailedError`` (a command over a destination that did part of its work).

Errors of the filesystem itself (``FileNotFoundError``, ``PermissionError``, backend errors) pass through
unchanged unless the committer can add which path or task they concern.
"""

from __future__ import annotations


class CommitterError(Exception):
    """Root of every error the committer raises on purpose."""


class ConfigError(CommitterError, ValueError):
    """A configuration key is unknown or its value is invalid."""


class JobStateError(CommitterError):
    """A job or task call was made in a state where the protocol forbids it."""


class ManifestError(CommitterError):
    """A manifest cannot be trusted, so nothing in the destination is touched."""


class DuplicateDestinationError(ManifestError):
    """Two manifest entries, in one task or across tasks, name the same destination file."""


class MarkerError(CommitterError):
    """A marker file or directory that cannot be trusted or read: the message names the file (and line)."""


class MarkerServerError(CommitterError):
    """The marker server refused or failed a request (a failed flush), or cannot be reached."""


class OutputConflictError(CommitterError):
    """The destination already holds a file or directory that this job did not write."""


class OutputValidationError(CommitterError):
    """A committed file does not match its manifest entry."""


class SourceChangedError(CommitterError):
    """A file changed while the store was moving it.

    Someone outside the job still writes it: a retry cannot help, and the job must not publish either version.
    """


class UnsupportedStoreError(CommitterError):
    """The filesystem lacks an operation the protocol depends on (such as a safe single-file rename)."""


class UploadOutcomeUnknownError(CommitterError):
    """A completion was retried and the object now at the key cannot be proved to be, or not to be, this upload's.

    Raised instead of guessing: treating another writer's object as ours would lose a file silently, and
    treating ours as a conflict would fail a job that committed.
    """


class WorkerProcessError(CommitterError):
    """A worker process of a job commit (``io.processes``) could not start, or died with store calls in flight.

    The commit stops as after a crash of its own process: what it moved is in its journal or in doubt, so running
    ``commit_job`` again finishes it and ``abort_job`` undoes it.
    """
