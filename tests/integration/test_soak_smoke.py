"""The soak check (benchmarks/soak.py) still runs end to end, and says FAIL when a job's
side effects show it ran twice, never ended or did not complete."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_quick_soak_kills_and_freezes_the_server_and_every_job_runs_once(
        tmp_path: pathlib.Path) -> None:
    homes = tmp_path / "homes"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "soak.py"), "--quick", "--seed", "3",
         "--home-parent", str(homes)],
        capture_output=True, text=True, timeout=240, cwd=BENCHMARKS)

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PASS: 4 jobs through 3 faults; each ran once and completed" in proc.stdout
    assert any(w in proc.stdout for w in ("kill -9 server 0", "freeze server 0"))
    assert list(homes.iterdir()) == []  # its temporary home is gone


def test_the_tally_names_each_job_that_did_not_run_exactly_once_and_complete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import soak

    lines = ["start-0", "end-0", "start-1", "start-1", "end-1", "end-1", "start-2",
             "start-3", "end-3"]
    problems = soak.tally(lines, ["a", "b", "c", "d"],
                          ["Completed", "Completed", "Completed", "Failed"])

    assert problems == [
        "job 1 (b): started 2 time(s), ended 2 time(s), Completed",
        "job 2 (c): started 1 time(s), ended 0 time(s), Completed",
        "job 3 (d): started 1 time(s), ended 1 time(s), Failed",
    ]
    assert soak.tally(["start-0", "end-0"], ["a"], ["Completed"]) == []
