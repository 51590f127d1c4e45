"""The marker benchmark: every case reads back every marker, on local disk and on both emulators."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from multiprocessing.managers import SyncManager
from pathlib import Path

import pytest

from benchmarks import bench_markers
from benchmarks.bench_markers import LOCAL, Case, Result, Target, cases_for, ratios, run_case
from tests.fixtures.emulators import Emulator

PROCESSES = 2
THREADS = 2
MARKERS = 3


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[ProcessPoolExecutor, SyncManager]]:
    """Spawned writer processes and the manager of their start barrier, shared by the module's cases."""
    context = get_context("spawn")
    with ProcessPoolExecutor(PROCESSES, mp_context=context) as pool, context.Manager() as manager:
        yield pool, manager


def _run(target: Target, case: Case, workers: tuple[ProcessPoolExecutor, SyncManager]) -> Result:
    pool, manager = workers
    return run_case(case, target, processes=PROCESSES, threads=THREADS, pool=pool, manager=manager)


def _check(result: Result, case: Case) -> None:
    total = PROCESSES * THREADS * MARKERS
    assert (result.writers, result.markers, result.read_back, result.fallbacks) == (
        PROCESSES * THREADS,
        total,
        total,
        0,
    )
    if case.marker_type == "direct":
        assert result.store_calls >= total  # one write per marker, at least
        assert result.server_flushes == 0
    else:
        assert result.server_flushes >= 1
        flushes = result.calls.get("write_bytes", 0) + result.calls.get("append_bytes", 0)
        assert flushes >= result.server_flushes


@pytest.mark.parametrize("marker_type", ["direct", "batched"])
def test_local_disk_case_reads_back_every_marker(
    marker_type: str, tmp_path: Path, workers: tuple[ProcessPoolExecutor, SyncManager]
) -> None:
    case = Case(LOCAL, marker_type, 5, 0.0, MARKERS)
    result = _run(Target(LOCAL, root=str(tmp_path)), case, workers)
    _check(result, case)
    assert list(tmp_path.iterdir()) == []  # the case's destination is gone


def _emulator_case(emulator: Emulator, workers: tuple[ProcessPoolExecutor, SyncManager]) -> None:
    """Writers in spawned processes reach the emulator only through the storage options the case hands them."""
    target = Target(emulator.name, emulator=emulator)
    for case in (Case(emulator.name, "direct", 0, 0.0, MARKERS), Case(emulator.name, "batched", 5, 0.0, MARKERS)):
        _check(_run(target, case, workers), case)


@pytest.mark.azure
def test_azurite_cases_read_back_every_marker(
    azurite: Emulator, workers: tuple[ProcessPoolExecutor, SyncManager]
) -> None:
    _emulator_case(azurite, workers)


@pytest.mark.gcs
def test_fake_gcs_cases_read_back_every_marker(
    fake_gcs: Emulator, workers: tuple[ProcessPoolExecutor, SyncManager]
) -> None:
    _emulator_case(fake_gcs, workers)


def _result(store: str, kind: str, markers_per_second: int, p50_ms: float, store_calls: int) -> Result:
    return Result(
        case=f"{kind}, {store}",
        store=store,
        kind=kind,
        latency_ms=0.0,
        writers=64,
        markers=64_000,
        seconds=64_000 / markers_per_second,
        markers_per_second=markers_per_second,
        p50_ms=p50_ms,
        p99_ms=p50_ms * 2,
        store_calls=store_calls,
        server_flushes=0,
        fallbacks=0,
        read_back=64_000,
        load_average=1.0,
    )


def test_ratios_compare_each_batched_case_with_the_direct_case_of_its_store() -> None:
    results = [
        _result(LOCAL, "direct", 8_000, 0.2, 64_000),
        _result(LOCAL, "batched 50 ms", 1_000, 50.0, 3_200),
        _result("azurite", "direct", 500, 20.0, 64_000),
        _result("azurite", "batched 50 ms", 1_000, 50.0, 6_400),
    ]
    rows = {row["case"]: row for row in ratios(results)}
    assert set(rows) == {f"batched 50 ms, {LOCAL}", "batched 50 ms, azurite"}
    assert rows[f"batched 50 ms, {LOCAL}"]["throughput"] == 0.125
    assert rows[f"batched 50 ms, {LOCAL}"]["store_calls_per_marker"] == 0.05
    assert rows["batched 50 ms, azurite"]["throughput"] == 2.0
    assert rows["batched 50 ms, azurite"]["p50"] == 2.5


def test_injected_latency_runs_on_local_disk_only_and_emulators_take_their_own_marker_count() -> None:
    options = bench_markers.parse_options(
        ["--markers", "1000", "--emulator-markers", "200", "--latency-ms", "20", "--intervals", "50"]
    )
    local = cases_for(LOCAL, options)
    assert [(case.marker_type, case.latency, case.markers_per_writer) for case in local] == [
        ("direct", 0.0, 1000),
        ("batched", 0.0, 1000),
        ("direct", 0.02, 100),
        ("batched", 0.02, 100),
    ]
    emulator = cases_for("azurite", options)
    assert [(case.marker_type, case.latency, case.markers_per_writer) for case in emulator] == [
        ("direct", 0.0, 200),
        ("batched", 0.0, 200),
    ]


def test_an_unknown_store_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_markers.main(["--stores", "local,s3"])
    assert "unknown store(s) s3" in capsys.readouterr().err


def test_json_output_holds_results_and_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = [_result(LOCAL, "direct", 8_000, 0.2, 64_000), _result(LOCAL, "batched 10 ms", 2_000, 20.0, 6_400)]
    output = tmp_path / "markers.json"
    bench_markers.report(results, str(output), argv=["bench_markers.py"], when="2026-11-22 21:00")
    document = json.loads(output.read_text())
    assert [row["case"] for row in document["results"]] == [result.case for result in results]
    assert document["ratios"][0]["throughput"] == 0.25
    assert "| batched 10 ms, local disk | 0.25 |" in capsys.readouterr().out


def test_writers_on_another_host_reach_the_server_and_medians_are_reported(tmp_path: Path) -> None:
    """``--other-host``: writer processes in a network namespace of their own, the server at 192.0.2.1; no writer
    falls back to direct markers, and ``--repeat`` reports each case's median."""
    out = tmp_path / "results.json"
    argv = ["--other-host", "--stores", "local", "--processes", "1", "--threads", "2", "--markers", "3"]
    bench_markers.main([*argv, "--intervals", "5", "--repeat", "2", "--root", str(tmp_path), "--json", str(out)])

    document = json.loads(out.read_text())
    assert len(document["results"]) == 4 and len(document["medians"]) == 2
    assert all(result["fallbacks"] == 0 and result["read_back"] == 6 for result in document["results"])
    assert [median["case"] for median in document["medians"]] == [
        "direct, local disk (median of 2)",
        "batched 5 ms, local disk (median of 2)",
    ]


def test_the_other_host_run_leaves_the_calling_process_in_its_own_network_namespace(tmp_path: Path) -> None:
    """A test (or any caller) of ``main`` keeps its network: the benchmark moves a process of its own."""
    before = os.readlink("/proc/self/ns/net")
    argv = ["--other-host", "--stores", "local", "--processes", "1", "--threads", "1", "--markers", "1"]
    bench_markers.main([*argv, "--intervals", "5", "--root", str(tmp_path)])
    assert os.readlink("/proc/self/ns/net") == before
