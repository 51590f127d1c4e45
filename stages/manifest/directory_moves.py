"""Which destination directories a job commit may bring into being by moving a task's directory there whole.

A partitioned writer that names its own files leaves one directory per partition in its attempt directory, often
with a single file (Polars: ``p=1/part-...``). Making the destination's ``p=1`` and renaming the file into it costs
a ``mkdir`` per partition (on local disk about as much as the writer spent on the file) and leaves an empty
directory per partition for the cleanup to remove; one ``rename`` of the directory costs a fraction of that and
leaves nothing. The result is the same: the file at its destination, nothing else there, the source gone.

A directory qualifies when the job's one file going into it comes from a source directory that no other file of
the job comes from, under the same name, and no directory of the job lies below it. The job commit then moves it
only if the destination's directory was missing when probed (``CreateDirectoriesStage``) and the source directory
holds exactly that file when the move is made (``RenameFilesStage``); anything else takes the ordinary rename.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...entry_file import EntryChunk
from ...paths import JobPaths
from .job_types import TargetDirectory

MOST_FILES_PLANNED = 1_000_000
"""Above this many files the plan is not made (it holds a few entries per file in memory): ordinary renames."""


def movable_directories(
    chunks: Iterable[EntryChunk],
    file_count: int,
    directories: Sequence[TargetDirectory],
    paths: JobPaths,
) -> frozenset[str]:
    """The destination directories (store paths) whose one file may arrive with its source directory: a
    directory below a task attempt's directory, never the attempt's directory itself."""
    if file_count > MOST_FILES_PLANNED:
        return frozenset()
    attempt_dirs: set[str] = set()
    source_of: dict[str, str | None] = {}
    """Destination directory -> the source directory of its one file; ``None``: several files, or a name that
    differs."""
    sources_used: dict[str, int] = {}
    for chunk in chunks:
        attempt_dirs.add(paths.task_attempt_dir(chunk.task_attempt_id).rstrip("/"))
        for row in chunk.rows:
            dest_dir, _, dest_name = row.dest.rpartition("/")
            source_dir, _, source_name = row.source.rpartition("/")
            sources_used[source_dir] = sources_used.get(source_dir, 0) + 1
            if dest_dir in source_of or dest_name != source_name:
                source_of[dest_dir] = None
            else:
                source_of[dest_dir] = source_dir
    root = paths.dest.rstrip("/")
    parents = {directory.path.rpartition("/")[0] for directory in directories}
    return frozenset(
        dest_dir
        for dest_dir, source_dir in source_of.items()
        if source_dir
        and source_dir not in attempt_dirs
        and sources_used[source_dir] == 1
        and dest_dir not in parents
        and dest_dir.startswith(root + "/")
    )
