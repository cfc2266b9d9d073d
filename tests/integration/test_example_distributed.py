"""The distributed example runs as a user runs it, from a checkout, in one command: PyTorch
DDP on two tasks, worker-1 killed after step 10, the gang restarted and resumed from the
last checkpoint, exactly."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.integration import ddp_rig

pytestmark = [pytest.mark.slow, pytest.mark.torch]

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "distributed" / "run.py"


def test_the_example_resumes_from_its_checkpoint_after_a_worker_is_killed(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=110, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    killed = re.search(r"^# step (\d+) done: killing worker-1 \(pid \d+\)", out, re.M)
    assert killed and int(killed.group(1)) >= 10, out
    first, second = out.split("\nattempt 2: resuming after step ", 1)
    resumed = int(second.split(" ", 1)[0])
    before, after = ddp_rig.losses(first), ddp_rig.losses(second)
    assert 10 <= resumed <= max(before) and resumed % 5 == 0
    assert sorted(after) == list(range(resumed + 1, 31))
    # The restart carried on from the same weights: the steps run twice, the same loss.
    assert {s: before[s] for s in before if s in after} == {
        s: after[s] for s in before if s in after}
    assert re.search(r"^1 .* exit with 137 +worker-1 +user_exit +proc_restart$", out, re.M)
    assert re.search(r"^2 .* restarted +job completed", out, re.M)
    assert "Restarting in 1 s after worker-1 exit with 137 (retry 1 of 2)" in out
    model = tmp_path / "home-work" / "distributed" / "output" / "model.pt"
    assert model.stat().st_size > 0
