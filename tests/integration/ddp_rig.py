"""What the PyTorch DDP tests share (examples/distributed/train.py run as a corral job on
this machine and on a local Ray cluster): the job, its logs, and the process of a task to
kill."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
from typing import Any

from corral.oskit import procs
from tests import factories
from tests.conftest import Live

TRAIN = pathlib.Path(__file__).resolve().parents[2] / "examples" / "distributed" / "train.py"


def ddp_job(tmp_path: pathlib.Path, *, flavor_id: str = "corral.cpu.1u", steps: int = 30,
            seconds_per_step: float = 0.1, retries: int | None = None,
            **overrides: Any) -> dict[str, Any]:
    """The example's job on two tasks, its checkpoints in `tmp_path/out`."""
    code = factories.write_code(tmp_path, TRAIN.read_text())
    return factories.make_job(
        code_dir=code, flavor_id=flavor_id, node_count=2, retries=retries,
        parameters={"steps": str(steps), "checkpoint_every": "5",
                    "seconds_per_step": str(seconds_per_step)},
        outputs={"train_url": str(tmp_path / "out")}, environments={"OMP_NUM_THREADS": "1"},
        fault_tolerance={"checkpoint": "train_url", "backoff": {"initial": 1}}, **overrides)


def log_of(live: Live, job_id: str, task: str = "worker-0", attempt: int | None = None) -> str:
    q = f"?offset=0&attempt={attempt}" if attempt else "?offset=0"
    r = live.http.get(live.path(f"/training-jobs/{job_id}/tasks/{task}/logs{q}"))
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def losses(text: str) -> dict[int, str]:
    """Step -> the loss rank 0 printed for it."""
    return {int(s): loss for s, loss in re.findall(r"^step (\d+)/\d+ loss=(\S+)", text, re.M)}


def finals(text: str) -> list[str]:
    """The sum of the weights a rank ended with (the same on every rank under DDP)."""
    # Anywhere in a line: ranks sharing a log may write into each other's lines.
    return re.findall(r"final: rank \d+ loss=\S+ params=(-?[0-9.]+)", text)


def pid_of(job_id: str, task: str, attempt: int = 1) -> int | None:
    """The training process of a task's attempt, on this machine (its variables say whose
    it is; Ray's local nodes are this machine too)."""
    for pid in procs.carrying(f"CORRAL_JOB_ID={job_id}".encode(),
                              f"CORRAL_TASK_ID={task}".encode(),
                              f"CORRAL_ATTEMPT={attempt}".encode()):
        with contextlib.suppress(OSError):
            if any(b"train.py" in arg for arg in procs.cmdline(pid)):
                return pid
    return None


def environ(pid: int) -> dict[str, str]:
    return dict(v.decode().split("=", 1) for v in procs.environ(pid) if b"=" in v)


def kill_worker_1_after(live: Live, job_id: str, step: int) -> list[dict[str, str]]:
    """SIGKILL worker-1's first attempt once rank 0 has logged `step`; the environments
    both ranks had."""
    factories.wait_for(lambda: max(losses(log_of(live, job_id)), default=0) >= step,
                       timeout=120, what=f"step {step} in worker-0's log")
    pids = [factories.wait_for(lambda t=t: pid_of(job_id, t), what=f"{t}'s process")
            for t in ("worker-0", "worker-1")]
    envs = [environ(pid) for pid in pids]
    os.kill(pids[1], signal.SIGKILL)
    return envs


def check_resumed(live: Live, job_id: str) -> int:
    """That attempt 2 carried on from attempt 1's last checkpoint, exactly: the step it
    resumed after (a multiple of 5, at least 10)."""
    first, second = (log_of(live, job_id, attempt=a) for a in (1, 2))
    found = re.search(r"^attempt 2: resuming after step (\d+) from .*checkpoint\.pt$",
                      second, re.M)
    assert found, second
    resumed = int(found.group(1))
    before, after = losses(first), losses(second)
    assert resumed >= 10 and resumed % 5 == 0 and resumed <= max(before)
    assert min(after) == resumed + 1 and max(after) == 30
    # The same weights and the same data: the steps run twice gave the same loss.
    assert {s: before[s] for s in before if s in after} == {
        s: after[s] for s in before if s in after}
    return resumed
