"""The scale benchmark still runs end to end in its quick mode (its figures are read by
people, not asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"


def test_quick_scale_benchmark_prints_every_section(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-postgres", "--json", str(out),
         "--home-parent", str(tmp_path / "homes")],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )

    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in (
        "search by phase, first page, p99",
        "search by name prefix, first page, p99",
        "search by time range, first page, p99",
        "search, a page half way down by cursor, p99",
        "show events, p99",
        "server start until a search answers",
        "clients calling show and search at once",
        "one scheduling decision, median",
        "one reconciler pass, median",
        "submit one more, p99",
        "tasks running: server + launcher memory (PSS)",
        "server CPU while nothing changes",
        "a line's delay, max",
        "submissions sustained for",
        "clients following its log from its start",
        "/healthz once a second",
    ):
        assert line in proc.stdout, line
    figures = json.loads(out.read_text())
    assert set(figures) >= {"history", "queue", "running", "followers", "flood", "submit"}
    assert figures["history"]["SQLite"]["large"]["clients"]["errors"] == 0
    assert figures["running"]["running"] == figures["sizes"]["running"]
    assert figures["followers"]["lines"] > 0 and figures["followers"]["missing"] == 0
    assert figures["submit"]["SQLite"]["accepted"] > 0
    assert figures["flood"]["silent"] == 0 and figures["flood"]["healthz"]["probes"] > 0
    assert list((tmp_path / "homes").iterdir()) == []  # every temporary home is gone
