"""The search benchmark still runs end to end (its figures are read by people, not
asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_search.py"


def test_quick_benchmark_prints_its_tables_and_writes_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "early stopping (same sampler, seed and number of trials)" in proc.stdout
    assert "target: search p99 < 1 s:" in proc.stdout
    figures = json.loads(out.read_text())
    assert len(figures["early_stopping"]["to_the_end"]["states"]) == 4
    assert len(figures["handoff"]["search"]) == 6
