"""A cgroup per task: what a task started is found whole, killed whole, counted, and held to
its flavor's memory, whatever it does (new sessions, a cleared environment, double forks).

Where tasks' cgroups go is detected when the server starts (`detect`), never assumed:
cgroup v2 where the server's own cgroup takes children, cgroup v1's memory, cpuacct and
freezer hierarchies where they do, and none where nothing is writable (a server that is not
root, most containers): tasks are then held by their keeper alone, a child subreaper
(`keeper`). A task's cgroup is `<the server's cgroup>/corral/<launch id>` in each
hierarchy; its keeper makes it, puts the task in it before the task's program runs, and
removes it once everything in it is gone (`corral/`, made when the server starts, stays).
Its place is written in the launch's claim file,
so that a restarted server can still read and kill it (`Group.loads` checks that a claim
names a task's cgroup and nothing else).

Standard library only: the launcher, which cannot import corral's package, imports it too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time

#: the folder, in the server's cgroup, that holds its tasks' cgroups
PARENT = "corral"
#: the v1 hierarchies a task joins where they are mounted and writable: memory (its limit,
#: its use and its OOM kills), cpuacct (its CPU time), freezer (to kill it without races)
V1_CONTROLLERS = ("memory", "cpuacct", "freezer")
#: what the `task_cgroups` setting may say
MODES = ("auto", "v2", "v1", "off")


@dataclasses.dataclass(frozen=True)
class Mount:
    """A cgroup file system mounted here (from /proc/self/mountinfo)."""

    root: str  #: the hierarchy's folder mounted at `point` (not "/" in a cgroup namespace)
    point: str
    version: int
    controllers: frozenset[str]

    def folder(self, path: str) -> str | None:
        """Where the hierarchy's cgroup `path` is under this mount, if it is."""
        root = self.root.rstrip("/")
        if path != root and not path.startswith(root + "/"):
            return None
        return os.path.normpath(self.point + path[len(root):])


def mounts() -> list[Mount]:
    """The cgroup file systems mounted in this process's view."""
    found = []
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    for line in lines:
        mine, _, theirs = line.partition(" - ")
        fields, kind = mine.split(), theirs.split()
        if len(fields) < 5 or len(kind) < 3 or kind[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(kind[2].split(","))
        found.append(Mount(root=_unescape(fields[3]), point=_unescape(fields[4]),
                           version=2 if kind[0] == "cgroup2" else 1, controllers=options))
    return found


def own_paths(pid: int | str = "self") -> dict[str, str]:
    """The process's cgroup in each hierarchy: "" for v2's, else by controller name."""
    out: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return out
    for line in lines:
        _hid, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where this server's tasks get their cgroups."""

    version: int  #: 2 or 1
    parents: tuple[str, ...]  #: `<the server's cgroup>/corral`, one per hierarchy
    memory: bool  #: tasks' memory is limited and counted
    #: v2: the controllers enabled for tasks; v1: the hierarchies joined
    controllers: tuple[str, ...] = ()

    def group(self, launch_id: str) -> Group:
        return Group(self.version, tuple(f"{p}/{launch_id}" for p in self.parents))

    def describe(self) -> str:
        what = "cgroup v2" if self.version == 2 else "cgroup v1"
        if self.controllers:
            what += f" ({', '.join(self.controllers)})"
        memory = ("memory limited to the flavor's" if self.memory
                  else "memory not limited (no memory controller for tasks)")
        return f"{what}: a cgroup per task under {', '.join(self.parents)}; {memory}"


def detect(mode: str = "auto") -> tuple[Layout | None, str]:
    """Where tasks' cgroups can go, as `mode` (MODES) asks, or None and why not.

    "auto" prefers what limits memory: v2, then v1; then either without memory.
    """
    if mode == "off":
        return None, "task_cgroups = off"
    found: dict[int, Layout] = {}
    why: list[str] = []
    for version, probe in ((2, _probe_v2), (1, _probe_v1)):
        if mode in ("auto", f"v{version}"):
            layout, reason = probe()
            if layout is None:
                why.append(f"v{version}: {reason}")
            else:
                found[version] = layout
    ranked = sorted(found.values(), key=lambda lay: (not lay.memory, -lay.version))
    for unused in ranked[1:]:  # the probe made its parent folders
        for parent in unused.parents:
            with contextlib.suppress(OSError):
                os.rmdir(parent)
    if ranked:
        return ranked[0], ""
    return None, "; ".join(why) or f"unknown task_cgroups mode {mode!r}"


def _probe_v2() -> tuple[Layout | None, str]:
    mount = next((m for m in mounts() if m.version == 2), None)
    own = own_paths().get("")
    if mount is None or own is None:
        return None, "no cgroup2 file system is mounted"
    folder = mount.folder(own)
    if folder is None:
        return None, f"the server's cgroup {own} is outside {mount.point}"
    parent = f"{folder}/{PARENT}"
    try:
        make_parent(parent, 2, ("memory",))
        probe = f"{parent}/probe-{os.getpid()}"
        os.makedirs(probe, exist_ok=True)
    except OSError as exc:
        return None, f"cannot make a cgroup in {folder}: {exc.strerror}"
    try:
        memory = os.path.exists(f"{probe}/memory.max")
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)
    return Layout(2, (parent,), memory, ("memory",) if memory else ()), ""


