"""Turn loaded reports into the figures of the page: one summary per run, percentiles across runs.

Everything is derived from the ``_SUCCESS``/summary JSON alone, so Hadoop's files work as well as ours. A
duration statistic ``X`` is read from ``X.mean`` (its sum is the total time, in ms) plus ``X.failures.mean``;
where Hadoop kept only ``X.min``/``X.max`` (a single sample), the maximum stands in. Percentiles interpolate
linearly between the closest ranks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..iostatistics import FAILURES, IOStatisticsSnapshot
from ..statistic_names import (
    COMMIT_FILE_RENAME,
    COMMIT_FILE_RENAME_RECOVERED,
    COMMITTER_BYTES_COMMITTED,
    COMMITTER_COMMIT_JOB,
    COMMITTER_FILES_COMMITTED,
    COMMITTER_TASK_FILE_COUNT,
    COMMITTER_TASK_FILE_SIZE,
    JOB_STAGE_ABORT,
    JOB_STAGE_CLEANUP,
    JOB_STAGE_CREATE_TARGET_DIRS,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    JOB_STAGE_RENAME_FILES,
    JOB_STAGE_SAVE_SUCCESS_MARKER,
    JOB_STAGE_SETUP,
    STORE_IO_RATE_LIMITED,
    STORE_IO_RETRY,
)
from ..success_data import DIAGNOSTIC_EXCEPTION, DIAGNOSTIC_STACKTRACE, DIAGNOSTIC_STAGE
from .loading import LoadedDocuments, Run, Skipped

log = logging.getLogger(__name__)

JOB_STAGES = (
    JOB_STAGE_SETUP,
    JOB_STAGE_LOAD_MANIFESTS,
    JOB_STAGE_CREATE_TARGET_DIRS,
    JOB_STAGE_RENAME_FILES,
    JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT,
    JOB_STAGE_SAVE_SUCCESS_MARKER,
    JOB_STAGE_CLEANUP,
    JOB_STAGE_ABORT,
)
"""The job's stages in the order the protocol runs them: the order of the waterfall."""

OPERATION_PREFIXES = ("op_", "task_stage_", COMMIT_FILE_RENAME)
"""Statistics shown as per-call latencies: store operations, task stages (many per job), file renames."""

Outcome = Literal["succeeded", "failed", "aborted"]


@dataclass(frozen=True, slots=True)
class StageTime:
    """One stage of one run: total time in ms (``None`` when only a failure count was kept) and whether it failed."""

    name: str
    millis: int | None
    failed: bool


@dataclass(frozen=True, slots=True)
class SampleRange:
    """A sample statistic of one run (such as files per task manifest): how many samples, least, mean, most."""

    samples: int
    minimum: int
    mean: float
    maximum: int


