"""Errors the committer raises on purpose.

Hierarchy::

    CommitterError                    root: every deliberate error; the message names the path, task or key
    ├── ConfigError                   a bad or unknown configuration key or value
    ├── JobStateError                 a call out of protocol order (job not set up, attempt dir exists, ...)
    ├── ManifestError                 a task manifest or summary that is missing, corrupt, of the wrong
    │   │                             type or version, or that points outside the job or destination
    │   └── DuplicateDestinationError two files claim one destination
    ├── OutputConflictError           the destination holds something that is not this job's file
    ├── OutputValidationError         a committed file is missing or differs from its manifest entry
    ├── SourceChangedError            a file changed while the committer was moving it (not retried)
    └── UnsupportedStoreError         the store cannot give the guarantees the protocol needs

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
