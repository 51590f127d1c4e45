"""Write Ray Datasets through the committer: ``manifest_committer.ray.write`` and ``Datasink``.

Ray Data's file sinks write straight to the final paths, and overwrite deletes the old files before the new
ones are written (ray-project/ray#55043, #54949). ``Datasink`` is Ray's own extension point: on the driver
``on_write_start`` sets the job up, every write task (``write``) is a task attempt of the committer with ids
unique to the attempt (a retry under ``max_retries`` is another attempt), whose blocks pyarrow's ``write_dataset``
writes into the attempt directory (blocks of different schemas unified first, as ``writing.job.tables_writer`` says),
and returns its result through Ray, and
``on_write_complete`` commits exactly the attempts in ``WriteResult.write_returns``; ``on_write_failed`` aborts
the job, leaving the destination as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import ConfigError
from .success_data import SuccessData
from .writing.job import (
    TaskResult,
    WriteJob,
    abort_write,
    begin,
    commit_write,
    destination_holds_data,
    run_task,
    tables_writer,
)
from .writing.modes import SaveMode

try:
    from ray.data import Datasink as _RayDatasink
except ImportError as error:  # pragma: no cover - the ray extra is missing
    raise ImportError("manifest_committer.ray needs ray[data]: pip install 'manifest-committer[ray]'") from error

log = logging.getLogger(__name__)

__all__ = ["Datasink", "write"]


def _tables(blocks: Iterable[Any]) -> list[Any]:
    """A write task's blocks (Arrow tables or pandas frames) as Arrow tables, whose schemas may differ: Ray
    bundles blocks of different producers into one task (``min_rows_per_write``, say)."""
    from ray.data.block import BlockAccessor

    return [BlockAccessor.for_block(block).to_arrow() for block in blocks]


class Datasink(_RayDatasink[TaskResult]):
    """``ds.write_datasink(Datasink(url, ...))``: a Ray write through the committer; ``success`` is the job's
    ``_SUCCESS`` summary once the write returned.

    The arguments are those of ``manifest_committer.arrow.write``, except that ``mode="ignore"`` needs
    ``manifest_committer.ray.write`` (a datasink cannot skip the write tasks once Ray started them).
    """

    def __init__(
        self,
        url: str,
        *,
        format: str = "parquet",
        partition_by: Sequence[str] = (),
        mode: str = "errorifexists",
        protocol: str = "auto",
        storage_options: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.job = WriteJob.create(
            url,
            framework="ray",
            format=format,
            partition_by=partition_by,
            mode=mode,
            protocol=protocol,
            storage_options=storage_options,
            options=options,
            driver_address=driver_address(),
        )
        if self.job.mode is SaveMode.IGNORE:
            raise ConfigError(f"{url}: save mode ignore needs manifest_committer.ray.write, not the Datasink")
        self.success: SuccessData | None = None

    def get_name(self) -> str:
        return "ManifestCommitter"

    def on_write_start(self, schema: Any = None) -> None:
        """On the driver, before any write task: check the columns, apply the save mode, set the job up."""
        if schema is not None:
            self.job.check_columns(list(schema.names))
        begin(self.job)

    def write(self, blocks: Iterable[Any], ctx: Any) -> TaskResult:
        """In a write task: one task attempt of the committer, its result goes back to the driver through Ray."""
        return run_task(self.job, int(ctx.task_idx), write=tables_writer(_tables(blocks)))

    def on_write_complete(self, write_result: Any) -> None:
        """On the driver: commit exactly the attempts Ray delivered (``WriteResult.write_returns``)."""
        returns = getattr(write_result, "write_returns", write_result)  # Ray < 2.44 passed the list itself
        self.success = commit_write(self.job, returns)

    def on_write_failed(self, error: Exception) -> None:
        """On the driver: abort the job; the destination is left as it was."""
        log.warning("Ray write of job %s failed, aborting it: %s", self.job.job_id, error)
        abort_write(self.job)


def driver_address() -> str:
    """The address of the driver's node, where Ray's workers on every node reach it (a marker server there)."""
    import ray.util

    node_address: Any = ray.util.get_node_ip_address  # untyped in Ray
    return str(node_address())


def write(
    dataset: Any,
    url: str,
    *,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    mode: str = "errorifexists",
    protocol: str = "auto",
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    ray_remote_args: Mapping[str, Any] | None = None,
    concurrency: int | None = None,
) -> SuccessData | None:
    """Write a ``ray.data.Dataset`` to ``url`` through the committer; returns the job's ``_SUCCESS`` summary, or
    ``None`` when ``mode="ignore"`` found data. Arguments as ``manifest_committer.arrow.write``;
    ``ray_remote_args`` (``max_retries=``, say) and ``concurrency`` go to ``Dataset.write_datasink``."""
    ignore = SaveMode.parse(mode) is SaveMode.IGNORE
    # ignore is decided here, before Ray starts any task; the job then runs as errorifexists would.
    sink = Datasink(
        url,
        format=format,
        partition_by=partition_by,
        mode="errorifexists" if ignore else mode,
        protocol=protocol,
        storage_options=storage_options,
        options=options,
    )
    if ignore and destination_holds_data(sink.job):
        log.info("%s holds data: nothing written (save mode ignore)", url)
        return None
    dataset.write_datasink(sink, ray_remote_args=dict(ray_remote_args or {}), concurrency=concurrency)
    return sink.success
