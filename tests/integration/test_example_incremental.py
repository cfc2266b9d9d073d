"""The incremental-learning example runs on its own, as the README says: three rounds, one
rejected, two promoted, the service reloading each promoted model."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import psutil
import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "incremental" / "run.py"


def test_the_example_shows_three_rounds_and_the_services_reloads(
        tmp_path: pathlib.Path) -> None:
    proc = subprocess.run([sys.executable, str(RUN), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdicts = re.findall(r"^round (\d): (\w+):", proc.stdout, re.M)
    assert verdicts == [("1", "Promoted"), ("2", "Rejected"), ("3", "Promoted")], proc.stdout
    reloads = re.findall(r"reloaded model (drift-model-v\d)", proc.stdout)
    assert reloads == ["drift-model-v1", "drift-model-v2", "drift-model-v4"], proc.stdout
    assert "the loop is stopped, and its service with it" in proc.stdout
    left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
            if any(str(tmp_path) in arg for arg in p.info["cmdline"] or ())]
    assert left == [], left  # the service does not outlive the example
