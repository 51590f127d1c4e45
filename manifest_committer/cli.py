"""``manifest-committer``: print a ``_SUCCESS``/summary report or a task manifest; status, commit, abort of a job;
rollback and vacuum of a transactional destination."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import __version__
from ._json import read_url
from .errors import CommitterError, ManifestError
from .formatting import format_bytes, format_millis
from .iostatistics import IOStatisticsSnapshot
from .manifest import EntryStatus, TaskManifest
from .statistic_names import (
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    JOB_STAGE_ABORT,
    JOB_STAGE_SETUP,
)
from .success_data import SuccessData
from .urls import decode_path

PROG = "manifest-committer"


def _is_bytes(name: str) -> bool:
    return name.endswith("_size") or "bytes" in name


_SAMPLE_UNITS = {"_count": "files", "_depth": "levels"}


def _sample(name: str, value: float) -> str:
    """One figure of a sample statistic, with its unit (bytes, files, directories, levels)."""
    if _is_bytes(name):
        return format_bytes(round(value))
    unit = (
        "directories"
        if "directory_count" in name
        else next((unit for suffix, unit in _SAMPLE_UNITS.items() if name.endswith(suffix)), "")
    )
    number = f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
    return f"{number} {unit}".rstrip()


def _table(title: str, rows: list[list[str]]) -> list[str]:
    """A title and its rows: first column left-aligned, the others right-aligned, each to its widest cell."""
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [title]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _statistics_lines(stats: IOStatisticsSnapshot) -> list[str]:
    """Counts, byte totals, durations and per-task samples, each in its own table with units on every figure."""
    counters = {k: v for k, v in sorted(stats.counters.items()) if v}
    byte_totals = {k: v for k, v in counters.items() if _is_bytes(k)}
    counts = {k: v for k, v in counters.items() if k not in byte_totals}
    durations: list[list[str]] = []
    samples: list[list[str]] = []
    for key, mean in sorted(stats.meanstatistics.items()):
        if not mean.samples:
            continue
        if key.endswith(".mean"):  # a duration, in milliseconds, with .min/.max beside it
            base = key.removesuffix(".mean")
            low, high = stats.minimums.get(base + ".min"), stats.maximums.get(base + ".max")
            durations.append(
                [
                    base,
                    f"{mean.samples:,}",
                    "-" if low is None else format_millis(low),
                    format_millis(mean.mean),
                    "-" if high is None else format_millis(high),
                    format_millis(mean.sum),
                ]
            )
        else:  # a sample (a size, a file count) per task, min/max under its own name
            low, high = stats.minimums.get(key), stats.maximums.get(key)
            samples.append(
                [
                    key,
                    f"{mean.samples:,}",
                    "-" if low is None else _sample(key, low),
                    _sample(key, mean.mean),
                    "-" if high is None else _sample(key, high),
                ]
            )
    lines = _table("Counts (events and store calls):", [[k, f"{v:,}"] for k, v in counts.items()])
    lines += _table("Byte totals:", [[k, format_bytes(v)] for k, v in byte_totals.items()])
    lines += _table("Durations (calls, min, mean, max, total):", durations)
    lines += _table("Per task (tasks, min, mean, max):", samples)
    if stats.gauges:
        lines += _table("Gauges:", [[k, f"{v:,}"] for k, v in sorted(stats.gauges.items())])
    return lines


def _job_time(stats: IOStatisticsSnapshot) -> str | None:
    """How long the job commit took: its own statistic (summary reports), else the sum of its stages (``_SUCCESS``
    is written inside the job commit, before that statistic is complete)."""
    whole = stats.meanstatistics.get(COMMITTER_COMMIT_JOB + ".mean")
    if whole is not None and whole.samples:
        return f"{format_millis(whole.sum)} (job commit)"
    stages = [
        mean.sum
        for key, mean in stats.meanstatistics.items()
        if key.startswith("job_stage_") and key.endswith(".mean") and key.removesuffix(".mean") not in _NOT_COMMIT
    ]
    return f"{format_millis(sum(stages))} (job commit stages)" if stages else None


_NOT_COMMIT = frozenset({JOB_STAGE_SETUP, JOB_STAGE_ABORT})
"""Stages that are not part of the job commit: set-up runs when the job starts."""


def format_success(success: SuccessData, origin: str, max_filenames: int | None = None) -> str:
    """A ``_SUCCESS`` or summary report as text: outcome and the three numbers people look for (files, bytes,
    time) first, then what on-call needs to know."""
    stats = success.iostatistics
    counters = stats.counters
    lines = [f"Summary of {origin}", f"  Outcome:    {'SUCCESS' if success.success else 'FAILED'}"]
    if COMMITTER_FILES_COMMITTED in counters:
        lines.append(f"  Files:      {counters[COMMITTER_FILES_COMMITTED]:,} committed")
        lines.append(f"  Bytes:      {format_bytes(counters.get(COMMITTER_BYTES_COMMITTED, 0))}")
    job_time = _job_time(stats)
    if job_time is not None:
        lines.append(f"  Time:       {job_time}")
    lines += [
        f"  Job:        {success.job_id} (id from {success.job_id_source})",
        f"  Committer:  {success.committer}",
        f"  Date:       {success.date}  on host {success.hostname}",
    ]
    if success.diagnostics:
        lines.append("Diagnostics:")
        for key, value in sorted(success.diagnostics.items()):
            if key == "stacktrace":
                continue
            lines.append(f"  {key}: {value}")
    if success.filenames:
        shown = success.filenames if max_filenames is None else success.filenames[:max_filenames]
        lines.append(f"Files ({len(success.filenames)} listed):")
        lines.extend(f"  {name}" for name in shown)
        if len(shown) < len(success.filenames):
            lines.append(f"  ... and {len(success.filenames) - len(shown)} more")
    lines.extend(_statistics_lines(stats))
    if "stacktrace" in success.diagnostics:
        lines.append("Stack trace:")
        lines.extend("  " + line for line in success.diagnostics["stacktrace"].rstrip().splitlines())
    return "\n".join(lines)


def format_manifest(manifest: TaskManifest, origin: str) -> str:
    """A task manifest as text: identity, then files and directories."""
    lines = [
        f"Task manifest {origin}",
        f"  Job:           {manifest.job_id} attempt {manifest.job_attempt_number}",
        f"  Task:          {manifest.task_id}",
        f"  Task attempt:  {manifest.task_attempt_id}",
        f"  Attempt dir:   {manifest.task_attempt_dir}",
        f"  Files:         {len(manifest.files):,} ({format_bytes(manifest.total_size)})",
        f"  Directories:   {len(manifest.directories):,}",
    ]
    if manifest.files:
        lines.append("Files (size, destination <- source):")
        width = max(len(f"{entry.size:,}") for entry in manifest.files)
        for entry in manifest.files:
            etag = f"  etag {entry.etag}" if entry.etag else ""
            lines.append(f"  {entry.size:>{width},}  {entry.dest}{etag}")
            lines.append(f"  {'':>{width}}    <- {entry.source}")
    if manifest.directories:
        lines.append("Directories (depth, status at task commit):")
        for directory in manifest.directories:
            status = EntryStatus(directory.status).name.lower()
            lines.append(f"  {directory.level:>3}  {status:<11}  {directory.dir}")
    lines.extend(_statistics_lines(manifest.iostatistics))
    return "\n".join(lines)


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints the usage and then the error; a person reading a failed job's log wants one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog=PROG, description="Inspect the files of the manifest committer (Hadoop's or ours).")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("success", "print a _SUCCESS file or a summary-<jobId>.json report"),
        ("manifest", "print a task manifest (<taskId>-manifest.json)"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("path", help="plain path or fsspec URL of the file")
        command.add_argument("--json", action="store_true", help="print the raw JSON document")
        command.add_argument(
            "--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec option, repeatable"
        )
    status = commands.add_parser("status", help="what is in flight under DEST/_temporary, and the last _SUCCESS")
    status.add_argument("destination", metavar="DEST", help="the destination: plain path or fsspec URL")
    status.add_argument("--json", action="store_true", help="print the status as a JSON document")
    status.add_argument(
        "--no-file-count",
        action="store_true",
        help="do not list the whole destination to count a transactional table's data files",
    )
    status.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="committer key or its short form, repeatable (heartbeat.expiry.seconds judges direct-marker drivers)",
    )
    _add_storage_option(status)
    for name, help_text in (
        ("commit", "run a job commit again: finishes an interrupted one"),
        ("abort", "undo a job: revert what its commit moved, delete its state"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("destination", metavar="DEST", help="the destination: plain path or fsspec URL")
        command.add_argument("--job", required=True, metavar="ID", help="the job id")
        command.add_argument(
            "--attempt", type=int, metavar="N", help="the job attempt (default: the highest under _temporary)"
        )
        command.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="committer key or its short form (io.threads), repeatable",
        )
        _add_storage_option(command)
    commands.choices["abort"].add_argument(
        "--dry-run", action="store_true", help="list what would be reverted and deleted; change nothing"
    )
    commands.choices["commit"].add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )
    rollback = commands.add_parser(
        "rollback", help="undo dead transactional and upload jobs: their data files, their incomplete uploads"
    )
    rollback.add_argument("destination", metavar="DEST", help="the destination: plain path or fsspec URL")
    rollback.add_argument("--job", metavar="ID", help="roll back this job (you say it is dead), not every dead job")
    rollback.add_argument("--dry-run", action="store_true", help="list the dead jobs and their files; change nothing")
    vacuum = commands.add_parser("vacuum", help="delete uncommitted and removed transactional data files, once old")
    vacuum.add_argument("destination", metavar="DEST", help="the destination: plain path or fsspec URL")
    vacuum.add_argument(
        "--retention-hours", required=True, type=float, metavar="H", help="keep every file younger than H hours"
    )
    vacuum.add_argument("--dry-run", action="store_true", help="list what would be deleted; change nothing")
    for command in (rollback, vacuum):
        command.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="committer key or its short form (io.threads), repeatable",
        )
        _add_storage_option(command)
    report = commands.add_parser("report", help="one HTML page of every _SUCCESS and summary-*.json under the paths")
    report.add_argument("paths", nargs="+", metavar="PATH", help="file or directory (searched recursively), or URL")
    report.add_argument("--html", required=True, metavar="OUT.html", help="the page to write (a local path)")
    report.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec option, repeatable"
    )
    return parser


def _add_storage_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec option, repeatable"
    )


def _pairs(flag: str, pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict; anything else is an error naming the flag and the argument."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommitterError(f"{flag} {pair!r}: expected KEY=VALUE")
        options[key] = value
    return options


def _conf(pairs: Sequence[str]) -> dict[str, str]:
    """``--conf`` entries as committer keys: a short form (``io.threads``, as the help shows keys) is the key of
    the committer's family it ends; every other key must be a committer key, or is an error naming it."""
    from .config import check_key, nearest_key, short_form

    conf: dict[str, str] = {}
    for key, value in _pairs("--conf", pairs).items():
        full = short_form(key) or key
        try:
            known = check_key(full)
        except CommitterError as error:
            raise CommitterError(f"--conf {error}") from None
        if known is None:
            near = nearest_key(full)
            guess = f"; did you mean `{near}`?" if near else ""
            raise CommitterError(f"--conf {key}: not a committer configuration key{guess}")
        conf[full] = value
    return conf


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    return dict(_pairs("--storage-option", pairs))


