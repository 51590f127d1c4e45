"""A real multi-task write: worker processes write partitioned CSV through the committer, one attempt fails
and is retried, and the driver commits the job and prints the ``_SUCCESS`` summary.

Run: ``python examples/multi_task_write.py [--dest DIR] [--tasks N] [--rows N]``. Needs the ``examples`` extra
(``pip install '.[examples]'`` from a clone of the repository) for its multi-process log handler.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import os
import random
import shutil
import sys
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import manifest_committer as mc
from manifest_committer.cli import format_success
from manifest_committer.operate.progress import CommitProgressBar

COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN")
DAYS = tuple(f"2026-11-{day:02d}" for day in range(15, 22))


@dataclass(frozen=True)
class TaskPlan:
    destination: str
    job_id: str
    task_index: int
    rows: int
    fail_first_attempt: bool
    log_file: str


MISSING_LOG_HANDLER = (
    "examples/multi_task_write.py needs concurrent-log-handler, which the library itself does not: "
    "pip install '.[examples]' (from a clone of the repository) or pip install concurrent-log-handler"
)


def log_handler_missing() -> bool:
    """Whether the example's extra is missing; checked before any work starts, so the user sees one line."""
    try:
        import concurrent_log_handler  # noqa: F401
    except ImportError:
        return True
    return False


def configure_logging(log_file: str) -> None:
    """Driver and workers append to one log file; the handler's lock keeps their lines whole."""
    from concurrent_log_handler import ConcurrentRotatingFileHandler

    handler = ConcurrentRotatingFileHandler(log_file, maxBytes=10_000_000, backupCount=2)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


class SimulatedCrashError(RuntimeError):
    """The failure injected into one task's first attempt."""


def write_partitions(task: mc.TaskAttempt, plan: TaskPlan, attempt: int) -> int:
    """Generate rows for one task and write one CSV file per (day, country) partition under the attempt dir."""
    generator = random.Random(plan.task_index)
    partitions: dict[tuple[str, str], io.StringIO] = {}
    for row_number in range(plan.rows):
        day, country = generator.choice(DAYS), generator.choice(COUNTRIES)
        buffer = partitions.get((day, country))
        if buffer is None:
            buffer = partitions[(day, country)] = io.StringIO()
            csv.writer(buffer).writerow(["event_id", "user", "amount"])
        csv.writer(buffer).writerow(
            [f"{plan.task_index}-{row_number}", generator.randrange(10_000), round(generator.uniform(1, 500), 2)]
        )
        if plan.fail_first_attempt and attempt == 0 and row_number == plan.rows // 2:
            raise SimulatedCrashError(f"task {plan.task_index} attempt {attempt} crashed half-way")
    for (day, country), buffer in sorted(partitions.items()):
        name = f"dt={day}/country={country}/part-{plan.task_index:05d}-{plan.job_id}.csv"
        with task.fs.open(f"{task.work_path}/{name}", "wb") as handle:
            handle.write(buffer.getvalue().encode())
    return len(partitions)


def run_task(plan: TaskPlan) -> str:
    """One task in a worker process: its own committer object, attempts until one commits."""
    configure_logging(plan.log_file)
    with mc.ManifestCommitter(plan.destination, job_id=plan.job_id) as committer:
        task_id = f"task_{plan.task_index:05d}"
        for attempt in range(2):
            task = committer.setup_task(task_id, f"attempt_{plan.task_index:05d}_{attempt}")
            try:
                files = write_partitions(task, plan, attempt)
            except SimulatedCrashError as crash:
                committer.abort_task(task)  # what a framework does with a failed attempt
                print(f"  {task.attempt_id}: {crash}; aborted, retrying", flush=True)
                continue
            manifest = committer.commit_task(task)
            return f"  {task.attempt_id}: committed {len(manifest.files)} files ({files} partitions)"
    raise RuntimeError(f"{task_id}: every attempt failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default="example-output/events", help="destination directory or fsspec URL")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--rows", type=int, default=50_000, help="rows per task")
    args = parser.parse_args()
    if log_handler_missing():
        print(f"error: {MISSING_LOG_HANDLER}", file=sys.stderr)
        return 2
    if os.path.isdir(args.dest):
        shutil.rmtree(args.dest)
    log_file = os.path.join(os.path.dirname(os.path.abspath(args.dest)), "committer.log")
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    configure_logging(log_file)
    job_id = f"job-{uuid.uuid4()}"
    config = mc.CommitterConfig(validate_output=True, summary_report_directory=os.path.dirname(args.dest) or ".")
    driver = mc.ManifestCommitter(args.dest, job_id=job_id, config=config, job_id_source="example")
    driver.setup_job()
    print(f"Job {job_id}: {args.tasks} tasks x {args.rows:,} rows into {driver.destination_url}")
    plans = [
        TaskPlan(args.dest, job_id, index, args.rows, fail_first_attempt=index == 3, log_file=log_file)
        for index in range(args.tasks)
    ]
    with ProcessPoolExecutor(max_workers=min(args.tasks, os.cpu_count() or 2)) as workers:
        try:
            for line in workers.map(run_task, plans):
                print(line)
        except BaseException:
            driver.abort_job()
            raise
    # A bar on a terminal only (files renamed of the total); into a pipe or a log nothing is drawn.
    on_terminal = sys.stdout.isatty() and sys.stderr.isatty()
    with CommitProgressBar(job_id, sys.stderr, enabled=on_terminal) as bar:
        summary = driver.commit_job(progress=bar)
    driver.close()  # waits until the job's temporary state is deleted
    print()
    print(format_success(summary, f"{args.dest}/_SUCCESS", max_filenames=5))
    rows, files = count_rows(args.dest)
    expected = args.tasks * args.rows
    print(f"\nRead back {rows:,} rows from {files} files; expected {expected:,}. Log: {log_file}")
    return 0 if rows == expected else 1


def count_rows(destination: str) -> tuple[int, int]:
    """Rows in every committed CSV file (headers excluded): proof that exactly one attempt per task landed."""
    rows = files = 0
    for directory, _, names in os.walk(destination):
        for name in names:
            if name.endswith(".csv"):
                files += 1
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    rows += sum(1 for _ in handle) - 1
    return rows, files


if __name__ == "__main__":
    sys.exit(main())
