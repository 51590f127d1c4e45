"""Write Polars frames through the committer: ``manifest_committer.polars.write``.

Polars' own sinks write straight to the final paths (a failed write can delete an existing file, non-unique
names overwrite silently: pola-rs/polars#25406, #26885). Here the frame's Arrow record batches are one task
attempt in the calling process, written exactly as the Spark writer writes them (same partition directories and
escaping); only the job commit publishes them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .success_data import SuccessData
from .writing.job import WriteJob, write_in_process

log = logging.getLogger(__name__)

__all__ = ["write"]


def write(
    frame: Any,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    protocol: str = "auto",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> SuccessData | None:
    """Write a Polars ``DataFrame`` or ``LazyFrame`` (collected first) to ``url`` through the committer; returns the
    job's ``_SUCCESS`` summary, or ``None`` when ``mode="ignore"`` found data. Arguments as
    ``manifest_committer.arrow.write``."""
    try:
        import polars as pl
    except ImportError as error:  # pragma: no cover - the polars extra is missing
        raise ImportError("manifest_committer.polars needs polars: pip install 'manifest-committer[polars]'") from error

    job = WriteJob.create(
        url,
        framework="polars",
        format=format,
        partition_by=partition_by,
        mode=mode,
        protocol=protocol,
        storage_options=storage_options,
        options=options,
    )
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"expected a polars DataFrame or LazyFrame, got {type(frame).__name__}")
    job.check_columns(frame.columns)
    return write_in_process(job, frame.to_arrow().to_batches())
