"""Store errors that cross from a worker process to the job commit, keeping what the commit decides by.

The commit settles a failed call by the error's class (``FileExistsError``, ``FileNotFoundError``, the committer's
own errors), by whether a retry may cure it and whether credentials were refused, and shows its message. An SDK's
error often cannot be pickled, and pickling drops ``__cause__``, which the stores follow to classify an error; so
the worker classifies each error with its own store first and sends it with the answers attached: as it is when
it is a built-in or committer error that pickles, else as ``WorkerStoreError`` with its class name and message.
"""

from __future__ import annotations

import errno
import pickle
from typing import Any, Protocol

from ...retry import describe_error

TRANSIENT = "transient_in_worker"
AUTH_ERROR = "auth_error_in_worker"
"""Attributes of an error from a worker: what the worker's store said of it."""


class ErrorJudge(Protocol):
    """What the worker asks of its store about an error (``StoreOperations`` answers both)."""

    def is_transient(self, error: BaseException) -> bool: ...

    def is_auth_error(self, error: BaseException) -> bool: ...


class WorkerStoreError(OSError):
    """A store error from a worker process whose own class cannot cross processes: ``Type: message``."""


def _crosses_as_it_is(error: BaseException) -> bool:
    module = type(error).__module__
    if module != "builtins" and not module.startswith("manifest_committer."):
        return False
    try:
        copy = pickle.loads(pickle.dumps(error))
    except Exception:
        return False
    return type(copy) is type(error) and str(copy) == str(error)


def portable(error: BaseException, store: ErrorJudge) -> Exception:
    """``error`` (raised by ``store`` in this worker) in a form the job commit's process can unpickle and judge."""
    transient, auth_error = _judge(store.is_transient, error), _judge(store.is_auth_error, error)
    if isinstance(error, Exception) and _crosses_as_it_is(error):
        carried: Exception = error
    else:
        number = getattr(error, "errno", None)
        carried = WorkerStoreError(number if isinstance(number, int) else errno.EIO, describe_error(error))
    setattr(carried, TRANSIENT, transient)
    setattr(carried, AUTH_ERROR, auth_error)
    return carried


def _judge(question: Any, error: BaseException) -> bool:
    try:
        return bool(question(error))
    except Exception:
        return False


def judged_in_worker(error: BaseException, attribute: str) -> bool | None:
    """What the worker's store said of ``error`` (``TRANSIENT`` or ``AUTH_ERROR``); ``None`` for a local error."""
    answer = getattr(error, attribute, None)
    return answer if isinstance(answer, bool) else None
