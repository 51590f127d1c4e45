"""A store wrapper that injects faults and latency, for the committer's tests and users' own chaos tests.

Faults are data: which operation, which paths, before or after the call takes effect, what to raise, how often.
Everything random comes from one seeded generator, so a failing run can be replayed exactly.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from .operations import NO_HINTS, RenameHint, StoreOperations, calls_one_by_one, renames_one_by_one
from .pending_upload import PendingUpload
from .wrapping import WrappingStore

UPLOAD_OPERATIONS = ("put_if_absent", "complete_upload", "holds", "abort_upload", "list_uploads")
"""The upload protocol's S3 calls (``store/s3.py``); only an S3 store answers them."""
OPERATIONS = (
    "info",
    "list_dir",
    "mkdirs",
    "rename_file",
    "rename_dir",
    "delete_file",
    "delete_dir",
    "remove_empty_dir",
    "read_bytes",
    "write_bytes",
    "append_bytes",
    "copy_file",
    *UPLOAD_OPERATIONS,
)

A = TypeVar("A")
Item = TypeVar("Item")


def _timeout() -> BaseException:
    return TimeoutError("injected timeout")


@dataclass(frozen=True)
class Fault:
    """One rule: calls of ``operation`` on a path containing ``path_contains`` fail.

    ``when="before"``: the call never reaches the store. ``when="after"``: the call takes effect and then
    raises, like a rename whose answer was lost. ``times`` bounds how many calls fail (``None``: no bound);
    ``rate`` is the chance that a matching call fails.
    """

    operation: str
    path_contains: str = ""
    when: Literal["before", "after"] = "before"
    error: Callable[[], BaseException] = _timeout
    times: int | None = 1
    rate: float = 1.0

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"unknown store operation {self.operation!r}; one of {', '.join(OPERATIONS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must lie in [0, 1], got {self.rate}")


class FaultInjectingStore(WrappingStore):
    """Wraps another store; every call may sleep ``latency`` seconds and may fail as the faults say.

    A batch of renames or upload completions is in flight at once where the store takes batches
    (``concurrent_calls``; under latency, also a store whose calls take microseconds, such as ``memory://``), so
    it sleeps ``latency`` once for all of its calls; each call of it is counted and may fail on its own.
    """

    passes_batches = True

    def __init__(
        self, inner: StoreOperations, faults: Sequence[Fault] = (), *, seed: int = 0, latency: float = 0.0
    ) -> None:
        super().__init__(inner)
        self.latency = latency  # after capabilities: the setter adjusts them
        self._faults = list(faults)
        self._remaining = [fault.times for fault in self._faults]
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        """Calls per operation, injected failures included."""
        self.injected: Counter[str] = Counter()
        """Injected failures per operation."""

    @property
    def latency(self) -> float:
        """Seconds every call sleeps first; may be changed between calls (e.g. 0 to prepare, 0.02 to measure)."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        # With injected latency the calls no longer take microseconds, whatever the inner store is: stages then
        # keep the whole pool busy instead of two units per core. A store whose calls took microseconds makes a
        # batch in turn as fast as at once, so under latency it takes batches: one latency a batch, as a remote
        # store with an async client (``concurrent_calls``), not one a call.
        self._latency = seconds
        inner = self._capabilities_of(self.inner.capabilities)
        if seconds > 0:
            inner = replace(
                inner, microsecond_calls=False, concurrent_calls=inner.concurrent_calls or inner.microsecond_calls
            )
        self.capabilities = inner

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)
            self._remaining.append(fault.times)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._remaining.clear()

    def _pick(self, operation: str, path: str) -> Fault | None:
        with self._lock:
            self.calls[operation] += 1
            for index, fault in enumerate(self._faults):
                if fault.operation != operation or fault.path_contains not in path:
                    continue
                remaining = self._remaining[index]
                if remaining is not None and remaining <= 0:
                    continue
                if fault.rate < 1.0 and self._random.random() >= fault.rate:
                    continue
                if remaining is not None:
                    self._remaining[index] = remaining - 1
                self.injected[operation] += 1
                return fault
        return None

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        if not self.capabilities.concurrent_calls:
            return renames_one_by_one(self.rename_file, pairs)

        def send(chosen: list[int]) -> list[Exception | None]:
            return self.inner.rename_files([pairs[i] for i in chosen], [hints[i] for i in chosen] if hints else hints)

        return self._batch("rename_file", range(len(pairs)), lambda i: f"{pairs[i][0]} -> {pairs[i][1]}", send)

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        """A batch of reads is in flight at once: one ``latency`` for all; each may fail on its own."""
        if not self.capabilities.concurrent_calls:
            return calls_one_by_one(self.read_bytes, paths)
        return self._batch("read_bytes", paths, str, self.inner.read_files)

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        """A batch of deletes is in flight at once: one ``latency`` for all; each may fail on its own."""
        if not self.capabilities.concurrent_calls:
            return calls_one_by_one(self.delete_dir, paths)
        return self._batch("delete_dir", paths, str, self.inner.delete_dirs)

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]:
        """A batch of completions is in flight at once: one ``latency`` for all; each may fail on its own."""
        return self._batch(
            "complete_upload",
            uploads,
            lambda pending: pending.path,
            lambda batch: self._inner_uploads(batch[0].path).complete_uploads(batch),
        )

    def _batch(
        self,
        operation: str,
        items: Sequence[Item],
        path_of: Callable[[Item], str],
        send: Callable[[list[Item]], Sequence[A | Exception]],
    ) -> list[A | Exception]:
        """One latency, then the items no fault stops sent to the inner store together; an outcome per item."""
        if self.latency:
            time.sleep(self.latency)
        faults = [self._pick(operation, path_of(item)) for item in items]
        reaching = [index for index, fault in enumerate(faults) if fault is None or fault.when == "after"]
        outcomes: list[A | Exception] = [RuntimeError("not sent")] * len(items)
        if reaching:
            answered = send([items[i] for i in reaching])
            for index, outcome in zip(reaching, answered, strict=True):
                outcomes[index] = outcome
        for index, fault in enumerate(faults):
            if fault is None or (fault.when == "after" and isinstance(outcomes[index], Exception)):
                continue
            error = fault.error()
            if not isinstance(error, Exception):
                raise error
            outcomes[index] = error
        return outcomes

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        if self.latency:
            time.sleep(self.latency)
        fault = self._pick(operation, path)
        if fault is None:
            return call()
        if fault.when == "after":
            call()
        raise fault.error()


def azure_server_busy() -> BaseException:
    """The error adlfs raises when Azure throttles: ``HttpResponseError`` 503 with error code ``ServerBusy``."""
    from azure.core.exceptions import HttpResponseError

    error: Any = HttpResponseError(message="injected: The server is busy.\nErrorCode:ServerBusy")
    error.status_code = 503
    error.error_code = "ServerBusy"
    result: BaseException = error
    return result


def azure_operation_timed_out() -> BaseException:
    """Azure's ``HttpResponseError`` 500 with error code ``OperationTimedOut``."""
    from azure.core.exceptions import HttpResponseError

    error: Any = HttpResponseError(message="injected: Operation could not be completed within the specified time.")
    error.status_code = 500
    error.error_code = "OperationTimedOut"
    result: BaseException = error
    return result


