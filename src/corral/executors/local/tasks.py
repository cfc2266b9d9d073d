"""The local executor: tasks run as processes on this machine, and are found again.

Tasks are started by a launcher process (`launcher`) that runs beside the server in a
session of its own, so that it outlives a server that is killed; it forks a keeper for each
task (`keeper`), the task's parent, which knows its true exit code and records it in the
launch's claim file (`claims`); the launcher tells the server of each end at once through a
pipe, read by the exit watcher (`watcher`), and answers a launch request on another pipe
once the task has started (or could not be). Each task runs in a cgroup of its own where the
machine allows it (`cgroups`), which finds, kills and counts all of it; its keeper, a child
subreaper, holds what it orphans in any case; and each leads a process group of its own and
carries its launch's marker in its environment, by which a task without a cgroup is found
and stopped (`processes`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from corral.domain import errors, resources
from corral.executors import base
from corral.executors.local import cgroups, claims, launcher, machine, processes, usage, watcher
from corral.oskit import procs

log = logging.getLogger(__name__)
#: how long a launch request may take before the launcher is given up on
LAUNCH_TIMEOUT_S = 30.0
#: a task's log is kept within this many MB unless told otherwise (task_log_max_mb)
LOG_MAX_MB = 100
#: how long recovery waits for a live keeper to record its task's pid (or that it could not
#: start it) before it stops that keeper: it takes milliseconds, but a loaded machine or a
#: slow disk under the log stretches it, and a keeper stopped after it has started the task
#: takes the task's end with it (no one records its exit code)
KEEPER_START_S = 10.0


def _error_log(path: pathlib.Path | None) -> int:
    """Where a launcher (and its keepers) write what goes wrong in them, a traceback: the
    file `path`, appended to (mode 0600; a link there is not followed), else nowhere."""
    if path is None:
        return subprocess.DEVNULL
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("the task launcher's errors go nowhere: cannot open %s: %s", path, exc)
        return subprocess.DEVNULL


class _Launcher:
    """The server's end of one launcher process: one request at a time, each answered
    before the next is sent."""

    def __init__(self, errors_to: pathlib.Path | None = None) -> None:
        exit_r, exit_w = os.pipe()
        out_r, out_w = os.pipe()
        err = _error_log(errors_to)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", launcher.__file__, str(exit_w)],
                stdin=subprocess.PIPE, stdout=out_w, pass_fds=(exit_w,),
                # Not the server's stderr: a launcher outliving its server must not keep
                # open a pipe someone reads the server's output from until it ends.
                stderr=err, start_new_session=True, close_fds=True)
        except BaseException:
            os.close(exit_r)
            os.close(out_r)
            raise
        finally:
            os.close(exit_w)
            os.close(out_w)
            if err != subprocess.DEVNULL:
                os.close(err)
        self.exits, self._answers = exit_r, out_r
        os.set_blocking(exit_r, False)
        self._poll = select.poll()
        self._poll.register(out_r, select.POLLIN)
        self.alive = True
        self.closed = False  #: told to exit once its tasks have ended
        self._lock = threading.Lock()  #: one request and its answer at a time
        self._unread = b""  #: what was read of the answer pipe beyond the last answer

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a launch request and wait for its answer. OSError, and the launcher is
        given up on, when it has stopped or does not answer in time."""
        with self._lock:
            if self._answers < 0:
                raise OSError("the launcher was given up on")
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                self.proc.stdin.flush()
                answer: dict[str, Any] = json.loads(self._answer(time.monotonic() + timeout))
            except OSError as exc:
                log.warning("the task launcher (pid %s) failed a launch request: %s (it %s)",
                            self.proc.pid, exc, _exit_of(self.proc))
                self._give_up()
                raise
            return answer

    def _answer(self, deadline: float) -> bytes:
        while b"\n" not in self._unread:
            left = deadline - time.monotonic()
            if left <= 0 or not self._poll.poll(left * 1000):
                raise OSError("the launcher did not answer")
            data = os.read(self._answers, 1 << 16)
            if not data:
                raise OSError("the launcher has stopped")
            self._unread += data
        line, self._unread = self._unread.split(b"\n", 1)
        return line

    def close(self) -> None:
        """No more requests: the launcher exits once its last task has ended."""
        with self._lock:  # (after the answer to a request under way)
            self.closed = True
            self._stop()

    def _give_up(self) -> None:
        """(a request failed) No more requests; a new launcher takes the next launch."""
        self.alive = False
        self._stop()

    def _stop(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        if self._answers >= 0:
            os.close(self._answers)
            self._answers = -1


def _exit_of(proc: subprocess.Popen[bytes]) -> str:
    """How a launcher process stands, for a log line."""
    code = proc.poll()
    if code is None:
        return "still runs"
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


class LocalExecutor:
    """The embedded default: tasks are processes on this machine.

    `cgroups_mode` is the `task_cgroups` setting (cgroups.MODES): a version named that
    this machine does not offer stops the start; `log_max_mb` is `task_log_max_mb`, the
    cap of each task's log (0: none).
    """

    def __init__(self, node: resources.Node, *, cgroups_mode: str = "auto",
                 log_max_mb: int = LOG_MAX_MB, errors_to: pathlib.Path | None = None) -> None:
        self._node = node
        #: the file the launchers' own errors are appended to (None: nowhere)
        self._errors_to = errors_to
        self._layout, why = cgroups.detect(cgroups_mode)
        if self._layout is None and cgroups_mode in ("v1", "v2"):
            raise errors.CorralError(f"task_cgroups = {cgroups_mode}, but {why}")
        self._containment = (self._layout.describe() if self._layout is not None
                             else f"no cgroups ({why}): each task's keeper, a child "
                                  "subreaper, kills what it leaves")
        log.info("task containment: %s", self._containment)
        self._log_max = max(0, log_max_mb) * 2**20
        self._usage = usage.Usage()
        #: each task's cgroup as its claim names it (None: it has none), by launch id
        self._groups: dict[str, cgroups.Group | None] = {}
        self._lock = threading.Lock()
        self._launcher: _Launcher | None = None
        #: the tasks this executor's launchers started, until released: launch id ->
        #: (launcher, task pid, keeper pid)
        self._mine: dict[str, tuple[_Launcher, int, int]] = {}
        #: their ends, as the launcher told them (`code`, and what the keeper said besides:
        #: `keeper.END_DETAILS`; None: its keeper recorded none)
        self._exits: dict[str, dict[str, int] | None] = {}
        self._watcher = watcher.ExitWatcher()
        self._watcher.start()

    def nodes(self) -> list[resources.Node]:
        return [self._node]

    def node_usage(self) -> list[base.NodeUsage]:
        return [machine.usage(self._node.name)]

    def containment(self) -> str:
        return self._containment

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._watcher.wake = wake

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        """Have the launcher start the task; it answers once the task has exec'd (or could
        not be started)."""
        req = {"id": spec.launch_id, "prefix": claims.control_prefix(spec),
               "argv": spec.argv, "shell": spec.shell, "cwd": spec.cwd,
               "env": {**spec.env, processes.LAUNCH_ENV: spec.launch_id},
               "log": spec.log_path, "user": list(spec.run_as) if spec.run_as else None,
               "task": spec.task, "log_max": self._log_max, "cgroup": self._cgroup(spec),
               "cleanup": list(spec.cleanup)}
        try:
            starter = self._running_launcher()
            reply = starter.request(req, LAUNCH_TIMEOUT_S)
        except OSError as exc:
            raise _launch_failed(spec, exc) from None
        if "error" in reply:
            raise errors.LaunchError(f"cannot start {spec.task}: {reply['error']}")
        pid, keeper = int(reply["pid"]), int(reply.get("keeper") or 0)
        with self._lock:  # known as this executor's before anyone has the handle to poll
            self._mine[spec.launch_id] = (starter, pid, keeper)
            orphaned = not starter.alive
        if orphaned:  # its exit pipe closed first: watched as `_on_exits` watches the rest
            self._watch(pid, keeper)
        return base.Handle(node=spec.node, task=spec.task, pid=pid,
                           start_time=reply["ticks"], control_dir=spec.control_dir,
                           launch_id=spec.launch_id)

    def _cgroup(self, spec: base.LaunchSpec) -> dict[str, Any] | None:
        """Where the task's cgroup goes, and its memory limit, for its keeper."""
        if self._layout is None:
            return None
        group = self._layout.group(spec.launch_id)
        return {"version": group.version, "dirs": list(group.dirs),
                "controllers": list(self._layout.controllers) if group.version == 2 else [],
                "memory_mb": spec.demand.memory_mb if self._layout.memory else 0}

    def _running_launcher(self) -> _Launcher:
        with self._lock:
            if self._launcher is None or not self._launcher.alive:
                starter = self._launcher = _Launcher(self._errors_to)
                self._watcher.read(starter.exits,
                                   lambda lines: self._on_exits(starter, lines))
            return self._launcher

    def _on_exits(self, starter: _Launcher, lines: list[bytes] | None) -> None:
        """What a launcher's exit pipe says (watcher thread): "<launch id> <end>" lines (the
        end a JSON object, "-" for one no one recorded); None when it closed (the launcher
        is gone)."""
        if lines is not None:
            with self._lock:
                for line in lines:
                    launch_id, end = line.decode().strip().split(" ", 1)
                    self._exits[launch_id] = claims.told_end(end)
            return
        # Killed, or ended after close: the tasks it still ran are watched as adopted ones
        # (their keepers still record their ends).
        with self._lock:
            orphans = [(pid, keeper) for launch_id, (owner, pid, keeper) in self._mine.items()
                       if owner is starter and launch_id not in self._exits]
            if orphans or (starter.alive and not starter.closed):
                log.warning("the task launcher (pid %s) stopped; its running tasks are "
                            "watched without it", starter.proc.pid)
            starter.alive = False
        for pid, keeper in orphans:
            self._watch(pid, keeper)

    def _watch(self, pid: int, keeper: int) -> None:
        """Wake the scheduler when the task's end is recorded: when its keeper exits, or
        when the task does if it has no keeper left."""
        self._watcher.watch(pid)
        if keeper:
            self._watcher.watch(keeper)

    def poll(self, handle: base.Handle) -> base.Status:
        with self._lock:
            told = handle.launch_id in self._exits
            end = self._exits.get(handle.launch_id)
            mine = self._mine.get(handle.launch_id)
        if told and end is not None:
            # What the task left in its group goes at once (its keeper killed the rest).
            processes.kill_group(handle, signal.SIGKILL)
            return self._exited(handle, end)
        if not told and mine is not None and mine[0].alive:
            return base.Status(base.State.RUNNING, handle=handle)
        return self._settle(handle)

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        if force:
            self._kill_all(handle, wait=0)
        else:
            processes.kill_group(handle, signal.SIGTERM)
            processes.signal_outside_group(handle, signal.SIGTERM)

    def adopt(self, handle: base.Handle) -> base.Status:
        status = self._settle(handle)
        if status.state is base.State.RUNNING:
            claim = claims.read(handle.prefix + ".claim")
            keeper = claim.launcher[0] if claim.launcher_alive() and claim.launcher else 0
            self._watch(handle.pid, keeper)
        return status

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        prefix = claims.control_prefix(spec)
        try:
            if claims.give_up(spec):
                return base.Status(base.State.NOT_STARTED)
        except OSError as exc:  # its folder is a link, or a folder a task made
            return self._unknown(spec, f"its control folder cannot be used ({exc})")
        claim = claims.read(prefix + ".claim")
        if claim.pid is None and claim.launcher_alive():
            claim = _await_start(prefix + ".claim")
        if claim.refused:
            return self._unknown(spec, "its claim file was replaced (by a link, or a "
                                       "file corral did not write)")
        if claim.abandoned or claim.never_started or claim.empty:
            # An empty claim: its writer died before it could start the task.
            _drop(claim.group(spec.launch_id))
            return base.Status(base.State.NOT_STARTED)
        if claim.pid is None:
            return self._unrecorded(spec, claim)
        pid = claim.pid
        start = procs.start_ticks(pid)
        owned = start is not None and processes.owned(pid, prefix, spec.launch_id)
        handle = base.Handle(node=spec.node, task=spec.task, pid=pid,
                             start_time=start if owned and start else 0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        return self.adopt(handle)

    def _unrecorded(self, spec: base.LaunchSpec, claim: claims.Claim) -> base.Status:
        """A launch whose keeper claimed it but recorded no pid: it died while starting the
        task, or lives and did not record it within KEEPER_START_S. The task may run, or
        have run, and nobody would record its end: adopted, it would hold its cores until
        it ended and then be lost all the same (its capped log's pipe with no reader). So
        its keeper is stopped, what it may have started goes (its children, what carries
        the launch's marker, its cgroup), and it is lost."""
        alive = claim.launcher_alive()
        if alive:
            _stop_keeper(claim)
        processes.kill_marked(spec.launch_id)
        # Read again: a cgroup the keeper named after the first read.
        group = claims.read(claims.control_prefix(spec) + ".claim").group(spec.launch_id)
        _drop(group or claim.group(spec.launch_id))
        why = (f"its keeper had not started it {KEEPER_START_S:g} s on and was stopped"
               if alive else "its launcher was killed while starting it")
        return base.Status(base.State.LOST, message=f"{why}, so whether it ran is unknown")

    def _unknown(self, spec: base.LaunchSpec, why: str) -> base.Status:
        """A launch whose control files a task tampered with: whether it ran cannot be
        told, so whatever may be left of it goes (its cgroup, had it one, and what carries
        its marker), and it counts as lost."""
        processes.kill_marked(spec.launch_id)
        _drop(self._layout.group(spec.launch_id) if self._layout is not None else None)
        return base.Status(base.State.LOST, message=f"{why}: whether it ran is unknown")

    def sample(self, handle: base.Handle) -> base.Sample | None:
        group = self._group(handle)
        if group is not None:
            return self._usage.of_group(handle, group)
        return self._usage.of_tree(handle)

    def clean_up(self, handle: base.Handle) -> None:
        self._kill_all(handle, wait=1.0, remove=True)

    def release(self, handle: base.Handle) -> None:
        with self._lock:
            self._mine.pop(handle.launch_id, None)
            self._exits.pop(handle.launch_id, None)
        self._groups.pop(handle.launch_id, None)
        self._usage.forget(handle.launch_id)

    def close(self) -> None:
        with self._lock:
            starter, self._launcher = self._launcher, None
        if starter is not None:
            starter.close()
        self._watcher.stop()
        for parent in self._layout.parents if self._layout is not None else ():
            with contextlib.suppress(OSError):  # still used by tasks that outlive it
                os.rmdir(parent)

    def _settle(self, handle: base.Handle) -> base.Status:
        """State of a task this executor's live launcher did not start (adopted after a
        restart, or orphaned by a launcher that died) or whose keeper was killed."""
        if handle.start_time and procs.start_ticks(handle.pid) == handle.start_time:
            return base.Status(base.State.RUNNING, handle=handle)
        claim = claims.read(handle.prefix + ".claim", until_code=True)
        if claim.code is None and not claim.settled:
            if claim.launcher_alive():
                # The task has ended and its keeper is about to record how: look again soon.
                return base.Status(base.State.RUNNING, handle=handle)
            # Its keeper lived when the claim was last read, and is gone now: it may have
            # recorded the code and exited in between. Only a read made after it was seen
            # gone can say that it recorded none.
            claim = claims.read(handle.prefix + ".claim")
        code = claim.code if claim.code is not None else claims.old_exit_code(handle.prefix)
        # Whatever is left of the task goes: a lost task must not keep a core corral now
        # counts as free.
        self._kill_all(handle, wait=1.0, remove=True)
        if code is not None:
            return self._exited(handle, {**claim.end_details, "code": code})
        return base.Status(base.State.LOST, handle=handle, message=(
            "its claim file was replaced (by a link, or a file corral did not write), so "
            "its exit code is unknown" if claim.refused else
            "the process that started it was killed while corral was not watching, so its "
            "exit code is unknown"))

    @staticmethod
    def _exited(handle: base.Handle, end: Mapping[str, int]) -> base.Status:
        """A task's exit, from its end as its keeper recorded it (`code`, and
        `keeper.END_DETAILS`)."""
        message = ""
        oom_kills, memory_mb = end.get("oom_kills", 0), end.get("memory_mb", 0)
        if oom_kills:
            limit = f"the {memory_mb} MB of" if memory_mb else "the"
            message = f"used more than {limit} memory its flavor gives"
        return base.Status(base.State.EXITED, exit_code=end["code"], handle=handle,
                           out_of_memory=oom_kills > 0, message=message,
                           log_dropped=end.get("log_dropped", 0))

    def _kill_all(self, handle: base.Handle, *, wait: float, remove: bool = False) -> None:
        """SIGKILL the task and all it started: its cgroup when it has one, else its group
        and every process carrying its marker (a scan of /proc). `remove` its cgroup too
        (once its keeper is gone: a live keeper still reads it)."""
        processes.kill_group(handle, signal.SIGKILL)
        group = self._group(handle)
        if group is None:
            processes.kill_marked(handle.launch_id)
            return
        group.kill(timeout=wait)
        if remove:
            group.remove()

    def _group(self, handle: base.Handle) -> cgroups.Group | None:
        if handle.launch_id not in self._groups:
            claim = claims.read(handle.prefix + ".claim")
            self._groups[handle.launch_id] = claim.group(handle.launch_id)
        return self._groups[handle.launch_id]


def _drop(group: cgroups.Group | None) -> None:
    """Kill and remove a cgroup that a launch made but no task of it will use."""
    if group is not None:
        group.kill(timeout=1.0)
        group.remove()


def _await_start(path: str) -> claims.Claim:
    """The claim of a launch whose keeper lives but had not recorded the task's pid, once
    it has (or that it could not start it), or has died, or KEEPER_START_S have passed."""
    deadline = time.monotonic() + KEEPER_START_S
    claim = claims.read(path)  # (each read waits up to half a second for a live writer)
    while (claim.pid is None and not claim.settled and claim.launcher_alive()
           and time.monotonic() < deadline):
        claim = claims.read(path)
    if claim.pid is None and not claim.settled and not claim.launcher_alive():
        claim = claims.read(path)  # its last word: read after it was seen gone
    return claim


def _stop_keeper(claim: claims.Claim) -> None:
    """SIGKILL the live keeper that wrote `claim`, and the children it forked: a task forked
    but not yet exec'd carries no marker, and outlives its keeper. The keeper is stopped
    first, so that it forks no more and reaps none (a child's pid is not reused before it
    is killed)."""
    assert claim.launcher is not None
    keeper, ticks = claim.launcher
    try:
        pidfd = os.pidfd_open(keeper)
    except OSError:  # gone already
        return
    try:
        if procs.start_ticks(keeper) != ticks:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
        deadline = time.monotonic() + 5.0
        while not processes.stopped(keeper) and time.monotonic() < deadline:
            time.sleep(0.01)
        for child in procs.children(keeper):
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    deadline = time.monotonic() + 5.0
    while claim.launcher_alive() and time.monotonic() < deadline:
        time.sleep(0.01)


def _launch_failed(spec: base.LaunchSpec, exc: OSError) -> errors.LaunchError:
    """A launch whose launcher did not answer: one that still holds the request finds it
    given up and never runs it; one that claimed it first may have started it."""
    try:
        never = claims.give_up(spec)
    except OSError:
        never = False
    if not never:
        # Its keeper, if it lives, would go on starting (or keeping) a task no one watches.
        path = claims.control_prefix(spec) + ".claim"
        claim = claims.read(path)
        if claim.launcher_alive():
            _stop_keeper(claim)
        processes.kill_marked(spec.launch_id)
        _drop(claims.read(path).group(spec.launch_id))
    return errors.LaunchError(f"cannot start {spec.task}: {exc}")