def _probe_v1() -> tuple[Layout | None, str]:
    own = own_paths()
    parents: dict[str, str] = {}  # mount point -> parent, each hierarchy once
    joined: list[str] = []
    why = "no v1 hierarchy of " + ", ".join(V1_CONTROLLERS) + " is mounted"
    for name in V1_CONTROLLERS:
        mount = next((m for m in mounts() if m.version == 1 and name in m.controllers), None)
        folder = mount.folder(own.get(name, "/")) if mount else None
        if mount is None or folder is None or mount.point in parents:
            continue
        parent = f"{folder}/{PARENT}"
        probe = f"{parent}/probe-{os.getpid()}"
        try:
            os.makedirs(probe, exist_ok=True)
            os.rmdir(probe)
        except OSError as exc:
            why = f"cannot make a cgroup in {folder}: {exc.strerror}"
            continue
        parents[mount.point] = parent
        joined.append(name)
    if not parents:
        return None, why
    return Layout(1, tuple(parents.values()), "memory" in joined, tuple(joined)), ""


def make_parent(parent: str, version: int, controllers: tuple[str, ...]) -> None:
    """The folder of tasks' cgroups, with (v2) the controllers its children get."""
    os.makedirs(parent, exist_ok=True)
    if version == 2 and controllers:
        with open(f"{parent}/cgroup.controllers") as fh:  # what the server's cgroup gives
            offered = fh.read().split()
        wanted = " ".join(f"+{c}" for c in controllers if c in offered)
        if wanted:
            # The server's cgroup may hold processes, which its children's controllers
            # would forbid; this folder holds none, so its children get them.
            with contextlib.suppress(OSError):
                _write(f"{parent}/cgroup.subtree_control", wanted)


