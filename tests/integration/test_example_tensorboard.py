"""The TensorBoard example runs as a user runs it, from a checkout, in one command: a real
TensorBoard over the summaries a real job writes, reached through corral's proxy with the
cookie the job's link gives, while the job runs and after it has ended."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "tensorboard" / "run.py"


def test_the_example_reads_the_job_s_summaries_through_the_proxy(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=110, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "a browser that has not opened the link is refused: 401" in out
    assert "corral's cookie corral-tensorboard set" in out
    assert re.search(r"after it ended: 60 steps; loss 3\.\d+ at step 0, 0\.0\d+ at step 59",
                     out), out[-2000:]
    events = list((tmp_path / "home-work" / "output" / "tb").glob("events.out.tfevents.*"))
    assert len(events) == 1  # where algorithm.summary said, in the output channel
