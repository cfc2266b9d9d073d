"""A rig for tests of the local executor with real processes: specs under a temp dir,
executors, and every process and cgroup cleaned up afterwards."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

from corral.domain import resources
from corral.executors import base
from corral.executors.local import claims, tasks
from tests import factories

NODE = resources.Node(name="local", cpu=2, memory_mb=4096)


class Rig:
    """Builds specs under a temp dir, hands out executors, and cleans every process up."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.executors: list[tasks.LocalExecutor] = []
        self.handles: list[base.Handle] = []
        self.pid_files: list[pathlib.Path] = []

    def executor(self, **options: Any) -> tasks.LocalExecutor:
        ex = tasks.LocalExecutor(NODE, **options)
        self.executors.append(ex)
        return ex

    def spec(self, source: str, *, task: str = "worker-0", **fields: Any) -> base.LaunchSpec:
        """A launch of `python -c source`; the script sees the rig's root as ROOT."""
        run = self.root / f"run-{uuid.uuid4().hex[:8]}"
        (run / "ctl").mkdir(parents=True)  # as the scheduler makes it before a launch
        return base.LaunchSpec(
            job_id="job",
            task=task,
            attempt=1,
            launch_id=uuid.uuid4().hex[:16],
            argv=(sys.executable, "-c", textwrap.dedent(source)),
            cwd=str(run),
            env={**os.environ, "ROOT": str(self.root)},
            log_path=str(run / "logs" / "t.log"),
            control_dir=str(run / "ctl"),
            node="local",
            **fields,
        )

    def launch(self, ex: tasks.LocalExecutor, spec: base.LaunchSpec) -> base.Handle:
        handle = ex.launch(spec)
        self.handles.append(handle)
        return handle

    def cleanup(self) -> None:
        for path in self.pid_files:
            for pid in read_pids(path):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        for h in self.handles:
            with contextlib.suppress(OSError):
                os.killpg(h.pid, signal.SIGKILL)
            # (a test that killed a task's keeper leaves its cgroup: nothing else may)
            group = claims.read(h.prefix + ".claim").group(h.launch_id)
            if group is not None:
                group.kill()
                group.remove()
        for ex in self.executors:
            ex.close()


@contextlib.contextmanager
def rigged(root: pathlib.Path) -> Iterator[Rig]:
    """A rig under `root`, cleaned up when the test is done (a fixture's body)."""
    r = Rig(root)
    try:
        yield r
    finally:
        r.cleanup()


def wait_status(ex: tasks.LocalExecutor, handle: base.Handle, timeout: float = 15.0) -> base.Status:
    """Poll until the task is no longer running; returns its final status."""
    found: list[base.Status] = []

    def done() -> bool:
        found[:] = [ex.poll(handle)]
        return found[0].state is not base.State.RUNNING

    factories.wait_for(done, timeout, f"{handle.task} to end")
    return found[0]


def kill_and_wait(pid: int) -> None:
    """SIGKILL a process and wait until it is gone."""
    os.kill(pid, signal.SIGKILL)
    factories.wait_for(lambda: not factories.alive(pid), 5, f"{pid} to die")


def read_pids(path: pathlib.Path) -> list[int]:
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]
