"""What a task manifest, or a writer's declared outputs, may name: the one place that decides it.

A manifest is input: another process (or machine, or an older or hostile program) wrote it, so nothing it names
is trusted until these rules admit it (docs/safety.md, "Crafted input" and "Nothing touched on a bad manifest"):

* Ids (``jobId``, ``taskID``, ``taskAttemptID``) are plain names, exactly as the API's ids
  (``paths.is_valid_id``): an id becomes a directory name, and ``posixpath.join`` turns an absolute id such as
  ``/elsewhere/victim`` into that path.
* A path, once decoded, must already be in normal form below its root: no empty segment (``a//b``, a leading
  or trailing ``/``), no ``.`` or ``..`` segment, no NUL (``%00``; C calls stop there). A path that would need
  normalising is refused rather than normalised, so every file has one spelling and the duplicate check may
  compare exact strings: ``x.csv``, ``/x.csv`` and ``./x.csv`` can never be three claims on one file. Other
  control characters stay legal, as in Hadoop's names.
* Containment, decided on those normal paths: a source lies inside its own task attempt's directory; a file or
  directory destination lies inside the destination and outside its ``_temporary`` directory.

Every ``*_problem`` function returns ``None`` for an admitted path, else the reason as a phrase for an error
message ("lies outside ..."); callers add the file and the entry. The checks are string tests only, cheap
enough for millions of entries.
"""

from __future__ import annotations

from .errors import ManifestError
from .paths import ID_RULE, TEMPORARY_DIR, JobPaths, is_valid_id
from .urls import has_relative_segments

_TEMPORARY_SEGMENT = TEMPORARY_DIR + "/"


def check_manifest_id(value: str, field: str, origin: str) -> str:
    """An id read from a document: a ``ManifestError`` naming the file and the field unless it is a plain name."""
    if not is_valid_id(value):
        raise ManifestError(f"{origin}: {field} {value!r} is not a valid id: {ID_RULE}")
    return value


def check_manifest_ids(job_id: str, task_id: str, task_attempt_id: str, origin: str) -> None:
    """The three ids of a task manifest, checked before any of them is used to build a path."""
    check_manifest_id(job_id, "jobId", origin)
    check_manifest_id(task_id, "taskID", origin)
    check_manifest_id(task_attempt_id, "taskAttemptID", origin)


def relative_problem(relative: str) -> str | None:
    """Why a decoded path relative to its root is not a plain, normal relative path; ``None`` if it is."""
    if not relative:
        return "names its root directory itself, not a path below it"
    if "\0" in relative:
        return "holds a NUL character"
    if relative[0] == "/" or relative[-1] == "/" or "//" in relative:
        return "has an empty path segment ('//', or a leading or trailing '/')"
    if has_relative_segments(relative):
        return "has a '.' or '..' segment"
    return None


def _inside(path: str, prefix: str, outside: str) -> str | None:
    if not path.startswith(prefix):
        return outside
    return relative_problem(path[len(prefix) :])


def destination_relative_problem(relative: str) -> str | None:
    """``relative_problem``, and not inside the destination's ``_temporary`` directory (the job's own state)."""
    if relative == TEMPORARY_DIR or relative.startswith(_TEMPORARY_SEGMENT):
        return f"lies inside the destination's {TEMPORARY_DIR} directory"
    return relative_problem(relative)


def all_relatives_admitted(relatives: list[str]) -> bool:
    """Whether ``relative_problem`` admits every path of ``relatives``, decided at once on their text.

    The segments of the paths joined with ``/`` are exactly the segments of all of them, so the joined text has no
    empty, ``.`` or ``..`` segment and no NUL exactly when no path has: the same answer as path by path, in a few
    scans of one string instead of several calls per path (a job commit checks three paths per file).
    """
    if not relatives:
        return True
    joined = "/".join(relatives)
    return relative_problem(joined) is None


def all_destination_relatives_admitted(relatives: list[str]) -> bool:
    """``all_relatives_admitted``, and none inside ``_temporary``; ``False`` may be a false alarm (a name that only
    contains ``_temporary`` after a newline): the caller then checks path by path, which names the culprit."""
    if not relatives:
        return True
    if ("\n" + "\n".join(relatives)).find("\n" + TEMPORARY_DIR) >= 0:
        return False
    return all_relatives_admitted(relatives)


class JobAdmission:
    """The containment rules bound to one job attempt's paths (in the store's own decoded path form)."""

    __slots__ = ("dest_prefix", "paths")

    def __init__(self, paths: JobPaths) -> None:
        self.paths = paths
        self.dest_prefix = paths.dest.rstrip("/") + "/"

    def source_prefix(self, task_attempt_id: str) -> str:
        """The prefix every source of ``task_attempt_id`` starts with; the id must have been checked."""
        return self.paths.task_attempt_dir(task_attempt_id) + "/"

    def source_problem(self, path: str, source_prefix: str, task_attempt_id: str) -> str | None:
        """A file's source: below the directory of its own task attempt, in normal form."""
        return _inside(path, source_prefix, f"lies outside the directory of task attempt {task_attempt_id}")

    def destination_problem(self, path: str) -> str | None:
        """A file's or directory's destination: below the destination, outside ``_temporary``, in normal form."""
        if not path.startswith(self.dest_prefix):
            return "lies outside the job's destination"
        return destination_relative_problem(path[len(self.dest_prefix) :])


def declared_output_problem(source_relative: str, dest_relative: str) -> str | None:
    """A writer's declared output (``commit_task(task, outputs)``): the same rules, on relative paths."""
    problem = relative_problem(source_relative)
    if problem is not None:
        return f"output {source_relative!r} {problem}"
    problem = destination_relative_problem(dest_relative)
    if problem is not None:
        return f"destination {dest_relative!r} of output {source_relative!r} {problem}"
    return None


__all__ = [
    "JobAdmission",
    "all_destination_relatives_admitted",
    "all_relatives_admitted",
    "check_manifest_id",
    "check_manifest_ids",
    "declared_output_problem",
    "destination_relative_problem",
    "relative_problem",
]
