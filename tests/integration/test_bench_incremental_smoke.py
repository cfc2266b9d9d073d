"""The incremental-learning benchmark still runs end to end (its figures are read by
people, not asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_incremental.py"


def test_quick_benchmark_prints_its_table_and_writes_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trigger to train job, from the append that makes the condition hold" in proc.stdout
    assert "Sedna (quoted from its controller, not measured)" in proc.stdout
    figures = json.loads(out.read_text())
    assert len(figures["1"]["samples"]) == 3