@dataclass(frozen=True, slots=True)
class OperationLatency:
    """One store operation in one run: calls, failed calls, mean and longest call in ms."""

    calls: int
    failures: int
    mean_ms: float
    max_ms: int | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the page shows of one run.

    ``duration_ms`` is the job commit as the committer timed it (``commit_job_ms``) or, where it was not timed
    (an abort, a failure before it, some of Hadoop's files), the sum of the stage times that were kept.
    """

    index: int
    source: str
    also_at: tuple[str, ...]
    job_id: str
    protocol: str
    store: str
    store_from_filenames: bool
    outcome: Outcome
    failing_stage: str | None
    files: int | None
    bytes: int | None
    duration_ms: int | None
    commit_job_ms: int | None
    timestamp: int
    date: str
    hostname: str
    stages: tuple[StageTime, ...]
    retries: int
    rate_limited: int
    rate_limited_ms: int | None
    renames_recovered: int
    files_per_manifest: SampleRange | None
    bytes_per_manifest: SampleRange | None
    operations: dict[str, OperationLatency]
    exception: str | None
    stacktrace: str | None
    diagnostics: dict[str, str]


@dataclass(frozen=True, slots=True)
class Percentiles:
    """One statistic across runs: in how many runs it appears, its p50, p95 and maximum (ms), calls, failures."""

    name: str
    runs: int
    p50: float
    p95: float
    maximum: float
    calls: int
    failures: int


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page renders."""

    runs: tuple[RunSummary, ...]
    skipped: tuple[Skipped, ...]
    files_found: int
    stage_percentiles: tuple[Percentiles, ...]
    operation_percentiles: tuple[Percentiles, ...]


def percentile(values: Sequence[float], rank: float) -> float:
    """The ``rank``-th percentile (0-100) of ``values``, interpolated linearly between the closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * rank / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def duration_ms(stats: IOStatisticsSnapshot, name: str) -> int | None:
    """Total ms spent in duration statistic ``name``, failed calls included; ``None`` if no time was kept."""
    total: int | None = None
    for key in (name, name + FAILURES):
        mean = stats.meanstatistics.get(key + ".mean")
        if mean is not None and mean.samples:
            total = (total or 0) + mean.sum
        elif key + ".max" in stats.maximums:
            total = (total or 0) + stats.maximums[key + ".max"]
    return total


def _sample_range(stats: IOStatisticsSnapshot, name: str) -> SampleRange | None:
    mean = stats.meanstatistics.get(name)
    if mean is None or not mean.samples or name not in stats.minimums or name not in stats.maximums:
        return None
    return SampleRange(mean.samples, stats.minimums[name], mean.mean, stats.maximums[name])


def _operations(stats: IOStatisticsSnapshot) -> dict[str, OperationLatency]:
    result: dict[str, OperationLatency] = {}
    for key, mean in stats.meanstatistics.items():
        if not key.endswith(".mean"):
            continue
        name = key.removesuffix(".mean")
        if name.endswith(FAILURES) or not name.startswith(OPERATION_PREFIXES):
            continue
        failures = stats.counters.get(name + FAILURES, 0)
        if not mean.samples and not failures:
            continue
        result[name] = OperationLatency(mean.samples, failures, mean.mean, stats.maximums.get(name + ".max"))
    return dict(sorted(result.items()))


def _store_scheme(run: Run) -> tuple[str, bool]:
    """The URL scheme of the committed files; without file names, that of the report's own location."""
    for name in run.document.filenames:
        scheme = urlsplit(name).scheme
        if scheme:
            return scheme, True
    return urlsplit(run.source).scheme or "file", False


def _stages(stats: IOStatisticsSnapshot) -> tuple[StageTime, ...]:
    stages: list[StageTime] = []
    for name in JOB_STAGES:
        failed = stats.counters.get(name + FAILURES, 0) > 0
        millis = duration_ms(stats, name)
        if millis is not None or failed or stats.counters.get(name, 0) > 0:
            stages.append(StageTime(name, millis, failed))
    return tuple(stages)


def summarize_run(index: int, run: Run) -> RunSummary:
    """The page's view of one run."""
    document = run.document
    stats = document.iostatistics
    diagnostics = document.diagnostics
    stage = diagnostics.get(DIAGNOSTIC_STAGE) or document.stage
    exception = diagnostics.get(DIAGNOSTIC_EXCEPTION)
    outcome: Outcome
    if document.success:
        outcome = "succeeded"
    elif stage == JOB_STAGE_ABORT and exception is None:
        outcome = "aborted"
    else:
        outcome = "failed"
    stages = _stages(stats)
    commit_job = duration_ms(stats, COMMITTER_COMMIT_JOB)
    total = commit_job
    if total is None:
        known = [s.millis for s in stages if s.millis is not None]
        total = sum(known) if known else None
    store, from_filenames = _store_scheme(run)
    return RunSummary(
        index=index,
        source=run.source,
        also_at=run.also_at,
        job_id=document.job_id,
        protocol=document.committer,
        store=store,
        store_from_filenames=from_filenames,
        outcome=outcome,
        failing_stage=stage if outcome == "failed" else None,
        files=stats.counters.get(COMMITTER_FILES_COMMITTED),
        bytes=stats.counters.get(COMMITTER_BYTES_COMMITTED),
        duration_ms=total,
        commit_job_ms=commit_job,
        timestamp=document.timestamp,
        date=document.date,
        hostname=document.hostname,
        stages=stages,
        retries=stats.counters.get(STORE_IO_RETRY, 0),
        rate_limited=stats.counters.get(STORE_IO_RATE_LIMITED, 0),
        rate_limited_ms=duration_ms(stats, STORE_IO_RATE_LIMITED),
        renames_recovered=stats.counters.get(COMMIT_FILE_RENAME_RECOVERED, 0),
        files_per_manifest=_sample_range(stats, COMMITTER_TASK_FILE_COUNT),
        bytes_per_manifest=_sample_range(stats, COMMITTER_TASK_FILE_SIZE),
        operations=_operations(stats),
        exception=exception,
        stacktrace=diagnostics.get(DIAGNOSTIC_STACKTRACE),
        diagnostics=dict(sorted(diagnostics.items())),
    )


def _percentiles(name: str, values: Sequence[float], calls: int, failures: int) -> Percentiles:
    return Percentiles(name, len(values), percentile(values, 50), percentile(values, 95), max(values), calls, failures)


def stage_percentiles(runs: Iterable[RunSummary]) -> tuple[Percentiles, ...]:
    """p50/p95 of each job stage's time per run (and of the whole job commit), over the runs that timed it; the
    failures of a stage are the runs it failed in, those of the job commit the runs whose outcome is ``failed``."""
    values: dict[str, list[float]] = {}
    failures: dict[str, int] = {}
    for run in runs:
        if run.duration_ms is not None:
            values.setdefault(COMMITTER_COMMIT_JOB, []).append(run.duration_ms)
        failures[COMMITTER_COMMIT_JOB] = failures.get(COMMITTER_COMMIT_JOB, 0) + int(run.outcome == "failed")
        for stage in run.stages:
            failures[stage.name] = failures.get(stage.name, 0) + int(stage.failed)
            if stage.millis is not None:
                values.setdefault(stage.name, []).append(stage.millis)
    order = (*JOB_STAGES, COMMITTER_COMMIT_JOB)
    return tuple(
        _percentiles(name, values[name], len(values[name]), failures.get(name, 0)) for name in order if name in values
    )


def operation_percentiles(runs: Iterable[RunSummary]) -> tuple[Percentiles, ...]:
    """p50/p95 across runs of each operation's mean call time per run; maximum is the longest single call."""
    means: dict[str, list[float]] = {}
    longest: dict[str, float] = {}
    calls: dict[str, int] = {}
    failures: dict[str, int] = {}
    for run in runs:
        for name, latency in run.operations.items():
            if latency.calls:
                means.setdefault(name, []).append(latency.mean_ms)
            if latency.max_ms is not None:
                longest[name] = max(longest.get(name, 0.0), latency.max_ms)
            calls[name] = calls.get(name, 0) + latency.calls
            failures[name] = failures.get(name, 0) + latency.failures
    result = []
    for name in sorted(means):
        entry = _percentiles(name, means[name], calls[name], failures[name])
        result.append(
            Percentiles(
                name, entry.runs, entry.p50, entry.p95, longest.get(name, entry.maximum), entry.calls, entry.failures
            )
        )
    return tuple(result)


def summarize(loaded: LoadedDocuments) -> ReportData:
    """Summaries of every run and the percentiles across them."""
    runs = tuple(summarize_run(index, run) for index, run in enumerate(loaded.runs))
    log.debug("Summarized %d runs (%d inputs skipped)", len(runs), len(loaded.skipped))
    return ReportData(runs, loaded.skipped, loaded.files_found, stage_percentiles(runs), operation_percentiles(runs))
