"""What every writer framework shares: partition paths, file formats, save modes, the task side and the job.

``manifest_committer.spark`` and the adapters ``arrow``, ``polars``, ``dask`` and ``ray`` are thin layers over
this package (none of it imports a framework; pyarrow is imported only when a task writes). Spark's tasks write
through ``TaskOutput``; the pyarrow, Dask and Ray tasks through pyarrow's own ``write_dataset``
(``dataset_output``), Polars through its own partitioned sink; all name directories with ``partitioning``.
"""

from __future__ import annotations

from .formats import OutputFormat, output_format
from .job import (
    DestinationExistsError,
    TaskFiles,
    TaskResult,
    TaskResultError,
    TaskTarget,
    TaskWrite,
    WriteJob,
    abort_write,
    batch_writer,
    begin,
    commit_write,
    run_task,
    write_in_process,
)
from .modes import PartitionOverwriteMode, SaveMode
from .partitioning import DEFAULT_PARTITION_NAME, partition_path
from .task_output import TaskOutput

__all__ = [
    "DEFAULT_PARTITION_NAME",
    "DestinationExistsError",
    "OutputFormat",
    "PartitionOverwriteMode",
    "SaveMode",
    "TaskFiles",
    "TaskOutput",
    "TaskResult",
    "TaskResultError",
    "TaskTarget",
    "TaskWrite",
    "WriteJob",
    "abort_write",
    "batch_writer",
    "begin",
    "commit_write",
    "output_format",
    "partition_path",
    "run_task",
    "write_in_process",
]
