"""``manifest-committer``: print a ``_SUCCESS``/summary report or a task manifest for a person."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ._json import read_url
from .errors import CommitterError, ManifestError
from .iostatistics import IOStatisticsSnapshot
from .manifest import EntryStatus, TaskManifest
from .success_data import SuccessData
from .urls import decode_path


def _statistics_lines(stats: IOStatisticsSnapshot) -> list[str]:
    lines: list[str] = []
    counters = {k: v for k, v in sorted(stats.counters.items()) if v}
    if counters:
        lines.append("Counters:")
        width = max(len(k) for k in counters)
        lines.extend(f"  {k:<{width}}  {v:>12,}" for k, v in counters.items())
    means = {k: v for k, v in sorted(stats.meanstatistics.items()) if v.samples}
    if means:
        lines.append("Durations and samples (count, min, mean, max):")
        width = max(len(k) for k in means)
        for key, mean in means.items():
            base = key.removesuffix(".mean")
            low = stats.minimums.get(base + ".min", stats.minimums.get(base))
            high = stats.maximums.get(base + ".max", stats.maximums.get(base))
            lines.append(
                f"  {base:<{width}}  {mean.samples:>8,}  {_value(low):>10}  {mean.mean:>10,.1f}  {_value(high):>10}"
            )
    if stats.gauges:
        lines.append("Gauges:")
        lines.extend(f"  {k}  {v:,}" for k, v in sorted(stats.gauges.items()))
    return lines


def _value(number: int | None) -> str:
    return "-" if number is None else f"{number:,}"


def format_success(success: SuccessData, origin: str, max_filenames: int | None = None) -> str:
    """A ``_SUCCESS`` or summary report as text: outcome first, then what on-call needs to know."""
    lines = [
        f"Summary of {origin}",
        f"  Outcome:    {'SUCCESS' if success.success else 'FAILED'}",
        f"  Job:        {success.job_id} (id from {success.job_id_source})",
        f"  Committer:  {success.committer}",
        f"  Date:       {success.date}  on host {success.hostname}",
    ]
    counters = success.iostatistics.counters
    if "committer_files_committed" in counters:
        lines.append(
            f"  Committed:  {counters['committer_files_committed']:,} files, "
            f"{counters.get('committer_bytes_committed', 0):,} bytes"
        )
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
    lines.extend(_statistics_lines(success.iostatistics))
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
        f"  Files:         {len(manifest.files):,} ({manifest.total_size:,} bytes)",
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="manifest-committer", description="Inspect the files of the manifest committer (Hadoop's or ours)."
    )
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
    report = commands.add_parser("report", help="one HTML page of every _SUCCESS and summary-*.json under the paths")
    report.add_argument("paths", nargs="+", metavar="PATH", help="file or directory (searched recursively), or URL")
    report.add_argument("--html", required=True, metavar="OUT.html", help="the page to write (a local path)")
    report.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec option, repeatable"
    )
    return parser


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommitterError(f"--storage-option {pair!r}: expected KEY=VALUE")
        options[key] = value
    return options


def _read(path: str, options: dict[str, Any]) -> bytes:
    """Read a file; a percent-encoded URL pasted from a manifest or ``_SUCCESS`` is decoded if need be."""
    try:
        return read_url(path, options)
    except ManifestError:
        decoded = decode_path(path) if "%" in path else path
        if decoded == path:
            raise
        return read_url(decoded, options)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors print one line to stderr and return a non-zero status."""
    args = _parser().parse_args(argv)
    try:
        options = _storage_options(args.storage_option)
        if args.command == "report":
            from .report.command import run_report

            return run_report(args.paths, args.html, options)
        data = _read(args.path, options)
        if args.command == "success":
            success = SuccessData.from_json(data, args.path)
            text = success.to_json().decode() if args.json else format_success(success, args.path)
        else:
            manifest = TaskManifest.from_json(data, args.path)
            text = data.decode("utf-8", errors="replace") if args.json else format_manifest(manifest, args.path)
    except (CommitterError, OSError, ValueError) as error:
        print(f"manifest-committer: error: {error}", file=sys.stderr)
        return 1
    try:
        print(text.rstrip("\n"))
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
