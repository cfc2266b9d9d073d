"""The hyperparameter search example run as a user runs it, from a checkout, in one
command: it completes, follows its trials live, and its best trial's model is registered
with the parameters the trial ran with."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "search" / "run.py"


def test_the_search_example_completes_and_registers_its_best_trial(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=240, env=env)

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = re.search(r"mlp-search Completed  asha_search, 8 trial\(s\)  best: trial (\d+): "
                        r"accuracy=([0-9.]+) \(lr=([0-9.e-]+), hidden=(\d+)\)", proc.stdout)
    assert summary, proc.stdout[-3000:]
    assert float(summary[2]) > 0.9
    assert "best so far: trial" in proc.stdout
    saved = list((tmp_path / "home" / "models").glob("*/mlp-search/*/model.npz"))
    assert len(saved) == 1
    # the model is the best trial's: its outputs went to trial-<n>/
    trial_out = tmp_path / "home-work" / "search-output" / f"trial-{summary[1]}"
    assert (trial_out / "model.npz").read_bytes() == saved[0].read_bytes()
