"""Which store errors a retry may cure, per backend: throttling, timeouts, server errors and lost connections.

Each backend reports throttling differently (measured against Azurite and fake-gcs-server, and from the SDKs):

- Azure (``azure-core``): ``HttpResponseError`` with ``status_code`` 408/429/500/502/503/504 or an
  ``error_code`` such as ``ServerBusy`` or ``OperationTimedOut``; ``ServiceRequestError`` and
  ``ServiceResponseError`` when the connection fails or drops.
- GCS (``gcsfs``): ``gcsfs.retry.HttpError`` with ``.code`` 408/429/500/502/503/504; aiohttp's client
  errors and ``asyncio.TimeoutError`` when the connection fails; ``requests``' ``ProxyError`` for a 502.
- Everywhere: ``TimeoutError``, ``ConnectionError`` (resets, refused, aborted).

Never transient: not found (404), exists or conflict (409), precondition failed (412), and authentication or
permission errors (401/403): retrying cannot change their answer, and a retried conditional write would hide
what happened. The checks look at class names and attributes, not imports, so no cloud SDK is needed to use
this module.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

RETRYABLE_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses that mean "not now": timeout, throttled, server error, bad gateway, busy, gateway timeout."""

AZURE_RETRYABLE_ERROR_CODES = frozenset(
    {"ServerBusy", "OperationTimedOut", "InternalError", "IngressOverAccountLimit", "EgressOverAccountLimit"}
)
"""Azure Storage error codes (``x-ms-error-code``) that a retry may cure."""

RETRYABLE_ERRNOS = frozenset({errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.EREMOTEIO})
"""``OSError`` numbers that fsspec backends use for throttling and dropped connections."""

_CONNECTION_ERROR_NAMES = frozenset(
    {
        # azure-core: the request never reached the service, or its answer never came back.
        "ServiceRequestError",
        "ServiceResponseError",
        "ServiceRequestTimeoutError",
        "ServiceResponseTimeoutError",
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


def _class_names(error: BaseException) -> set[str]:
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
    return bool(_class_names(error) & _CONNECTION_ERROR_NAMES)


def is_transient_azure(error: BaseException) -> bool:
    """An Azure Blob error (azure-core or adlfs) that a retry may cure."""
    if is_transient_generic(error):
        return True
    names = _class_names(error)
    if "HttpResponseError" not in names:
        return False
    if {"ResourceNotFoundError", "ResourceExistsError", "ResourceModifiedError", "ClientAuthenticationError"} & names:
        return False
    if getattr(error, "error_code", None) in AZURE_RETRYABLE_ERROR_CODES:
        return True
    return status_code(error) in RETRYABLE_STATUS_CODES


def is_transient_gcs(error: BaseException) -> bool:
    """A GCS error (gcsfs) that a retry may cure."""
    if is_transient_generic(error):
        return True
    names = _class_names(error)
    if "HttpError" in names:
        return status_code(error) in RETRYABLE_STATUS_CODES
    return "ChecksumError" in names  # a download that arrived damaged


def caused_by_transient(error: BaseException, is_transient: Callable[[BaseException], bool]) -> bool:
    """Whether ``error``, or a wrapper's explicit cause, is transient.

    adlfs wraps a failed delete in ``RuntimeError("Failed to remove ...")`` with the service error as
    ``__cause__``. Only explicit causes are followed: an error raised *while handling* a timeout is not itself
    transient. Definite answers (not found, exists, no permission) are never transient, whatever caused them.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, FileNotFoundError | FileExistsError | PermissionError):
            return False
        if is_transient(current):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False
