"""Write Dask DataFrames through the committer: ``manifest_committer.dask.write``.

Dask's ``to_parquet`` writes straight to the final paths with deterministic names, so a retried task or work
stealing overwrites or duplicates files and there is no job commit (dask/dask#2923, #6445). Here the write is one
graph: one task per partition (a task attempt of the committer, ids unique per execution, whose rows pyarrow's
``write_dataset`` writes into the attempt directory), and one final barrier task that receives the partitions'
results and commits exactly those attempts. A retry (``retries=``) or a
duplicate execution is another attempt, whose files no result names: they stay in ``_temporary`` and go with it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from .success_data import SuccessData
from .writing.job import (
    TaskResult,
    WriteJob,
    abort_write,
    batch_writer,
    begin,
    commit_write,
    release_driver,
    run_task,
)

log = logging.getLogger(__name__)

__all__ = ["write"]


def _untyped(function: Any) -> Any:
    """``dask.compute`` has no annotations: strict typing may not call it directly."""
    return function


def _write_partition(job: WriteJob, index: int, frame: Any) -> TaskResult:
    """One graph task: a pandas partition becomes one task attempt's files (the index is not written)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    return run_task(job, index, write=batch_writer(table.to_batches(), held_in_memory=True))


def _commit(job: WriteJob, results: list[TaskResult]) -> SuccessData:
    """The barrier task: commit exactly the attempts whose results the graph delivered."""
    return commit_write(job, results)


def driver_address() -> str | None:
    """This process's address as the distributed scheduler's hosts reach it (the workers run there), when a
    ``distributed`` client is active; ``None`` otherwise (the local schedulers run the tasks in this process)."""
    try:
        from distributed import get_client
        from distributed.comm.addressing import get_address_host
    except ImportError:
        return None
    try:
        scheduler = get_client().scheduler_info()["address"]
    except (ValueError, KeyError):
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # the route to the scheduler's host
        try:
            probe.connect((get_address_host(str(scheduler)), 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return address


def write(
    dataframe: Any,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    protocol: str = "auto",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    compute_kwargs: Mapping[str, Any] | None = None,
) -> SuccessData | None:
    """Write a ``dask.dataframe.DataFrame`` to ``url`` through the committer; returns the job's ``_SUCCESS``
    summary, or ``None`` when ``mode="ignore"`` found data. Arguments as ``manifest_committer.arrow.write``;
    ``compute_kwargs`` go to ``dask.compute`` (``retries=``, ``scheduler=``; the active distributed client, if
    any, runs the graph). A failed job is aborted and leaves the destination as it was.
    """
    try:
        from dask.base import compute
        from dask.delayed import delayed
    except ImportError as error:  # pragma: no cover - the dask extra is missing
        raise ImportError("manifest_committer.dask needs dask: pip install 'manifest-committer[dask]'") from error

    job = WriteJob.create(
        url,
        framework="dask",
        format=format,
        partition_by=partition_by,
        mode=mode,
        protocol=protocol,
        storage_options=storage_options,
        options=options,
        driver_address=driver_address(),
    )
    job.check_columns([str(column) for column in dataframe.columns])
    if not begin(job):
        return None
    write_task = delayed(_write_partition, pure=False)
    results = [write_task(job, index, part) for index, part in enumerate(dataframe.to_delayed())]
    commit = delayed(_commit, pure=False)(job, results)
    try:
        (summary,) = _untyped(compute)(commit, **dict(compute_kwargs or {}))
    except BaseException:
        abort_write(job)
        raise
    finally:
        release_driver(job)  # the job commit may have run on a worker: the driver's marker server stops now
    if not isinstance(summary, SuccessData):  # pragma: no cover - a scheduler that returns something else
        raise TypeError(f"job {job.job_id}: the commit task returned a {type(summary).__name__}")
    return summary
