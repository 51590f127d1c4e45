"""What every writer framework shares: partition paths, file formats, save modes, the task side and the job.

``manifest_committer.spark`` and the adapters ``arrow``, ``polars``, ``dask`` and ``ray`` are thin layers over
this package (none of it imports a framework; pyarrow is imported only when a task writes).
"""

from __future__ import annotations

from .formats import OutputFormat, output_format
from .job import (
    DestinationExistsError,
    TaskResult,
    TaskResultError,
    WriteJob,
    abort_write,
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
    "TaskOutput",
    "TaskResult",
    "TaskResultError",
    "WriteJob",
    "abort_write",
    "begin",
    "commit_write",
    "output_format",
    "partition_path",
    "run_task",
    "write_in_process",
]
