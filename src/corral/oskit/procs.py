"""Processes found by what /proc says of them: their state and start time, their children,
their command line, and the variables of their environment.

A process's environment is what finds a task's processes wherever they went: every task
carries its launch's marker there (`CORRAL_LAUNCH_ID=<launch>`), which its children
inherit whether or not they stay in its process group; only a process that replaces its own
environment escapes it. A process's start time, with its pid, names it: a pid can be
reused, a pid and a start time cannot.
"""

from __future__ import annotations

import contextlib
import os


def stat_fields(pid: int | str) -> list[bytes]:
    """/proc/PID/stat's fields from the state on ([0] the state, [1] the parent's pid,
    [19] the start time in clock ticks since boot). The command name before them may hold
    spaces and parentheses: the split is after the last ')'."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read()
    return raw[raw.rindex(b")") + 2:].split()


def start_ticks(pid: int) -> float | None:
    """The process's start time in clock ticks since boot, or None if it is gone/a zombie."""
    try:
        fields = stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return float(fields[19])


def children(pid: int) -> list[int]:
    """The children of a (single-threaded) process, zombies included."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except FileNotFoundError:  # gone, or a kernel without CONFIG_PROC_CHILDREN
        parent, found = str(pid).encode(), []
        for entry in os.scandir("/proc"):
            with contextlib.suppress(OSError, IndexError):
                if entry.name.isdigit() and stat_fields(entry.name)[1] == parent:
                    found.append(int(entry.name))
        return found


def cmdline(pid: int) -> list[bytes]:
    """The process's command line split on its NULs (OSError when it cannot be read). It
    ends with a NUL, so its last field is empty (unless the process rewrote it)."""
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().split(b"\0")


def environ(pid: int) -> list[bytes]:
    """The process's environment as it started, one `NAME=value` a variable (OSError when
    it cannot be read: gone, or someone else's)."""
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return fh.read().split(b"\0")


def carrying(*variables: bytes) -> list[int]:
    """Every process but this one whose environment holds all of `variables` (each
    `NAME=value`), of those whose environment this process may read."""
    if not variables:
        raise ValueError("no variable to find processes by")
    wanted, me, found = set(variables), os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = environ(int(entry.name))
        except OSError:
            continue
        if wanted.issubset(env):
            found.append(int(entry.name))
    return found
