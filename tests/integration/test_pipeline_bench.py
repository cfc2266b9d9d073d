"""The chain-latency benchmark still runs end to end and prints its figure (read by
people, never asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pipeline.py"


def test_quick_chain_benchmark_prints_its_figures(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "chain.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out),
         "--home-parent", str(tmp_path / "homes")],
        capture_output=True, text=True, timeout=100)

    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("downstream submitted after its upstream ended, p50",
                 "downstream submitted after its upstream ended, p99",
                 "p99 over FATE's 2 s poll:", "quoted, not measured"):
        assert line in proc.stdout
    figures = json.loads(out.read_text())
    assert figures["links"] == 7 and figures["pipeline"]["p99_ms"] >= 0
    assert list((tmp_path / "homes").iterdir()) == []  # the temporary home is gone
