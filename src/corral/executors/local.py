"""Runs tasks as local processes, each in its own process group, and finds them again.

Tasks are started by a launcher process (`executors.launcher`) that runs beside the
server in a session of its own, so that it outlives a server that is killed. Being every
task's parent, it knows each one's true exit code and records it in the launch's claim
file; it tells the server of each exit at once through a pipe. Its answers to launch
requests come back on another pipe, read by the same watcher thread, so that a launch does
not wait for its answer (`begin_launch`).

The claim file is what lets a server that was killed at any line and started again settle
every launch exactly once. The launcher creates it exclusively, with its own pid and start
time, before it starts the task, then appends the task's pid (or `-`: it could not start)
and, when the task has ended, its exit code. So a claim with a pid says the launch ran
(alive: adopt it; gone: read its exit code, or call it lost if nobody recorded one); no
claim file means it never ran, and the restarted server claims it first ("abandoned") so
that a launcher still holding the request does not run the task a second time.

One file per launch, because creating a file is what costs on some disks. Tasks started
by an earlier version ran under a `/bin/sh` wrapper whose claim file held the wrapper's pid
and exit code, or whose exit code is in a separate `.exit` file; both are still read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from corral.domain import errors, resources
from corral.executors import base, gpus
from corral.executors import launcher as launcher_mod

log = logging.getLogger(__name__)
ABANDONED = launcher_mod.BAD_CLAIM
#: set in every task's environment, so its processes can be found wherever they moved
LAUNCH_ENV = "CORRAL_LAUNCH_ID"
#: how long a launch request may take before the launcher is given up on
LAUNCH_TIMEOUT_S = 30.0


class _Launcher:
    """The server's end of one launcher process.

    Requests are written by whoever launches; the answers are read by the exit watcher as
    they come, so that a launch need not wait for its answer (see `reply`)."""

    def __init__(self) -> None:
        exit_r, exit_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", launcher_mod.__file__, str(exit_w)],
                stdin=subprocess.PIPE, stdout=out_w, pass_fds=(exit_w,),
                # Not the server's stderr: a launcher outliving its server must not keep
                # open a pipe someone reads the server's output from until it ends.
                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except BaseException:
            os.close(exit_r)
            os.close(out_r)
            raise
        finally:
            os.close(exit_w)
            os.close(out_w)
        self.exits, self.answers = exit_r, out_r
        for fd in (exit_r, out_r):
            os.set_blocking(fd, False)
        self.alive = True
        self.closed = False  #: told to exit once its tasks have ended
        self._lock = threading.Lock()  #: one request written at a time
        self._answered = threading.Condition()
        self._replies: dict[str, dict[str, Any]] = {}
        #: launches `ready(wake=True)` found unanswered: their answers wake the scheduler
        self._awaited: set[str] = set()
        self._answering = True  #: its answer pipe is open

    def send(self, req: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            try:
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                self.alive = False
                raise

    def deliver(self, replies: list[dict[str, Any]], *, closed: bool = False) -> bool:
        """(the watcher) Hand answers to `reply`; `closed`: no more will come. True when
        one was awaited (see `ready`), or some may now never come."""
        with self._answered:
            self._replies.update((r["id"], r) for r in replies)
            self._answering = self._answering and not closed
            self._answered.notify_all()
            awaited = bool(self._awaited) and (
                closed or any(r["id"] in self._awaited for r in replies))
            if awaited:
                self._awaited.difference_update(r["id"] for r in replies)
            return awaited

    def ready(self, launch_id: str, deadline: float, *, wake: bool) -> bool:
        """Whether `reply` would answer at once; if not and `wake`, the answer is awaited:
        delivering it says so (the scheduler is woken to record it)."""
        with self._answered:
            if (launch_id in self._replies or not self._answering
                    or time.monotonic() >= deadline):
                return True
            if wake:
                self._awaited.add(launch_id)
            return False

    def reply(self, launch_id: str, deadline: float) -> dict[str, Any]:
        """The answer to a request sent, once it has come."""
        with self._answered:
            while launch_id not in self._replies:
                left = deadline - time.monotonic()
                if not self._answering:
                    self.alive = False
                    raise OSError("the launcher has stopped")
                if left <= 0:
                    self.alive = False
                    raise OSError("the launcher did not answer")
                self._answered.wait(None if left == math.inf else left)
            self._awaited.discard(launch_id)
            return self._replies.pop(launch_id)

    def settled(self, launch_id: str, deadline: float, error: str) -> bool:
        """Wait for the answer to a launch; True (and the answer taken) when it is the
        `error` given, False (the answer left for `reply`) otherwise or when none comes."""
        with self._answered:
            while (launch_id not in self._replies and self._answering
                   and time.monotonic() < deadline):
                self._answered.wait(max(0.0, deadline - time.monotonic()))
            if self._replies.get(launch_id, {}).get("error") == error:
                del self._replies[launch_id]
                self._awaited.discard(launch_id)
                return True
            return False

    def close(self) -> None:
        """No more requests: the launcher exits once its last task has ended."""
        self.closed = True
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()


class _Pending:
    """A launch handed to the launcher (base.Started): its answer is read by the watcher."""

    def __init__(self, spec: base.LaunchSpec, launcher: _Launcher, deadline: float) -> None:
        self.spec, self.launcher, self.deadline = spec, launcher, deadline
        self.outcome: base.Handle | errors.LaunchError | None = None

    def due(self) -> None:
        """A follow-on launch whose task before has ended: its answer is due now (it has no
        deadline until then)."""
        self.deadline = min(self.deadline, time.monotonic() + LAUNCH_TIMEOUT_S)

    def __call__(self) -> base.Handle:
        if self.outcome is None:
            try:
                self.outcome = self._handle()
            except errors.LaunchError as exc:
                self.outcome = exc
        if isinstance(self.outcome, errors.LaunchError):
            raise self.outcome
        return self.outcome

    def _handle(self) -> base.Handle:
        spec = self.spec
        try:
            reply = self.launcher.reply(spec.launch_id, self.deadline)
        except OSError as exc:
            raise _launch_failed(spec, exc) from None
        if "error" in reply:
            raise errors.LaunchError(f"cannot start {spec.task}: {reply['error']}")
        return base.Handle(node=spec.node, task=spec.task, pid=reply["pid"],
                           start_time=reply["ticks"], control_dir=spec.control_dir,
                           launch_id=spec.launch_id)

    def ready(self, *, wake: bool) -> bool:
        return self.outcome is not None or self.launcher.ready(
            self.spec.launch_id, self.deadline, wake=wake)


class LocalExecutor:
    """The embedded default: tasks are processes on this machine."""

    def __init__(self, node: resources.Node) -> None:
        self._node = node
        self._ps: dict[str, psutil.Process] = {}
        self._cpu_prev: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._launcher: _Launcher | None = None
        #: the tasks this executor's launchers started, until released: launch id -> pid
        self._mine: dict[str, tuple[_Launcher, int]] = {}
        #: their exit codes, as the launcher told them
        self._exits: dict[str, int] = {}
        #: launches sent and not yet answered, with the launcher they were sent to
        self._sent: dict[str, _Launcher] = {}
        self._watcher = _ExitWatcher()
        self._watcher.start()

    def nodes(self) -> list[resources.Node]:
        return [self._node]

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._watcher.wake = wake

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        return self.begin_launch(spec)()

    def begin_launch(self, spec: base.LaunchSpec) -> base.Started:
        """Hand the launch to the launcher; what is returned gives its answer, read by the
        watcher (`ready` says whether it has come)."""
        return self._send(spec, None)

    def follow(self, spec: base.LaunchSpec, after: str) -> _Pending:
        """A follow-on launch: the launcher starts it as soon as the task launched as
        `after` (see `can_follow`) has ended, and answers then. Until it has, `withdraw`
        takes it back; the scheduler calls `due()` on what is returned once it has seen
        that task end."""
        return self._send(spec, after)

    def can_follow(self, launch_id: str) -> bool:
        """Whether a launch can follow this one: it was sent to the launcher that takes
        requests now (answered or not: the launcher reads requests in order), and its
        task has not ended."""
        with self._lock:
            owner = self._sent.get(launch_id)
            if owner is None:
                mine = self._mine.get(launch_id)
                owner = mine[0] if mine is not None else None
            return (owner is not None and owner is self._launcher and owner.alive
                    and not owner.closed and launch_id not in self._exits)

    def has_ended(self, launch_id: str) -> bool:
        """Whether the launcher has told that this launch's task ended (a launch may
        still follow it: the launcher then starts that one at once)."""
        with self._lock:
            return launch_id in self._exits

    def withdraw(self, spec: base.LaunchSpec) -> bool:
        """Take back a follow-on launch: True when it never runs (the launcher dropped it
        and said so); False when it was carried out first (it runs, or failed to start)
        or its launcher is gone: its answer, or the lack of one, tells which. Waits for
        the launcher to say (its requests are read in order, so this is quick)."""
        with self._lock:
            launcher = self._sent.get(spec.launch_id)
        if launcher is None:  # answered already, or its launcher is gone
            return False
        try:
            launcher.send({"cancel": spec.launch_id})
        except OSError:
            return False
        withdrawn = launcher.settled(spec.launch_id, time.monotonic() + LAUNCH_TIMEOUT_S,
                                     launcher_mod.WITHDRAWN)
        if withdrawn:
            with self._lock:
                self._sent.pop(spec.launch_id, None)
        return withdrawn

    def _send(self, spec: base.LaunchSpec, after: str | None) -> _Pending:
        req = {"id": spec.launch_id, "prefix": control_prefix(spec), "argv": spec.argv,
               "shell": spec.shell,
               "cwd": spec.cwd, "env": {**spec.env, LAUNCH_ENV: spec.launch_id},
               "log": spec.log_path, "user": list(spec.run_as) if spec.run_as else None}
        if after is not None:
            req["after"] = after
        try:
            launcher = self._running_launcher()
            with self._lock:  # (before its answer can come)
                self._sent[spec.launch_id] = launcher
            launcher.send(req)
        except OSError as exc:
            with self._lock:
                self._sent.pop(spec.launch_id, None)
            raise _launch_failed(spec, exc) from None
        # A follow-on launch is answered once the task before it ends, however long.
        return _Pending(spec, launcher, math.inf if after is not None
                        else time.monotonic() + LAUNCH_TIMEOUT_S)

    def _running_launcher(self) -> _Launcher:
        with self._lock:
            if self._launcher is None or not self._launcher.alive:
                launcher = self._launcher = _Launcher()
                self._watcher.read(launcher.answers,
                                   lambda lines: self._on_answers(launcher, lines))
                self._watcher.read(launcher.exits,
                                   lambda lines: self._on_exits(launcher, lines))
            return self._launcher

    def _on_answers(self, launcher: _Launcher, lines: list[bytes] | None) -> bool:
        """What a launcher answered (watcher thread), None when its pipe closed; True (wake
        the scheduler) when a launch failed, which nothing else would tell it of, or its
        answer was awaited, or its task has ended already."""
        replies = [json.loads(line) for line in lines or ()]
        started = [(r["id"], r["pid"]) for r in replies if "pid" in r]
        with self._lock:  # known as this executor's before anyone has the handle to poll
            for launch_id, pid in started:
                self._mine[launch_id] = (launcher, pid)
            for r in replies:
                self._sent.pop(r["id"], None)
            if lines is None:  # no answer comes any more from this launcher
                for launch_id in [k for k, owner in self._sent.items() if owner is launcher]:
                    del self._sent[launch_id]
            orphaned = not launcher.alive
            # A task may end before its answer is read (two pipes): the pass its exit
            # woke may have found the launch unanswered and left it for the next.
            ended = any(launch_id in self._exits for launch_id, _pid in started)
        awaited = launcher.deliver(replies, closed=lines is None)
        if orphaned:  # its exit pipe closed first: watched as `_on_exits` watches the rest
            for _launch_id, pid in started:
                self._watcher.watch(pid)
        return awaited or ended or any("error" in r for r in replies)

    def _on_exits(self, launcher: _Launcher, lines: list[bytes] | None) -> None:
        """What a launcher's exit pipe says (watcher thread): "<launch id> <code>" lines;
        None when it closed (the launcher is gone)."""
        if lines is not None:
            with self._lock:
                for line in lines:
                    launch_id, code = line.decode().split()
                    self._exits[launch_id] = int(code)
            return
        # Killed, or ended after close: the tasks it still ran are watched as adopted ones
        # (their exit codes are lost unless it recorded them first).
        with self._lock:
            if not launcher.closed:
                log.warning("the task launcher (pid %s) stopped; its running tasks are "
                            "watched without it", launcher.proc.pid)
            launcher.alive = False
            orphans = [pid for launch_id, (owner, pid) in self._mine.items()
                       if owner is launcher and launch_id not in self._exits]
        for pid in orphans:
            self._watcher.watch(pid)

    def poll(self, handle: base.Handle) -> base.Status:
        with self._lock:
            code = self._exits.get(handle.launch_id)
            mine = self._mine.get(handle.launch_id)
        if code is not None:
            # What the task left in its group goes at once; finding processes that left the
            # group costs a scan of /proc, which the scheduler asks for through clean_up
            # when a job is being stopped or failed.
            _kill_group(handle, signal.SIGKILL)
            return base.Status(base.State.EXITED, exit_code=code, handle=handle)
        if mine is not None and mine[0].alive:
            return base.Status(base.State.RUNNING, handle=handle)
        return self._settle(handle)

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        if force:
            _kill_leftovers(handle)
        else:
            _kill_group(handle, signal.SIGTERM)

    def adopt(self, handle: base.Handle) -> base.Status:
        status = self._settle(handle)
        if status.state is base.State.RUNNING:
            self._watcher.watch(handle.pid)
        return status

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        prefix = control_prefix(spec)
        if self._give_up(spec):
            return base.Status(base.State.NOT_STARTED)
        claim = _wait_claim(prefix + ".claim")
        if claim.abandoned or claim.never_started or claim.empty:
            # An empty claim: its writer died before it could start the task.
            return base.Status(base.State.NOT_STARTED)
        pid = claim.pid
        if pid is None:
            # Its launcher died between claiming the launch and recording the task's pid:
            # the task may run (it carries its launch id) or may have run already.
            pid = _find_marked(spec.launch_id)
            if pid is None:
                return base.Status(base.State.LOST, message=(
                    "its launcher was killed while starting it, so whether it ran is "
                    "unknown"))
        start = _start_ticks(pid)
        owned = start is not None and _owned(pid, prefix, spec.launch_id)
        handle = base.Handle(node=spec.node, task=spec.task, pid=pid,
                             start_time=start if owned and start else 0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        return self.adopt(handle)

    @staticmethod
    def _give_up(spec: base.LaunchSpec) -> bool:
        """Claim a launch for no one, unless its launcher has claimed it: True when it now
        never runs."""
        os.makedirs(spec.control_dir, exist_ok=True)
        try:
            fd = os.open(control_prefix(spec) + ".claim",
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        os.write(fd, ABANDONED.encode())
        os.close(fd)
        return True

    def sample(self, handle: base.Handle) -> base.Sample | None:
        proc = self._process(handle)
        if proc is None:
            return None
        try:
            tree = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return None
        cpu_total = 0.0
        rss = 0
        pids = []
        for p in tree:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu_total += t.user + t.system
                rss += p.memory_info().rss
                pids.append(p.pid)
        now = time.time()
        prev = self._cpu_prev.get(handle.launch_id)
        if prev is None:
            # First look at this task: its average since it started.
            with contextlib.suppress(psutil.Error):
                prev = (proc.create_time(), 0.0)
        self._cpu_prev[handle.launch_id] = (now, cpu_total)
        cpu_pct = 0.0
        if prev and now > prev[0]:
            cpu_pct = max(0.0, (cpu_total - prev[1]) / (now - prev[0]) * 100.0)
        gpu_util, gpu_mem = gpus.usage(pids, _gpu_ids_of(handle))
        return base.Sample(cpu_percent=cpu_pct, rss_mb=rss / 2**20, gpu_util=gpu_util,
                           gpu_mem_mb=gpu_mem)

    def clean_up(self, handle: base.Handle) -> None:
        _kill_leftovers(handle)

    def release(self, handle: base.Handle) -> None:
        with self._lock:
            self._mine.pop(handle.launch_id, None)
            self._exits.pop(handle.launch_id, None)
        self._ps.pop(handle.launch_id, None)
        self._cpu_prev.pop(handle.launch_id, None)

    def close(self) -> None:
        with self._lock:
            launcher, self._launcher = self._launcher, None
        if launcher is not None:
            launcher.close()
        self._watcher.stop()

    def _settle(self, handle: base.Handle) -> base.Status:
        """State of a task this executor's live launcher did not start (adopted after a
        restart, or orphaned by a launcher that died)."""
        if handle.start_time and _start_ticks(handle.pid) == handle.start_time:
            return base.Status(base.State.RUNNING, handle=handle)
        claim = _wait_claim(handle.prefix + ".claim", until_code=True)
        code = claim.code if claim.code is not None else _old_exit_file(handle.prefix)
        if code is None and claim.launcher_alive():
            # The task has ended and its launcher is about to record how: look again soon.
            return base.Status(base.State.RUNNING, handle=handle)
        # Whatever is left of the task goes: a lost task must not keep a core corral now
        # counts as free.
        _kill_leftovers(handle)
        if code is not None:
            return base.Status(base.State.EXITED, exit_code=code, handle=handle)
        return base.Status(base.State.LOST, handle=handle,
                           message="the process that started it was killed while corral "
                                   "was not watching, so its exit code is unknown")

    def _process(self, handle: base.Handle) -> psutil.Process | None:
        proc = self._ps.get(handle.launch_id)
        if proc is None:
            if not handle.start_time or _start_ticks(handle.pid) != handle.start_time:
                return None
            try:
                proc = psutil.Process(handle.pid)
            except psutil.Error:
                return None
            self._ps[handle.launch_id] = proc
        return proc


def _launch_failed(spec: base.LaunchSpec, exc: OSError) -> errors.LaunchError:
    _kill_marked(spec.launch_id)  # a launcher that died may have started it
    return errors.LaunchError(f"cannot start {spec.task}: {exc}")


def control_prefix(spec: base.LaunchSpec) -> str:
    return f"{spec.control_dir}/{spec.task}.{spec.launch_id}"


@dataclasses.dataclass(frozen=True)
class _Claim:
    """What a claim file says (see the module's docstring)."""

    abandoned: bool = False
    launcher: tuple[int, float] | None = None  #: (pid, start ticks) of the launcher
    pid: int | None = None  #: the task's (or an earlier version's wrapper's)
    never_started: bool = False  #: the launcher could not start the task
    code: int | None = None

    @classmethod
    def parse(cls, text: str) -> _Claim:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return cls()
        if lines[0] == ABANDONED:
            return cls(abandoned=True)
        launcher = None
        if lines[0].startswith("L "):
            _l, pid, ticks = lines[0].split()
            launcher, lines = (int(pid), float(ticks)), lines[1:]
        if not lines:
            return cls(launcher=launcher)
        if lines[0] == "-":
            return cls(launcher=launcher, never_started=True)
        code = lines[1] if len(lines) > 1 else ""
        return cls(launcher=launcher, pid=int(lines[0]),
                   code=int(code) if code.lstrip("-").isdigit() else None)

    @property
    def empty(self) -> bool:
        """Created, nothing written yet (or its writer died first)."""
        return self == _Claim()

    @property
    def settled(self) -> bool:
        """Nothing more will be written to it."""
        return self.abandoned or self.never_started or self.code is not None

    def launcher_alive(self) -> bool:
        return self.launcher is not None and _start_ticks(self.launcher[0]) == self.launcher[1]


def _wait_claim(path: str, *, until_code: bool = False) -> _Claim:
    """The claim file, once its writer is done with the step it is at.

    A claim is written in steps (created, then the launcher's line, the task's pid, its
    exit code); give a live writer half a second to finish the one it is at: recording a
    pid (always), recording the exit code of a task that has ended (`until_code`).
    """
    claim = _Claim()
    for _ in range(50):
        try:
            with open(path) as fh:
                claim = _Claim.parse(fh.read())
        except FileNotFoundError:
            return claim
        waiting = claim.empty or (not claim.settled and (claim.pid is None or until_code)
                                  and claim.launcher_alive())
        if not waiting:
            return claim
        time.sleep(0.01)
    return claim


def _old_exit_file(prefix: str) -> int | None:
    """The exit code a wrapper of an earlier version wrote beside its claim file."""
    try:
        with open(prefix + ".exit") as fh:
            raw = fh.read().strip()
    except FileNotFoundError:
        return None
    return int(raw) if raw.lstrip("-").isdigit() else None


def _start_ticks(pid: int) -> float | None:
    """The process's start time in clock ticks since boot, or None if it is gone/a zombie."""
    try:
        fields = launcher_mod.stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return float(fields[19])


def _owned(pid: int, prefix: str, launch_id: str) -> bool:
    """Whether the live process `pid` is this launch's task (it carries the launch's
    marker) or, started by an earlier version, its wrapper (its argv holds the prefix)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            if f"{LAUNCH_ENV}={launch_id}".encode() in fh.read().split(b"\0"):
                return True
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return prefix.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def _find_marked(launch_id: str) -> int | None:
    """The leader of the process group of a task carrying the launch's marker, if any."""
    for pid in _marked(launch_id):
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                return pid
    return None


def _marked(launch_id: str) -> list[int]:
    """Every process carrying the launch's marker in its environment."""
    marker = f"{LAUNCH_ENV}={launch_id}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if marker in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def _kill_group(handle: base.Handle, sig: signal.Signals) -> None:
    """Signal the task's process group, unless its id now belongs to someone else's group.

    A group id cannot be reused while any member lives; it can once the group is empty,
    so a live leader with the same pid but another start time is not ours.
    """
    start = _start_ticks(handle.pid)
    if start is not None and handle.start_time and start != handle.start_time:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(handle.pid, sig)


def _kill_leftovers(handle: base.Handle) -> None:
    """SIGKILL the task's group and every process that carries its launch marker.

    The marker (an environment variable every process of the task inherits) finds those
    that left the group or were re-parented away by daemonising; only a process that
    replaced its own environment escapes it.
    """
    _kill_group(handle, signal.SIGKILL)
    _kill_marked(handle.launch_id)


def _kill_marked(launch_id: str) -> None:
    for pid in _marked(launch_id):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _gpu_ids_of(handle: base.Handle) -> list[int]:
    try:
        with open(f"/proc/{handle.pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return []
    for item in env:
        if item.startswith(b"CUDA_VISIBLE_DEVICES="):
            raw = item.split(b"=", 1)[1].decode()
            return [int(x) for x in raw.split(",") if x.strip().isdigit()]
    return []


class _ExitWatcher(threading.Thread):
    """Wakes the scheduler the moment a task ends: a launcher says so through its pipe,
    and an adopted task's end shows on its pidfd."""

    def __init__(self) -> None:
        super().__init__(name="corral-exit-watcher", daemon=True)
        self.wake: Callable[[], None] = lambda: None
        self._poll = select.poll()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._poll.register(self._r, select.POLLIN)
        self._pending: list[int] = []
        #: pipes read here: fd -> what gets their lines (None once they close); the
        #: scheduler is woken after each, unless it returns False
        self._readers: dict[int, Callable[[list[bytes] | None], bool | None]] = {}
        self._unfinished: dict[int, bytes] = {}  #: a pipe's last line, while incomplete
        self._lock = threading.Lock()
        self._stopped = False
        self.supported = hasattr(os, "pidfd_open")

    def watch(self, pid: int) -> None:
        if not self.supported:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            self.wake()  # already gone: let the scheduler look now
            return
        self._add(fd)

    def read(self, fd: int, on_lines: Callable[[list[bytes] | None], bool | None]) -> None:
        """Hand the lines that arrive on the pipe `fd` to `on_lines` (then wake, unless it
        returns False), None at its end."""
        with self._lock:
            self._readers[fd] = on_lines
        self._add(fd)

    def _add(self, fd: int) -> None:
        with self._lock:
            self._pending.append(fd)
        os.write(self._w, b"x")

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._w, b"x")

    def run(self) -> None:
        while not self._stopped:
            for fd, _ev in self._poll.poll():
                if fd == self._r:
                    self._take_pending()
                    continue
                on_lines = self._readers.get(fd)
                data = None
                if on_lines is not None:
                    with contextlib.suppress(BlockingIOError):
                        data = os.read(fd, 1 << 16)
                    if data:
                        *lines, self._unfinished[fd] = (
                            self._unfinished.get(fd, b"") + data).split(b"\n")
                        if lines and on_lines(lines) is not False:
                            self.wake()
                        continue
                self._poll.unregister(fd)
                os.close(fd)
                if on_lines is not None:
                    with self._lock:
                        del self._readers[fd]
                    self._unfinished.pop(fd, None)
                    on_lines(None)
                self.wake()

    def _take_pending(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._r, 4096)
        with self._lock:
            fds, self._pending = self._pending, []
        for fd in fds:
            self._poll.register(fd, select.POLLIN)


def detect_node(*, cpus: int | None = None, memory_gb: int | None = None) -> resources.Node:
    """This machine's capacity, honouring CPU affinity and cgroup limits."""
    n_cpu = cpus or _cgroup_cpus() or len(os.sched_getaffinity(0))
    mem_mb = memory_gb * 1024 if memory_gb else _cgroup_memory_mb() or (
        psutil.virtual_memory().total // 2**20)
    import platform

    return resources.Node(name="local", cpu=n_cpu, memory_mb=int(mem_mb),
                          gpus=tuple(gpus.detect()), arch=platform.machine() or "x86_64")


def _cgroup_cpus() -> int | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, int(int(quota) / int(period)))


def _cgroup_memory_mb() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            raw = fh.read().strip()
    except OSError:
        return None
    if raw == "max" or not raw.isdigit():
        return None
    total = psutil.virtual_memory().total
    return min(int(raw), total) // 2**20
