"""A local task's processes, found again and stopped.

A task is its process (found by pid and start time, so that a reused pid is never taken
for it), the process group it leads, and every process that carries its launch's marker
(`LAUNCH_ENV`) in its environment: the marker finds those that left the group or were
re-parented away by daemonising, when the task has no cgroup (`cgroups`) that holds them
all; only a process that replaced its own environment escapes it (and is left to the
task's keeper, which is its subreaper).
"""

from __future__ import annotations

import contextlib
import os
import signal

from corral.executors import base
from corral.oskit import procs

#: set in every task's environment, so its processes can be found wherever they moved
LAUNCH_ENV = "CORRAL_LAUNCH_ID"


def owned(pid: int, prefix: str, launch_id: str) -> bool:
    """Whether the live process `pid` is this launch's task (it carries the launch's
    marker) or, started by an earlier version, its wrapper (its argv holds the prefix).

    An empty launch id or prefix owns nothing: a command line ends with a NUL, so the
    empty string is among its fields whatever the process."""
    try:
        if launch_id and _marker(launch_id) in procs.environ(pid):
            return True
        return bool(prefix) and prefix.encode() in procs.cmdline(pid)
    except OSError:
        return False


def marked(launch_id: str) -> list[int]:
    """Every process carrying the launch's marker in its environment."""
    return procs.carrying(_marker(launch_id))


def signal_outside_group(handle: base.Handle, sig: signal.Signals) -> None:
    """Send `sig` to every process carrying the launch's marker outside the task's process
    group (which kill_group reaches): those that left it, and a container's, which podman
    would pass it to only the first of (its init, then the shell of a command, which
    outlives a SIGTERM), never to the program that shell runs."""
    for pid in marked(handle.launch_id):
        with contextlib.suppress(OSError):
            if os.getpgid(pid) != handle.pid:
                os.kill(pid, sig)


def kill_group(handle: base.Handle, sig: signal.Signals) -> None:
    """Signal the task's process group, unless its id now belongs to someone else's group.

    A group id cannot be reused while any member lives; it can once the group is empty,
    so a live leader with the same pid but another start time is not ours.
    """
    start = procs.start_ticks(handle.pid)
    if start is not None and handle.start_time and start != handle.start_time:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, sig)


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal, or gone."""
    try:
        return procs.stat_fields(pid)[0] in (b"T", b"t", b"Z", b"X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def kill_marked(launch_id: str) -> None:
    """SIGKILL every process carrying the launch's marker."""
    for pid in marked(launch_id):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def gpu_ids(handle: base.Handle) -> list[int]:
    """The GPUs the task was given, as its environment says."""
    try:
        env = procs.environ(handle.pid)
    except OSError:
        return []
    for item in env:
        if item.startswith(b"CUDA_VISIBLE_DEVICES="):
            raw = item.split(b"=", 1)[1].decode()
            return [int(x) for x in raw.split(",") if x.strip().isdigit()]
    return []


def _marker(launch_id: str) -> bytes:
    """The launch's marker, as an entry of /proc/PID/environ."""
    return f"{LAUNCH_ENV}={launch_id}".encode()
