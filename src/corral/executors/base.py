"""The one protocol every executor (local processes, Ray, ...) implements.

The scheduler only ever talks to this. Every launched task yields a `Handle` that the
store records, so a restarted server can find the process again (`adopt`) instead of
orphaning or starting it twice (`recover` for a launch whose handle was never recorded).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from corral.domain import resources


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one task of one attempt."""

    job_id: str
    task: str
    attempt: int
    launch_id: str  #: unique per launch; a relaunch of the same task gets a new one
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]
    log_path: str
    control_dir: str  #: where the executor keeps its claim and exit-code files
    node: str
    gpu_ids: tuple[int, ...] = ()
    #: argv[0] is a shell command line and argv[1:] its arguments ("$@")
    shell: bool = False
    #: (uid, gid) to run the task as; None: the server's own user
    run_as: tuple[int, int] | None = None
    # What an executor running the task on another machine needs besides (the local one
    # ignores them): what to reserve, what to ship, and where the gang's other tasks run.
    demand: resources.Resources = resources.ZERO  #: what one task of the job was given
    code_dir: str = ""  #: the attempt's code snapshot that argv and cwd refer to
    output_dirs: tuple[str, ...] = ()  #: created on the task's node before it starts
    #: what the task reads (input channels, the job's model): shipped to its node first
    input_dirs: tuple[str, ...] = ()
    gang: tuple[str, ...] = ()  #: the node of every task of the attempt, by rank
    #: the input_dirs (by index) the task follows: a copy of them is kept up to date
    follow: tuple[int, ...] = ()
    strategy: str = "spread"  #: how the gang is placed: spread or pack (SchedulePolicy)
    #: a command run once the task and all it left have ended (its container's record
    #: removed: `podman rm`); run by the local executor's keeper (jobs in an image run on
    #: this machine only)
    cleanup: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Handle:
    """How to find a launched task again: its node, pid and process start time."""

    node: str
    task: str
    pid: int
    start_time: float  #: clock ticks since boot, as /proc/PID/stat has it (0: unknown)
    control_dir: str
    launch_id: str
    # A task on a Ray cluster is found by its actor's name (pid 0: the server cannot see it).
    actor: str = ""  #: the named, detached actor that runs it
    node_id: str = ""  #: the Ray node id it was placed on
    group: str = ""  #: the placement group of its gang ("" for a single task)
    #: the executor that launched it, when several run the pools (routing.Routed)
    executor: str = ""
    #: the address of its node, when that is another machine (Ray): where a service the
    #: task runs (a notebook's JupyterLab) is reached
    address: str = ""

    @property
    def prefix(self) -> str:
        """Path prefix of this launch's control files."""
        return f"{self.control_dir}/{self.task}.{self.launch_id}"

    def dumps(self) -> str:
        # (not dataclasses.asdict, which deep-copies each field: several times the cost,
        # paid for every task the scheduler records)
        return json.dumps({f: getattr(self, f) for f in _HANDLE_FIELDS})

    @classmethod
    def loads(cls, raw: str) -> Handle:
        return cls(**json.loads(raw))


_HANDLE_FIELDS = tuple(f.name for f in dataclasses.fields(Handle))


class State(enum.StrEnum):
    RUNNING = "running"  #: the process is alive
    EXITED = "exited"  #: it ended; exit_code is its code
    LOST = "lost"  #: it is gone and its exit code cannot be known
    NODE_LOST = "node_lost"  #: its node left the cluster (an infrastructure fault)
    NOT_STARTED = "not_started"  #: (recover only) it never ran and never will


@dataclasses.dataclass(frozen=True)
class Status:
    state: State
    exit_code: int | None = None
    handle: Handle | None = None
    #: why it is lost; for a task killed for its memory, the limit it went over
    message: str = ""
    #: (exited) the kernel killed its processes for using more memory than it was given
    out_of_memory: bool = False
    #: (exited) bytes of its log dropped to keep the log within its cap
    log_dropped: int = 0
    #: (running, from adopt) not known for sure: where it runs did not answer in time, and
    #: it is asked again (`message` says why), not counted lost
    unsure: bool = False


@dataclasses.dataclass(frozen=True)
class Sample:
    """A resource sample of a task's whole process tree."""

    cpu_percent: float  #: of one core; 200 means two busy cores
    rss_mb: float
    gpu_util: float = 0.0  #: percent, mean over the task's GPUs
    gpu_mem_mb: float = 0.0


@dataclasses.dataclass(frozen=True)
class NodeUsage:
    """What a node uses now, whoever uses it: corral's tasks and everything else."""

    node: str
    cpu_percent: float  #: of the whole node: 100 means every core busy
    mem_mb: float  #: memory in use (total less available)
    gpu_util: float | None = None  #: percent, mean over its GPUs; None: it has none
    gpu_mem_mb: float | None = None  #: GPU memory in use, its GPUs together


class Executor(Protocol):
    def nodes(self) -> list[resources.Node]:
        """The nodes this executor can run tasks on, with their capacity."""
        ...

    def set_waker(self, wake: Callable[[], None]) -> None:
        """Call `wake` (from any thread) whenever a launched or adopted task ends."""
        ...

    def launch(self, spec: LaunchSpec) -> Handle:
        """Start the task and return once it runs; raises errors.LaunchError if it
        cannot be started."""
        ...

    def poll(self, handle: Handle) -> Status:
        ...

    def cancel(self, handle: Handle, *, force: bool) -> None:
        """Ask the task to stop (SIGTERM) or make it stop (SIGKILL), with all its children."""
        ...

    def adopt(self, handle: Handle) -> Status:
        """Find a task recorded as running before a restart; watch it if it still runs."""
        ...

    def recover(self, spec: LaunchSpec) -> Status:
        """Settle a launch whose handle was never recorded: running, ended or never started.

        After this returns NOT_STARTED the launch can never start any more.
        """
        ...

    def sample(self, handle: Handle) -> Sample | None:
        ...

    def clean_up(self, handle: Handle) -> None:
        """Kill whatever an ended task left running, wherever it moved (costlier than the
        group kill every exit gets; asked for when a job is stopped or fails)."""
        ...

    def release(self, handle: Handle) -> None:
        """Forget a finished task (stop watching it, drop cached process objects)."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class ShipsCode(Protocol):
    """An executor whose tasks run where an attempt's code snapshot is not (a Ray cluster
    without a shared file system): the snapshot is shipped ahead of the launch."""

    def stage_code(self, node: str, code_dir: str) -> None:
        """Ship an attempt's code snapshot to where `node`'s tasks read it. Called off the
        scheduler's thread, so that a big snapshot holds up nobody; raises
        errors.LaunchError."""
        ...


@runtime_checkable
class Contains(Protocol):
    """An executor that holds each task's processes together (cgroups, a subreaper), so
    that none outlives its task: it says how, for the server's log and `corral info`."""

    def containment(self) -> str:
        """How tasks are contained here, in a line."""
        ...


@runtime_checkable
class ReportsNodes(Protocol):
    """An executor that can tell what its nodes use, machine-wide (the Nodes page)."""

    def node_usage(self) -> list[NodeUsage]:
        """Each node's use now; a node it cannot read now is left out."""
        ...


@runtime_checkable
class Routes(Protocol):
    """Several executors behind one (routing.Routed), each running some of the nodes."""

    def origin(self) -> dict[str, str]:
        """Each node's executor key (settings.LOCAL or "ray:<address>")."""
        ...
