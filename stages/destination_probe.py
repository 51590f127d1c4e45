"""A job set-up's first store call: the destination's status, where missing or refused credentials fail once.

Every protocol's set-up stage begins here, so that a store that has no credentials (botocore's
``NoCredentialsError``) or refuses them fails before any task writes, with the destination's URL and where the
store looks for credentials, whatever the protocol.
"""

from __future__ import annotations

from typing import Any

from ..errors import CommitterError, OutputConflictError
from ..retry import describe_error
from ..store import FileStatus
from .base import Stage


def destination_directory(stage: Stage[Any, Any]) -> FileStatus | None:
    """The status of ``stage``'s destination (``None``: not there yet); ``OutputConflictError`` if it is a file.

    ``CommitterError`` naming the destination's URL and the store's credential sources when the store refused the
    credentials or found none."""
    dest = stage.paths.dest
    try:
        found = stage.info(dest)
    except Exception as error:
        if not stage.is_auth_error(error):
            raise
        sources = stage.credential_sources or "the storage options of the destination"
        raise CommitterError(
            f"{stage.to_url(dest)}: the store refused the credentials, or none were found "
            f"({describe_error(error)}); check {sources}"
        ) from error
    if found is not None and not found.is_dir:
        raise OutputConflictError(f"{stage.to_url(dest)}: destination is a file, not a directory")
    return found