def gcs_http_error(code: int = 503) -> Callable[[], BaseException]:
    """A factory of the ``gcsfs.retry.HttpError`` GCS answers with when throttling (429) or busy (503)."""

    def make() -> BaseException:
        from gcsfs.retry import HttpError

        error: BaseException = HttpError({"code": code, "message": f"injected: HTTP {code}"})
        return error

    return make


def s3_error(
    code: str = "SlowDown",
    status: int = 503,
    message: str = "injected: Please reduce your request rate.",
    operation: str = "PutObject",
    *,
    translated: bool = True,
) -> Callable[[], BaseException]:
    """A factory of the error an S3 call raises for ``code``/``status``.

    ``translated``: as s3fs raises it (``s3fs.errors.translate_boto_error``: ``SlowDown`` and 503 become
    ``OSError(EBUSY)``, 500 ``OSError(EREMOTEIO)``, ``RequestTimeout`` ``TimeoutError``, a 412 on
    ``If-None-Match`` ``FileExistsError``, with botocore's ``ClientError`` as ``__cause__``); otherwise the bare
    ``ClientError`` a botocore client raises.
    """

    def make() -> BaseException:
        from botocore.exceptions import ClientError

        details: dict[str, Any] = {"Code": code, "Message": message}
        if code == "PreconditionFailed":
            details["Condition"] = "If-None-Match"
        error: BaseException = ClientError(
            {"Error": details, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
        )
        if not translated:
            return error
        from s3fs.errors import translate_boto_error

        result: BaseException = translate_boto_error(error)
        return result

    return make


def s3_slow_down() -> BaseException:
    """What s3fs raises when S3 throttles: ``OSError(EBUSY)`` from a ``SlowDown`` 503 ``ClientError``."""
    return s3_error()()


def s3_internal_error() -> BaseException:
    """What s3fs raises for S3's ``InternalError`` 500: ``OSError(EREMOTEIO)``."""
    return s3_error("InternalError", 500, "injected: We encountered an internal error. Please try again.")()
