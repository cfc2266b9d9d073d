"""The datasets example run as a user runs it, from a checkout, in one command: two
versions of a growing dataset, a job trained on each reads only its version's samples, and
each model version names the dataset version it came from."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "datasets" / "run.py"


def test_the_datasets_example_trains_on_each_version_and_shows_the_lineage(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=180, env=env)

    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "read 40 samples of dataset points version V0001" in out
    assert "read 80 samples of dataset points version V0002" in out
    assert "dataset read (data_url)  points V0001" in out
    assert "dataset 'points' has no version 'V0009'" in out
    versions = tmp_path / "home" / "datasets"
    assert len(list(versions.glob("*/*/*/samples.csv"))) == 2  # frozen copies, kept