@dataclasses.dataclass(frozen=True)
class Group:
    """One task's cgroup: a folder in each hierarchy it joined."""

    version: int
    dirs: tuple[str, ...]

    def create(self, memory_mb: int, controllers: tuple[str, ...] = ()) -> None:
        """Make the cgroup, its memory limited to `memory_mb` (0: not limited)."""
        for d in self.dirs:
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                pass
            except FileNotFoundError:  # the folder that holds it was removed: made again
                make_parent(os.path.dirname(d), self.version, controllers)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(d, 0o755)
        if memory_mb > 0:
            self._limit(memory_mb * 2**20)

    def _limit(self, limit: int) -> None:
        if self.version == 2:
            files = [("memory.max", True), ("memory.swap.max", False),
                     ("memory.oom.group", False)]
            values = [str(limit), "0", "1"]
        else:
            files = [("memory.limit_in_bytes", True), ("memory.memsw.limit_in_bytes", False)]
            values = [str(limit), str(limit)]
        for (name, needed), value in zip(files, values, strict=True):
            path = self.file(name)
            if path is None:
                if needed:
                    raise OSError(f"its cgroup has no {name}")
                continue
            _write(path, value)

    def join(self) -> None:
        """Move the calling thread in: what it forks meanwhile starts in the cgroup."""
        for d in self.dirs:
            _write(f"{d}/{self._mover}", "0")

    def leave(self) -> None:
        """Move the calling thread back to the cgroup that holds the tasks' folder."""
        for d in self.dirs:
            _write(f"{os.path.dirname(os.path.dirname(d))}/{self._mover}", "0")

    @property
    def _mover(self) -> str:
        # A child starts in the cgroups of the thread that forks it. On v1, moving that one
        # thread (`tasks`) takes no lock on every process's forks and exits, which moving a
        # whole process (`cgroup.procs`) does, and whose taking waits for an RCU grace
        # period, milliseconds on an idle machine, at each launch. A v2 domain cgroup moves
        # whole processes only.
        return "tasks" if self.version == 1 else "cgroup.procs"

    def file(self, name: str) -> str | None:
        """A control file of the cgroup, in whichever of its folders has it."""
        for d in self.dirs:
            if os.path.exists(f"{d}/{name}"):
                return f"{d}/{name}"
        return None

    def pids(self) -> list[int]:
        """The processes in it (an empty list once it is gone)."""
        try:
            with open(f"{self.dirs[0]}/cgroup.procs") as fh:
                return [int(x) for x in fh.read().split()]
        except OSError:
            return []

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL everything in it, again and again until it is empty or `timeout` has
        passed (0: once); True once it is empty."""
        deadline = time.monotonic() + timeout
        killer = self.file("cgroup.kill")
        while True:
            pids = self.pids()
            if not pids:
                return True
            if killer is not None:
                with contextlib.suppress(OSError):
                    _write(killer, "1")
            else:
                self._kill_each(pids)
            if time.monotonic() >= deadline:
                return not self.pids()
            time.sleep(0.01)

    def _kill_each(self, pids: list[int]) -> None:
        """Without cgroup.kill: frozen, nothing in the cgroup can fork or exit (a pid can
        then not be reused); unfrozen, only pids found there again are signalled, through
        pidfds taken first."""
        v1 = self.file("freezer.state")
        freezer, on, off = (v1, "FROZEN", "THAWED") if v1 else (
            self.file("cgroup.freeze"), "1", "0")
        frozen = freezer is not None and _freeze(freezer, on, self.file("cgroup.events"))
        try:
            if frozen:
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                return
            fds = {}
            for pid in pids:
                with contextlib.suppress(OSError):
                    fds[pid] = os.pidfd_open(pid)
            still = set(self.pids())
            for pid, fd in fds.items():
                with contextlib.suppress(OSError):
                    if pid in still:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                os.close(fd)
        finally:
            if frozen and freezer is not None:
                with contextlib.suppress(OSError):
                    _write(freezer, off)

    def remove(self, timeout: float = 1.0) -> bool:
        """Remove its folders; True when they are gone. The folder that holds them stays,
        for the next task (an empty cgroup costs nothing; making and removing it with each
        task cost each launch and each end a few cgroup operations, the slowest kind of
        mkdir and rmdir there is)."""
        deadline = time.monotonic() + timeout
        left = list(self.dirs)
        while left:
            for d in list(left):
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue  # busy: an exiting process is still counted
                left.remove(d)
            if left and time.monotonic() >= deadline:
                return False
            if left:
                time.sleep(0.01)
        return True

    def oom_kills(self) -> int:
        """Processes of it the kernel killed for its memory limit."""
        events = self.file("memory.events") or self.file("memory.oom_control")
        if events is not None:
            kills = _keyed(events)
            if "oom_kill" in kills:
                return kills["oom_kill"]
        # (v1 before Linux 4.13 counts no kills: only that the limit was hit)
        failcnt = self.file("memory.memsw.failcnt") or self.file("memory.failcnt")
        return 1 if failcnt is not None and _number(failcnt) else 0

    def cpu_ns(self) -> int | None:
        """CPU time its processes used, in nanoseconds, all of it since it was made."""
        stat = self.file("cpu.stat")
        if stat is not None and self.version == 2:
            usec = _keyed(stat).get("usage_usec")
            return None if usec is None else usec * 1000
        usage = self.file("cpuacct.usage")
        return None if usage is None else _number(usage)

    def memory_bytes(self) -> int | None:
        """Its memory in use, as a limit sees it, less the page cache it could drop."""
        names = (("memory.current", "inactive_file") if self.version == 2
                 else ("memory.usage_in_bytes", "total_inactive_file"))
        current, stat = self.file(names[0]), self.file("memory.stat")
        if current is None:
            return None
        used = _number(current)
        if used is None:
            return None
        cache = _keyed(stat).get(names[1], 0) if stat else 0
        return max(0, used - cache)

    def dumps(self) -> str:
        return json.dumps({"version": self.version, "dirs": list(self.dirs)})

    @classmethod
    def loads(cls, raw: str, launch_id: str) -> Group | None:
        """The cgroup a claim names, if it is a task's cgroup of this launch and lies in a
        cgroup file system (a claim file is in a folder the task's user can write)."""
        try:
            data = json.loads(raw)
            version, dirs = int(data["version"]), tuple(str(d) for d in data["dirs"])
        except (ValueError, KeyError, TypeError):
            return None
        points = [m.point for m in mounts()]
        for d in dirs:
            if (not launch_id or os.path.normpath(d) != d or os.path.basename(d) != launch_id
                    or os.path.basename(os.path.dirname(d)) != PARENT
                    or not any(d.startswith(p.rstrip("/") + "/") for p in points)):
                return None
        return cls(version, dirs) if dirs and version in (1, 2) else None


def _freeze(path: str, on: str, events: str | None) -> bool:
    try:
        _write(path, on)
    except OSError:
        return False
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if events is not None:  # v2: "frozen 1" once it is
            if _keyed(events).get("frozen") == 1:
                return True
        else:
            with contextlib.suppress(OSError), open(path) as fh:
                if fh.read().strip() == on:
                    return True
        time.sleep(0.005)
    return False  # a process stuck in the kernel: not frozen, so pidfds are used


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _number(path: str) -> int | None:
    try:
        with open(path) as fh:
            raw = fh.read().strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None


def _keyed(path: str) -> dict[str, int]:
    """A flat keyed file ("name value" lines), its numbers."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (spaces and the like as octal escapes)."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode()
