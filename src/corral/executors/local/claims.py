"""Claim files: how a server killed at any line, and started again, settles every launch once.

A task's keeper (forked by the launcher) creates its launch's claim file exclusively, with
its own pid and start time, before it starts the task; then it appends where the task's
cgroup is (when it has one), the task's pid (or `-`: it could not start) and, when the task
has ended, what the end says besides (processes killed for memory, log dropped) and its exit
code. So a claim with a pid says the launch ran (alive: adopt it; gone: read its exit code,
or call it lost if nobody recorded one); no claim file means it never ran, and the server
that settles it claims it first (`give_up`, writing `abandoned`) so that a launcher still
holding the request does not run the task later.

One file per launch, because creating a file is what costs on some disks. Tasks started
by an earlier version ran under a `/bin/sh` wrapper whose claim file held the wrapper's pid
and exit code, or whose exit code is in a separate `.exit` file; both are still read, as
are claims written by a launcher itself (the same lines but the cgroup's and the end's).

The claim's folder is in the attempt's, which the user tasks run as may change: claims are
created and read without following a link (`beneath`), and a claim that is a link, has a
second name, or names its writer but is not the server's own is taken for none of these:
it was planted (`Claim.refused`). Only the wrappers of earlier versions wrote their claims
as the task's user, with nothing but a pid and an exit code in them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from corral.executors import base
from corral.executors.local import cgroups, keeper
from corral.oskit import beneath, procs

ABANDONED = keeper.BAD_CLAIM


def control_prefix(spec: base.LaunchSpec) -> str:
    """The path prefix of a launch's control files (as `base.Handle.prefix` has it)."""
    return f"{spec.control_dir}/{spec.task}.{spec.launch_id}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a claim file says."""

    abandoned: bool = False
    #: (pid, start ticks) of its writer: the task's keeper (or, before keepers, the
    #: launcher)
    launcher: tuple[int, float] | None = None
    pid: int | None = None  #: the task's (or an earlier version's wrapper's)
    never_started: bool = False  #: the task could not be started
    code: int | None = None
    cgroup: str = ""  #: where the task's cgroup is, as its keeper wrote it (`group`)
    oom_kills: int = 0  #: processes of the task the kernel killed for its memory limit
    memory_mb: int = 0  #: the memory limit they were killed for
    log_dropped: int = 0  #: bytes of the task's log dropped to keep it within its cap
    #: what is at the claim's name is no claim a keeper or this server wrote: a link, a
    #: file with a second name, or another user's (see the module's docstring)
    refused: bool = False

    @classmethod
    def parse(cls, text: str) -> Claim:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return cls()
        if lines[0] == ABANDONED:
            return cls(abandoned=True)
        writer: tuple[int, float] | None = None
        end: dict[str, int] = {}
        cgroup, rest = "", []
        for line in lines:
            if line.startswith("L "):
                _l, pid, ticks = line.split()
                writer = (int(pid), float(ticks))
            elif line.startswith("C "):
                cgroup = line[2:]
            elif line.startswith("E "):
                end = _end(line[2:])
            else:
                rest.append(line)
        claim = cls(launcher=writer, cgroup=cgroup, oom_kills=end.get("oom_kills", 0),
                    memory_mb=end.get("memory_mb", 0), log_dropped=end.get("log_dropped", 0))
        if not rest:
            return claim
        if rest[0] == "-":
            return dataclasses.replace(claim, never_started=True)
        code = rest[1] if len(rest) > 1 else ""
        return dataclasses.replace(claim, pid=int(rest[0]),
                                   code=int(code) if code.lstrip("-").isdigit() else None)

    @property
    def end_details(self) -> dict[str, int]:
        """What its end says besides the exit code (`keeper.END_DETAILS`)."""
        return {"oom_kills": self.oom_kills, "memory_mb": self.memory_mb,
                "log_dropped": self.log_dropped}

    def group(self, launch_id: str) -> cgroups.Group | None:
        """The task's cgroup, when the claim names one of this launch."""
        return cgroups.Group.loads(self.cgroup, launch_id) if self.cgroup else None

    @property
    def empty(self) -> bool:
        """Created, nothing written yet (or its writer died first)."""
        return self == Claim()

    @property
    def settled(self) -> bool:
        """Nothing more will be written to it (or read from it)."""
        return self.abandoned or self.never_started or self.code is not None or self.refused

    def launcher_alive(self) -> bool:
        return (self.launcher is not None
                and procs.start_ticks(self.launcher[0]) == self.launcher[1])


def read(path: str, *, until_code: bool = False) -> Claim:
    """The claim file, once its writer is done with the step it is at.

    A claim is written in steps (created, then its keeper's line, the task's pid, its
    exit code); give a live writer half a second to finish the one it is at: recording a
    pid (always), recording the exit code of a task that has ended (`until_code`).

    A claim still waited for whose writer is found gone is read once more: what the
    writer wrote last may have come between the read and the look at it, and a dead
    writer writes nothing more, so only a read made after it was seen gone is its last
    word. (A claim returned unsettled after the half second had a live writer when last
    looked at: a caller that then finds it gone reads it again the same way.)
    """
    claim = Claim()
    for _ in range(50):
        try:
            claim = _load(path)
        except FileNotFoundError:
            return claim
        if not claim.empty and (claim.settled or (claim.pid is not None and not until_code)):
            return claim
        if not claim.empty and not claim.launcher_alive():
            try:
                return _load(path)
            except FileNotFoundError:
                return Claim()
        time.sleep(0.01)
    return claim


def give_up(spec: base.LaunchSpec) -> bool:
    """Claim a launch for no one, unless its launcher has claimed it: True when it now
    never runs. beneath.Refused when the claim's folder is a link, or not the server's."""
    me = os.geteuid()
    ctl = beneath.open_dir(spec.control_dir, make=True, owner=me)
    try:
        fd = beneath.open_at(ctl, f"{spec.task}.{spec.launch_id}.claim",
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, owner=me)
    except FileExistsError:
        return False
    finally:
        os.close(ctl)
    try:
        os.write(fd, ABANDONED.encode())
    finally:
        os.close(fd)
    return True


def _load(path: str) -> Claim:
    """What the claim file says, or a refused claim (see `Claim.refused`)."""
    try:
        text, st = beneath.read(path)
    except beneath.Refused:
        return Claim(refused=True)
    claim = Claim.parse(text)
    if st.st_uid != os.geteuid() and not _by_wrapper(text):
        return Claim(refused=True)
    return claim


def _by_wrapper(text: str) -> bool:
    """Whether a claim holds only what the wrappers of earlier versions wrote (as the
    task's user): a pid, then an exit code."""
    return all(line.strip().lstrip("-").isdigit() for line in text.splitlines()
               if line.strip())


def told_end(raw: str) -> dict[str, int] | None:
    """An end as the launcher tells it: a JSON object (`code`, and what the keeper said
    of `keeper.END_DETAILS`); None for `-`, an end no one recorded."""
    return None if raw == "-" else keeper.said_end(raw.encode())


def _end(raw: str) -> dict[str, int]:
    """What an `E` line says, the numbers this version knows."""
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k in keeper.END_DETAILS and isinstance(v, int)}


def old_exit_code(prefix: str) -> int | None:
    """The exit code a wrapper of an earlier version wrote beside its claim file."""
    try:
        raw = beneath.read(prefix + ".exit")[0].strip()
    except OSError:  # none, or not a file that wrapper wrote
        return None
    return int(raw) if raw.lstrip("-").isdigit() else None
