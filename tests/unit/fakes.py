"""A fake executor and a fake clock for driving the reconciler without processes or waiting.

The fake executor keeps a table of the "processes" it started. Tests decide when one ends
and with what code (`exit`), lose it (`lose`), make it ignore SIGTERM, or make the server
"crash" in the middle of a launch (`crash`), then read back what the scheduler asked for.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from corral.domain import errors, resources
from corral.executors import base

SIGTERM_EXIT = 128 + 15
SIGKILL_EXIT = 128 + 9


class Crash(Exception):
    """Stands for the server being killed at this point of a launch."""


@dataclasses.dataclass
class FakeClock:
    """A callable returning seconds since the epoch, moved only by `advance`.

    Advance by binary fractions (1/64, 0.25, 5): the reconciler truncates seconds * 1000 to
    milliseconds, and 0.001 is not exact in floating point.
    """

    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclasses.dataclass
class FakeTask:
    """One started "process"."""

    spec: base.LaunchSpec
    handle: base.Handle
    exit_code: int | None = None
    lost: bool = False
    node_lost: bool = False
    ignores_sigterm: bool = False
    signals: list[str] = dataclasses.field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.exit_code is None and not self.lost and not self.node_lost

    def status(self) -> base.Status:
        if self.node_lost:
            return base.Status(base.State.NODE_LOST, handle=self.handle,
                               message="its node left the cluster")
        if self.lost:
            return base.Status(
                base.State.LOST,
                handle=self.handle,
                message="the process vanished without an exit code",
            )
        if self.exit_code is not None:
            return base.Status(base.State.EXITED, exit_code=self.exit_code, handle=self.handle)
        return base.Status(base.State.RUNNING, handle=self.handle)


class FakeExecutor:
    """Implements executors.base.Executor over an in-memory table of tasks."""

    def __init__(self, node: resources.Node | None = None,
                 more_nodes: tuple[resources.Node, ...] = ()) -> None:
        self.node = node or resources.Node(name="local", cpu=2, memory_mb=8192)
        #: what nodes() answers (the first, then any more for a cluster that cannot run
        #: here); a test adds and removes nodes as a cluster would
        self.node_list = [self.node, *more_nodes]
        self.tasks: dict[str, FakeTask] = {}  #: by launch id, in launch order
        self.recovered: list[str] = []  #: launch ids recover() was asked about
        self.adopted: list[str] = []  #: launch ids adopt() was asked about
        self.released: list[str] = []
        self.cleaned: list[str] = []
        self.never_started: set[str] = set()  #: settled as NOT_STARTED: may never start now
        #: the next launch "kills the server": before the process starts, or right after
        self.crash: str | None = None
        #: the next launches fail with this LaunchError message
        self.launch_error: str | None = None
        #: tasks launched from now on ignore SIGTERM
        self.ignore_sigterm = False
        self.wake: Callable[[], None] | None = None
        self._pids = itertools.count(4000)

    # --- the protocol -------------------------------------------------------------------

    def nodes(self) -> list[resources.Node]:
        return list(self.node_list)

    def set_waker(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        if self.crash == "before_start":
            self.crash = None
            raise Crash(spec.launch_id)
        assert spec.launch_id not in self.tasks, f"launch id {spec.launch_id} started twice"
        assert spec.launch_id not in self.never_started, "a launch settled as never started ran"
        if self.launch_error:
            raise errors.LaunchError(self.launch_error)
        handle = base.Handle(
            node=spec.node,
            task=spec.task,
            pid=next(self._pids),
            start_time=123456.0,
            control_dir=spec.control_dir,
            launch_id=spec.launch_id,
        )
        self.tasks[spec.launch_id] = FakeTask(spec, handle, ignores_sigterm=self.ignore_sigterm)
        if self.crash == "after_start":
            self.crash = None
            raise Crash(spec.launch_id)
        return handle

    def poll(self, handle: base.Handle) -> base.Status:
        return self.tasks[handle.launch_id].status()

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        t = self.tasks[handle.launch_id]
        t.signals.append("SIGKILL" if force else "SIGTERM")
        if not t.alive:
            return
        if force:
            t.exit_code = SIGKILL_EXIT
        elif not t.ignores_sigterm:
            t.exit_code = SIGTERM_EXIT

    def adopt(self, handle: base.Handle) -> base.Status:
        self.adopted.append(handle.launch_id)
        t = self.tasks.get(handle.launch_id)
        if t is None:
            return base.Status(base.State.LOST, handle=handle, message="no such process")
        return t.status()

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        self.recovered.append(spec.launch_id)
        t = self.tasks.get(spec.launch_id)
        if t is None:
            self.never_started.add(spec.launch_id)
            return base.Status(base.State.NOT_STARTED)
        return t.status()

    def sample(self, handle: base.Handle) -> base.Sample | None:
        return None

    def release(self, handle: base.Handle) -> None:
        self.released.append(handle.launch_id)

    def clean_up(self, handle: base.Handle) -> None:
        self.cleaned.append(handle.launch_id)

    def close(self) -> None:
        pass

    # --- what a test does to the "processes" ----------------------------------------------

    def launches(self, job_id: str | None = None) -> list[base.LaunchSpec]:
        """Every launch that started a process, oldest first."""
        return [t.spec for t in self.tasks.values() if job_id in (None, t.spec.job_id)]

    def task(self, job_id: str, name: str = "worker-0") -> FakeTask:
        """The latest launch of `name` in the job."""
        found = [t for t in self.tasks.values() if t.spec.job_id == job_id and t.spec.task == name]
        assert found, f"{job_id}/{name} was never launched"
        return found[-1]

    def exit(self, job_id: str, name: str = "worker-0", code: int = 0) -> None:
        t = self.task(job_id, name)
        assert t.alive, f"{job_id}/{name} already ended"
        t.exit_code = code

    def lose(self, job_id: str, name: str = "worker-0") -> None:
        self.task(job_id, name).lost = True

    def lose_node(self, node: str) -> None:
        """The node leaves the cluster and takes its live tasks with it."""
        self.node_list = [n for n in self.node_list if n.name != node]
        for t in self.tasks.values():
            if t.alive and t.handle.node == node:
                t.node_lost = True

    def alive(self) -> list[FakeTask]:
        return [t for t in self.tasks.values() if t.alive]
