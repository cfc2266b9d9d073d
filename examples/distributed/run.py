"""Run the distributed example in one command, on a corral server of its own:

    python examples/distributed/run.py [--home DIR]

job.yaml trains a tiny MLP with PyTorch DDP (gloo) on two tasks, worker-0 and worker-1
(`node_count: 2`), rank 0 writing a checkpoint every 5 steps. Once it has passed step 10,
worker-1's process is killed (SIGKILL, as a machine that dies would end it): the gang
stops, corral restarts it after a 1 s backoff (`fault-tolerance/job-retry-num`), and the
restart carries on from the last checkpoint (`attempt 2: resuming after step N`) to step
30. `corral show` then gives two running records, the first ended by worker-1's signal.

Needs PyTorch in corral's Python (`pip install torch`). About 20 s on two cores. Exits
with 0 when it went so.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import signal
import sys

from corral.oskit import procs

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent
#: the step after which worker-1 is killed
KILL_AFTER = 10


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        work = s.work / "distributed"
        work.mkdir(exist_ok=True)
        for name in ("train.py", "job.yaml"):
            shutil.copy(HERE / name, work / name)

        said = s.output("submit", str(work / "job.yaml"))
        found = re.search(r" as (\S+) \(", said)
        if found is None:
            raise SystemExit(f"no job id in {said!r}")
        job = found.group(1)

        runner.wait(f"step {KILL_AFTER}", lambda: last_step(s, job) >= KILL_AFTER)
        pid = runner.wait("worker-1's process", lambda: pid_of(job, "worker-1"))
        print(f"\n# step {last_step(s, job)} done: killing worker-1 (pid {pid}) with SIGKILL",
              flush=True)
        os.kill(pid, signal.SIGKILL)

        if s.corral("logs", "-f", job) != 0:
            return 1
        s.corral("show", job)
        s.corral("events", job)
    return 0


def last_step(s: runner.Session, job: str) -> int:
    """The last step rank 0 reported (its `loss` metric), 0 before any."""
    series = s.api.training_metrics(job).get("metrics", [])
    steps = [st for m in series if m.get("metric") == "loss" for st in m.get("steps", [])]
    return max((int(st) for st in steps if st is not None), default=0)


def pid_of(job: str, task: str) -> int | None:
    """The process of the job's task's first attempt, found by the variables corral gave
    it (this machine's /proc: the example runs its server here)."""
    for pid in procs.carrying(f"CORRAL_JOB_ID={job}".encode(),
                              f"CORRAL_TASK_ID={task}".encode(), b"CORRAL_ATTEMPT=1"):
        with contextlib.suppress(OSError):
            if any(b"train.py" in arg for arg in procs.cmdline(pid)):
                return pid
    return None


if __name__ == "__main__":
    sys.exit(main())