def _read(path: str, options: dict[str, Any]) -> bytes:
    """Read a file; a percent-encoded URL pasted from a manifest or ``_SUCCESS`` is decoded if need be."""
    try:
        return read_url(path, options)
    except ManifestError:
        decoded = decode_path(path) if "%" in path else path
        if decoded == path:
            raise
        return read_url(decoded, options)


def _one_line(text: str) -> str:
    return " ".join(text.split())


_OPERATIONS = ("status", "commit", "abort", "rollback", "vacuum")
"""The commands that act on a destination (``manifest_committer.operate``)."""


def _operate(args: argparse.Namespace, options: dict[str, Any]) -> str:
    """``status``, ``commit``, ``abort``, ``rollback`` and ``vacuum``: the operations on a destination."""
    import orjson

    from .config import CommitterConfig
    from .operate.commands import JobRequest, run_abort, run_commit
    from .operate.status import format_status, inspect_destination
    from .operate.transactional import DestinationRequest, run_rollback, run_vacuum
    from .store.factory import open_destination_store

    _log_warnings_on_one_line()
    config = CommitterConfig.from_hadoop_conf(_conf(args.conf))
    if args.command == "status":
        opened = open_destination_store(args.destination, options)
        try:
            status = inspect_destination(opened.store, opened.path, config, count_data_files=not args.no_file_count)
        finally:
            opened.store.close()
        if args.json:
            return orjson.dumps(status.to_dict(), option=orjson.OPT_INDENT_2).decode()
        return format_status(status)
    if args.command in ("rollback", "vacuum"):
        destination = DestinationRequest(args.destination, config, options)
        if args.command == "rollback":
            return run_rollback(destination, args.job, dry_run=args.dry_run)
        return run_vacuum(destination, args.retention_hours, dry_run=args.dry_run)
    request = JobRequest(args.destination, args.job, args.attempt, config, options)
    if args.command == "abort":
        return run_abort(request, dry_run=args.dry_run)
    on_terminal = sys.stderr.isatty() and sys.stdout.isatty() and not args.no_progress
    return run_commit(request, progress_stream=sys.stderr if on_terminal else None)


