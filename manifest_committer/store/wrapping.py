"""A store that wraps another: every store call passes through one hook, everything else is delegated.

Wrappers (fault injection, rate limiting) override ``around`` only, so a method added to the contract, or a
question such as ``is_auth_error``, can never be forgotten in one of them. A wrapper implements the
``StoreOperations`` protocol by delegation; it is no fsspec binding itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UnsupportedStoreError
from .operations import (
    NO_HINTS,
    FileStatus,
    RenameHint,
    StoreCapabilities,
    StoreOperations,
    calls_one_by_one,
    move_dir_holding_by_calls,
    renames_one_by_one,
)

if TYPE_CHECKING:
    from .pending_upload import PendingUpload
    from .s3 import IncompleteUpload


class WrappingStore:
    """Delegates to ``inner``; each call that reaches the store runs through ``around(operation, path, call)``."""

    passes_batches: ClassVar[bool] = False
    """Whether ``rename_files``, ``read_files`` and ``delete_dirs`` hand a batch to the inner store whole (the
    wrapper overrides them and keeps the inner store's ``concurrent_calls``); by default each call of a batch runs
    through ``around`` on its own. A subclass that intercepts ``rename_file`` itself sets it ``False``, or its
    override misses the batches."""

    def __init__(self, inner: StoreOperations) -> None:
        self.inner = inner
        self.fs: Any = inner.fs
        self.data_fs: Any = inner.data_fs
        self.scheme = inner.scheme
        self.capabilities: StoreCapabilities = self._capabilities_of(inner.capabilities)
        self.credential_sources = inner.credential_sources

    def _capabilities_of(self, inner: StoreCapabilities) -> StoreCapabilities:
        """The inner store's capabilities, less ``concurrent_calls`` unless this wrapper passes batches on."""
        if inner.concurrent_calls and not self.passes_batches:
            return replace(inner, concurrent_calls=False)
        return inner

    def around(self, operation: str, path: str, call: Callable[[], Any]) -> Any:
        """Run one store call; ``path`` names what it touches (``src -> dest`` for two paths)."""
        return call()

    # --- questions answered without a store call ------------------------------------------------------------------

    def to_url(self, path: str) -> str:
        return self.inner.to_url(path)

    def from_url(self, url: str) -> str:
        return self.inner.from_url(url)

    def is_transient(self, error: BaseException) -> bool:
        return self.inner.is_transient(error)

    def is_auth_error(self, error: BaseException) -> bool:
        return self.inner.is_auth_error(error)

    def same_content(self, first: FileStatus, second: FileStatus) -> bool:
        return self.inner.same_content(first, second)

    def join(self, parent: str, *names: str) -> str:
        return self.inner.join(parent, *names)

    def parent(self, path: str) -> str:
        return self.inner.parent(path)

    def close(self) -> None:
        """Close the wrapped store: a wrapper owns no connection of its own."""
        self.inner.close()

    # --- store calls ----------------------------------------------------------------------------------------------

    def info(self, path: str) -> FileStatus | None:
        result: FileStatus | None = self.around("info", path, lambda: self.inner.info(path))
        return result

    def list_dir(self, path: str) -> list[FileStatus]:
        result: list[FileStatus] = self.around("list_dir", path, lambda: self.inner.list_dir(path))
        return result

    def mkdirs(self, path: str) -> None:
        self.around("mkdirs", path, lambda: self.inner.mkdirs(path))

    def is_failed_copy(self, source: str, dest: str) -> bool:
        return bool(self.around("info", dest, lambda: self.inner.is_failed_copy(source, dest)))

    def rename_file(self, source: str, dest: str) -> None:
        self.around("rename_file", f"{source} -> {dest}", lambda: self.inner.rename_file(source, dest))

    def rename_files(
        self, pairs: Sequence[tuple[str, str]], hints: Sequence[RenameHint | None] = NO_HINTS
    ) -> list[Exception | None]:
        return renames_one_by_one(self.rename_file, pairs)

    def rename_dir(self, source: str, dest: str) -> None:
        self.around("rename_dir", f"{source} -> {dest}", lambda: self.inner.rename_dir(source, dest))

    def move_dir_holding(self, source: str, name: str, dest: str) -> bool:
        """Made of this wrapper's own calls, so that each passes ``around``."""
        return move_dir_holding_by_calls(self, source, name, dest)

    def delete_file(self, path: str) -> bool:
        return bool(self.around("delete_file", path, lambda: self.inner.delete_file(path)))

    def delete_dir(self, path: str) -> bool:
        return bool(self.around("delete_dir", path, lambda: self.inner.delete_dir(path)))

    def delete_dirs(self, paths: Sequence[str]) -> list[bool | Exception]:
        return calls_one_by_one(self.delete_dir, paths)

    def remove_empty_dir(self, path: str) -> bool:
        return bool(self.around("remove_empty_dir", path, lambda: self.inner.remove_empty_dir(path)))

    def read_bytes(self, path: str) -> bytes:
        result: bytes = self.around("read_bytes", path, lambda: self.inner.read_bytes(path))
        return result

    def read_files(self, paths: Sequence[str]) -> list[bytes | Exception]:
        return calls_one_by_one(self.read_bytes, paths)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.around("write_bytes", path, lambda: self.inner.write_bytes(path, data))

    def append_bytes(self, path: str, data: bytes) -> None:
        self.around("append_bytes", path, lambda: self.inner.append_bytes(path, data))

    def write_private_bytes(self, path: str, data: bytes) -> None:
        self.around("write_bytes", path, lambda: self.inner.write_private_bytes(path, data))

    def read_private_bytes(self, path: str) -> bytes:
        result: bytes = self.around("read_bytes", path, lambda: self.inner.read_private_bytes(path))
        return result

    def delete_file_below(self, root: str, path: str) -> bool:
        return bool(self.around("delete_file", path, lambda: self.inner.delete_file_below(root, path)))

    def copy_file(self, source: str, dest: str) -> None:
        self.around("copy_file", f"{source} -> {dest}", lambda: self.inner.copy_file(source, dest))

    # --- the upload protocol's calls (S3 only: refused when the wrapped store has none) -------------------------

    def _inner_uploads(self, path: str) -> Any:
        """The wrapped store's upload calls; ``UnsupportedStoreError`` where it has none."""
        if getattr(self.inner, "complete_uploads", None) is None:
            raise UnsupportedStoreError(f"{path}: the {self.scheme}:// store has no multipart uploads (S3 only)")
        return self.inner

    def _upload_call(self, name: str, path: str, *arguments: Any) -> Any:
        method = getattr(self.inner, name, None)
        if method is None:
            raise UnsupportedStoreError(f"{path}: the {self.scheme}:// store has no {name} (S3 only)")
        return self.around(name, path, lambda: method(*arguments))

    def put_if_absent(self, path: str, data: bytes, metadata: dict[str, str] | None = None) -> str:
        result: str = self._upload_call("put_if_absent", path, path, data, metadata)
        return result

    def complete_upload(self, pending: PendingUpload) -> str:
        result: str = self._upload_call("complete_upload", pending.path, pending)
        return result

    def complete_uploads(self, uploads: Sequence[PendingUpload]) -> list[str | Exception]:
        """One ``complete_upload`` after another, each through ``around``: an outcome per upload."""
        return calls_one_by_one(self.complete_upload, uploads)

    def holds(self, pending: PendingUpload) -> str | None:
        result: str | None = self._upload_call("holds", pending.path, pending)
        return result

    def abort_upload(self, path: str, upload_id: str) -> bool:
        return bool(self._upload_call("abort_upload", path, path, upload_id))

    def list_uploads(self, prefix: str, page_size: int = 1000) -> list[IncompleteUpload]:
        result: list[IncompleteUpload] = self._upload_call("list_uploads", prefix, prefix, page_size)
        return result
