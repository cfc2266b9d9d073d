"""The local benchmark still runs end to end (its figures are read by people, not asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_local.py"


def test_quick_benchmark_prints_its_table_and_writes_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--history", "50", "--json", str(out),
         "--home-parent", str(tmp_path / "homes")],
        capture_output=True,
        text=True,
        timeout=100,
    )

    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in (
        "per-job overhead, watched, median",
        "per-job overhead, polled every 2 ms, median",
        "jobs at once, all ended",
        "idle RSS (server, launcher), after start",
        "terminate until Terminated, median",
        "quoted, not measured",
        "CPU per job in the 20-job run",
        "the task (the job's processes)",
        "its launcher process",
    ):
        assert line in proc.stdout
    assert "50 finished jobs in the database first" in proc.stdout
    assert f"CORRAL_HOME under {tmp_path / 'homes'} (a mkdir there: " in proc.stdout
    figures = json.loads(out.read_text())
    assert figures["mkdir_us"] > 0
    assert list((tmp_path / "homes").iterdir()) == []  # the temporary home is gone
    assert figures["burst"]["completed"] == figures["burst"]["jobs"]
    cpu = figures["burst"]["cpu"]
    # Every job ran a real interpreter under the server, which itself did some work.
    assert cpu["tasks_ms_per_job"] > 1 and cpu["bare_task_ms_per_job"] > 1
    # The tasks are the launcher's children: their CPU above counts only through it.
    assert cpu["server_ms_per_job"] > 0 and "launcher_ms_per_job" in cpu
    assert 0 <= cpu["idle_cores"] <= figures["cpus"] * 1.05


SCHED = BENCH.parent / "bench_scheduler.py"


def test_quick_scheduler_benchmark_prints_both_policies(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "sched.json"
    proc = subprocess.run(
        [sys.executable, str(SCHED), "--quick", "--queued", "2000", "--json", str(out)],
        capture_output=True, text=True, timeout=100,
    )

    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("utilisation of usable", "gang-2x8 wait p99 (min)", "fairness (Jain",
                 "decision time, 2000 queued, 100 nodes",
                 "reconciler pass on SQLite, 2000 queued"):
        assert line in proc.stdout
    figures = json.loads(out.read_text())
    assert set(figures["policies"]) == {"corral", "fifo"}
    assert figures["decision"]["queued"] == 2000
    assert figures["reconciler_pass"]["running_tasks"] > 0
