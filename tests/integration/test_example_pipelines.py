"""The pipeline examples run as a user runs them, from a checkout, in one command each."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pipelines"


def run(example: str, home: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, str(EXAMPLES / example / "run.py"), "--home",
                           str(home)], capture_output=True, text=True, timeout=120, env=env)


def test_the_mlp_pipeline_registers_the_better_variant(tmp_path: pathlib.Path) -> None:
    proc = run("mlp", tmp_path / "home")

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "spirals success 100%  attempt 1" in proc.stdout
    models = list((tmp_path / "home" / "models").glob("*/spirals-best/*/chosen.json"))
    assert len(models) == 1
    chosen = json.loads(models[0].read_text())
    assert chosen["variant"] == "b" and chosen["b"] > chosen["a"]  # 32 hidden units beat 3
    assert "3 output folder(s) removed" in proc.stdout


def test_the_repair_pipeline_fails_then_a_rerun_repairs_it(tmp_path: pathlib.Path) -> None:
    proc = run("repair", tmp_path / "home")

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "error: pipeline repair ended failed: validate failed" in proc.stderr
    assert "repair success 100%  attempt 2" in proc.stdout
    assert "fetch  success" in proc.stdout and "(reused)" in proc.stdout
    assert "model: repair-demo version 1" in proc.stdout
