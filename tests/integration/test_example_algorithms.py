"""The algorithms example run as a user runs it, from a checkout, in one command: the
algorithm saved and shown, a job made of it trained with the algorithm's defaults and its
own hidden=32, a learning rate out of range refused, and the job kept whole once the
algorithm is deleted."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "algorithms" / "run.py"


def test_the_algorithms_example_trains_a_job_made_of_an_algorithm(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=180, env=env)

    out = proc.stdout + proc.stderr  # (`logs -f` says how the job ended on stderr)
    assert proc.returncode == 0, out[-3000:]
    assert "hidden=32" in out and "ended Completed" in out
    assert "parameter 'lr' of algorithm 'mlp-spirals': 0.5 is outside [0.00001, 0.1]" in out
    assert "deleted algorithm mlp-spirals" in out
    assert "mlp-from-algorithm is Completed, made from algorithm mlp-spirals" in out
    assert "--epochs=120 --lr=0.005 --hidden=32" in out
    assert (tmp_path / "home-work" / "mlp-from-algorithm" / "model.npz").is_file()
