"""What every backend shares when deciding whether a retry may cure an error; each backend adds its own SDK's.

- Everywhere: ``TimeoutError``, ``ConnectionError`` (resets, refused, aborted), the ``OSError`` numbers fsspec
  backends use for throttling, and the connection errors of the HTTP libraries the backends run on (aiohttp,
  requests).
- Azure's errors are classified in ``store/azure.py``, GCS's in ``store/gcs.py``, each beside the code that
  raises them.

Never transient: not found (404), exists or conflict (409), precondition failed (412), and authentication or
permission errors (401/403): retrying cannot change their answer, and a retried conditional write would hide
what happened. The checks look at class names and attributes, not imports, so no cloud SDK is needed to use
this module.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from ..errors import CommitterError

RETRYABLE_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses that mean "not now": timeout, throttled, server error, bad gateway, busy, gateway timeout."""

RETRYABLE_ERRNOS = frozenset({errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.EREMOTEIO})
"""``OSError`` numbers that fsspec backends use for throttling and dropped connections."""

_CONNECTION_ERROR_NAMES = frozenset(
    {
        # aiohttp (gcsfs, adlfs transport): refused, reset, disconnected, timed out.
        "ClientConnectorError",
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        # requests (gcsfs maps a 502 to ProxyError).
        "ProxyError",
        "ReadTimeout",
        "ConnectTimeout",
    }
)


def class_names(error: BaseException) -> set[str]:
    """The names of an error's classes, so SDK errors can be recognised without importing the SDK."""
    return {cls.__name__ for cls in type(error).__mro__}


def status_code(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries (``status_code`` in azure-core, ``code`` in gcsfs), if any."""
    for attribute in ("status_code", "status", "code"):
        value = getattr(error, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def is_transient_generic(error: BaseException) -> bool:
    """Timeouts, lost connections and throttling ``OSError`` numbers: transient on every store."""
    if isinstance(error, FileNotFoundError | FileExistsError | PermissionError | IsADirectoryError):
        return False
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    if isinstance(error, OSError) and error.errno in RETRYABLE_ERRNOS:
        return True
    return bool(class_names(error) & _CONNECTION_ERROR_NAMES)


def caused_by_transient(error: BaseException, is_transient: Callable[[BaseException], bool]) -> bool:
    """Whether ``error``, or a wrapper's explicit cause, is transient.

    adlfs wraps a failed delete in ``RuntimeError("Failed to remove ...")`` with the service error as
    ``__cause__``. Only explicit causes are followed: an error raised *while handling* a timeout is not itself
    transient. Definite answers (not found, exists, no permission, the committer's own errors) are never
    transient, whatever caused them.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, FileNotFoundError | FileExistsError | PermissionError | CommitterError):
            return False
        if is_transient(current):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False