def _log_warnings_on_one_line() -> None:
    """The library only logs; the command line shows its warnings, one line each, on stderr."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


def _where(args: argparse.Namespace, error: BaseException) -> str:
    """For an operation on a destination, a store error that does not name its path gets the job and place."""
    if isinstance(error, CommitterError) or args.command not in _OPERATIONS:
        return ""
    job = f"job {args.job} at " if getattr(args, "job", None) else ""
    kind = type(error).__name__
    return f"{args.command} of {job}{args.destination}: {kind}: "


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors print one line to stderr and return a non-zero status."""
    args = _parser().parse_args(argv)
    try:
        options = _storage_options(args.storage_option)
        if args.command == "report":
            from .report.command import run_report

            return run_report(args.paths, args.html, options)
        if args.command in _OPERATIONS:
            text = _operate(args, options)
        elif args.command == "success":
            data = _read(args.path, options)
            success = SuccessData.from_json(data, args.path)
            text = success.to_json().decode() if args.json else format_success(success, args.path)
        else:
            data = _read(args.path, options)
            manifest = TaskManifest.from_json(data, args.path)
            text = data.decode("utf-8", errors="replace") if args.json else format_manifest(manifest, args.path)
    except (CommitterError, OSError, ValueError) as error:
        report = getattr(error, "report", None)  # a command that did part of its work says what it changed
        if isinstance(report, str):
            print(report.rstrip("\n"))
        print(f"{PROG}: error: {_where(args, error)}{_one_line(str(error))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C: one line (a commit says what it moved), no traceback
        print(f"{PROG}: interrupted" + (f": {interrupt}" if str(interrupt) else ""), file=sys.stderr)
        return 130
    except Exception as error:  # a bug or an unforeseen document: still one line, naming the file
        where = getattr(args, "path", None) or getattr(args, "destination", None) or ", ".join(args.paths)
        print(f"{PROG}: error: {where}: {type(error).__name__}: {_one_line(str(error))}", file=sys.stderr)
        return 1
    try:
        print(text.rstrip("\n"))
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
