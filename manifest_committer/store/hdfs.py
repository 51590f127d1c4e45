"""HDFS: refused, with the reason (``HDFS_BINDING``); a user binding registered with ``replace=True`` may serve it."""

from __future__ import annotations

from .bindings import StoreBinding

HDFS_BINDING = StoreBinding(
    name="hdfs",
    schemes=("hdfs", "viewfs", "webhdfs", "swebhdfs"),
    refusal=(
        "HDFS is not supported: fsspec reaches it through libhdfs and a JVM, which this committer does not drive; "
        "use Hadoop's own ManifestCommitter (or FileOutputCommitter) for HDFS"
    ),
)
"""Refused before fsspec is asked, which would start loading libjvm and print its errors."""
