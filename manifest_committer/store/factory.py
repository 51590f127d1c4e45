"""Choose the store binding for a URL; the one place that looks at schemes."""

from __future__ import annotations

import importlib.util
from typing import Any

import fsspec

from ..errors import UnsupportedStoreError
from .local import LocalStore
from .memory import MemoryStore
from .operations import StoreOperations

AZURE_PROTOCOLS = frozenset({"abfs", "abfss", "az"})
GCS_PROTOCOLS = frozenset({"gs", "gcs"})
S3_PROTOCOLS = frozenset({"s3", "s3a", "s3n"})
LOCAL_PROTOCOLS = frozenset({"file", "local"})
MEMORY_PROTOCOLS = frozenset({"memory"})
HDFS_PROTOCOLS = frozenset({"hdfs", "viewfs", "webhdfs", "swebhdfs"})

SUPPORTED_STORES = (
    "local paths and file://, memory://, abfs://, abfss:// and az:// (pip install 'manifest-committer[azure]'), "
    "gs:// and gcs:// (pip install 'manifest-committer[gcs]')"
)
"""What every refusal of a URL lists, so the user sees at once what would work."""

_EXTRAS = {"adlfs": "azure", "gcsfs": "gcs"}
"""The fsspec backend each cloud store needs, and the extra of this package that installs it."""

_S3_REASON = (
    "S3 has no rename: s3fs moves a file by copy then delete, and overwrites whatever is at the destination, "
    "so the rename-based protocols (manifest, v1, v2) and the transactional protocol cannot commit there safely. "
    "Use the `upload` protocol (protocol='upload', or 'auto' on s3:// and s3a://): tasks write multipart uploads "
    "to the final keys, and job commit completes them with conditional writes, never overwriting and never copying"
)
_HDFS_REASON = (
    "HDFS is not supported: fsspec reaches it through libhdfs and a JVM, which this committer does not drive; "
    "use Hadoop's own ManifestCommitter (or FileOutputCommitter) for HDFS"
)


def _no_binding(protocol: str) -> str:
    return (
        f"no store binding for the {protocol}:// filesystem; the committer needs a single-file rename that never "
        f"overwrites and says whether it happened, which fsspec's generic mv does not promise. "
        f"Supported: {SUPPORTED_STORES}"
    )


def _require_backend(url: str, module: str) -> None:
    """Check that a cloud store's fsspec backend is installed (without importing it), or say which extra is."""
    if importlib.util.find_spec(module) is None:
        extra = _EXTRAS[module]
        raise UnsupportedStoreError(
            f"{url}: the {extra} store needs {module}, which is not installed: "
            f"pip install 'manifest-committer[{extra}]' (or pip install '.[{extra}]' in a clone of the repository)"
        )


def _protocol_of(url: str) -> str:
    if "::" in url:  # a chained URL such as simplecache::gs://b/p: only the outermost layer is ours to judge
        return url.split("::", 1)[0]
    protocol, _ = fsspec.core.split_protocol(url)
    return protocol or "file"


def _cloud_filesystems(url: str, options: dict[str, Any]) -> tuple[Any, Any, str]:
    """A private filesystem for the committer's own calls, fsspec's shared one for task output, and the path.

    The private one is never handed out, so switching its client's retries off changes nobody else's; neither
    keeps listing caches, since a committer must see every change at once.
    """
    options.setdefault("use_listings_cache", False)
    data_fs, path = fsspec.core.url_to_fs(url, **options)
    fs, _ = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
    return fs, data_fs, path.rstrip("/")


def open_store(url: str, storage_options: dict[str, Any] | None = None) -> tuple[StoreOperations, str]:
    """The store operations and the store path for a plain path or fsspec URL.

    Raises ``UnsupportedStoreError`` for a store without a safe single-file rename (S3, and any fsspec
    backend this package has no binding for), before any connection is made.
    """
    options = dict(storage_options or {})
    protocol = _protocol_of(url)
    if protocol in S3_PROTOCOLS:
        raise UnsupportedStoreError(f"{url}: {_S3_REASON}")
    if protocol in HDFS_PROTOCOLS:  # before fsspec, which would start loading libjvm and print its errors
        raise UnsupportedStoreError(f"{url}: {_HDFS_REASON}. Supported: {SUPPORTED_STORES}")
    if protocol not in LOCAL_PROTOCOLS | MEMORY_PROTOCOLS | AZURE_PROTOCOLS | GCS_PROTOCOLS:
        # Refused before fsspec builds a filesystem: its own errors ("Protocol not known", a missing backend) say
        # nothing about what would work here.
        if protocol in fsspec.available_protocols():
            raise UnsupportedStoreError(f"{url}: {_no_binding(protocol)}")
        raise UnsupportedStoreError(f"{url}: unknown scheme {protocol}://. Supported: {SUPPORTED_STORES}")
    if protocol in AZURE_PROTOCOLS:
        _require_backend(url, "adlfs")
        from .azure import (
            AzureBlobStore,
            missing_credentials_error,
            without_client_retries,
            without_environment_lookups,
        )

        try:
            fs, data_fs, path = _cloud_filesystems(url, options)
        except ValueError as error:  # adlfs: no account or credentials to build a client with
            raise missing_credentials_error(url, error) from error
        fs = without_environment_lookups(without_client_retries(fs))
        return AzureBlobStore(fs, protocol, data_fs, destination=url), path
    if protocol in GCS_PROTOCOLS:
        _require_backend(url, "gcsfs")
        from .gcs import GCSStore  # sets GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT before gcsfs is imported
        from .gcs import without_client_retries as without_gcs_client_retries

        fs, data_fs, path = _cloud_filesystems(url, options)
        return GCSStore(without_gcs_client_retries(fs), protocol, data_fs), path
    fs, path = fsspec.core.url_to_fs(url, **options)
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "file" in protocols or "local" in protocols:
        local_fs = fsspec.filesystem("file", auto_mkdir=True)
        return LocalStore(local_fs), path.rstrip("/") or "/"
    if "memory" in protocols:
        return MemoryStore(fs), path.rstrip("/") or "/"
    raise UnsupportedStoreError(f"{url}: {_no_binding(protocols[0])}")


def open_destination_store(url: str, storage_options: dict[str, Any] | None = None) -> tuple[StoreOperations, str]:
    """``open_store``, except that S3 opens through the upload protocol's door (``s3.open_s3_store``): for the
    tools that read or undo any protocol's jobs (status, rollback)."""
    if _protocol_of(url) in S3_PROTOCOLS:
        from .s3 import open_s3_store

        return open_s3_store(url, storage_options)
    return open_store(url, storage_options)
