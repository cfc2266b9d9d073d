"""The fault-tolerance example runs as a user runs it, from a checkout, in one command: a
crash resumed from its checkpoint, a failure its rule says not to retry, a hang found and
restarted."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "fault-tolerance" / "run.py"


def test_the_example_resumes_refuses_to_retry_and_restarts_a_hang(
        tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(RUN), "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=110, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    crash, no_retry, hang = re.split(r"^# \d\. .*$", out, flags=re.M)[1:]

    # 1. the first attempt crashed after epoch 5; the second started at epoch 6.
    assert "RuntimeError: simulated fault after epoch 5" in crash
    after = crash.split("attempt 2: resuming after epoch 5 from ", 1)[1]
    assert re.findall(r"^epoch (\d)/8", after, re.M) == ["6", "7", "8"]
    assert re.search(r"^1 .* exit with 1 +worker-0 +user_exit +proc_restart$", crash, re.M)
    assert re.search(r"^2 .* restarted +job completed", crash, re.M)
    model = tmp_path / "home-work" / "fault-tolerance" / "output" / "resume" / "model.json"
    assert round(json.loads(model.read_text())["w"]) == 3

    # 2. exit code 3 is not retried, though three retries are left.
    assert "Job failed: worker-0 exit with 3 (user_exit; rule exit code 3: do not retry)" \
        in no_retry
    assert no_retry.count("exited with code 3") == 1
    assert "ended Failed: worker-0: exit with 3" in proc.stderr

    # 3. the hang was found, its tasks stopped, and the restart resumed after epoch 3.
    assert "Job hung: worker-0 wrote no log for" in hang
    assert "Restarting after it hanged (retry 1 of 1)" in hang
    assert "attempt 2: resuming after epoch 3 from " in hang
    assert re.search(r"^1 .* hanged +- +hang +proc_restart$", hang, re.M)
