"""A task's keeper: the process that starts one task, holds on to it, and records its end.

The launcher forks a keeper for each launch (`run`), and the keeper, not the launcher, is
the task's parent: what a task leaves behind is then told apart from other tasks' without
a doubt. A keeper first gets ready (it drops the launcher's descriptors and becomes a child
subreaper), then reads the launch it is to keep from its request pipe, until the launcher
closes it: the launcher forks the next keeper while none is starting a task, so that a
launch does not wait for a fork (a fork of the launcher and a keeper's readying are a few
milliseconds; see docs/performance.md). A keeper that reads no launch (the launcher took
no more requests) exits. Then it

1. claims the launch: creates `<prefix>.claim` exclusively and writes `L <its pid> <its
   start ticks>` there. A claim that exists already was given up (`abandoned`: by a
   restarted server, or by one that stopped waiting for the answer): that launch is not run;
2. when the server uses cgroups (`cgroups`), writes the task's cgroup to the claim (`C
   <json>`), then makes it, its memory limited to the flavor's: a cgroup no claim names is
   never made;
3. starts the task in a new session and in its cgroup, from before its program runs; stdin
   from /dev/null, stdout and stderr into a pipe it reads (or the log itself when logs are
   not capped). It appends the task's pid to the claim (`-` when it could not be started)
   and answers the launcher;
4. moves the task's output into its log as it comes, within the cap (`logcap`);
5. when the task's own process has ended, kills everything left in the cgroup and, being a
   child subreaper (every process the task orphans is re-parented to it), every process
   left under it; waits for the pipe to close; appends the log's held-back tail; reads
   the cgroup's OOM kills and removes it; runs the launch's `cleanup` command, if it has
   one (a container's record removed); appends what the end says besides its exit code
   (`E <json>`: processes killed for memory, bytes of log dropped), then the exit code
   (128 + N for death by signal N); once that is written whole, says the same on the pipe
   it answered the launcher on (one JSON object); closes that pipe, which tells the
   launcher (and through it the server) that the end is recorded (and what it is, when
   said); and exits.

Until its task has started a keeper dies with its launcher (a server that gave up waiting
claims the launch for no one; the keeper must not start the task after that). From then
on it outlives the launcher: a launcher killed costs no running task its log or its code.

Standard library only (and `corral.oskit`): the launcher imports it, and forks it already
imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, NoReturn

if __package__:  # corral's module, as the server imports it
    from corral.executors.local import cgroups, clone, logcap
    from corral.oskit import beneath, procs
else:  # the launcher's sibling, run as a script (python -I -S launcher.py), which puts
    # its own folder and corral/oskit/ on the path
    import beneath  # type: ignore[no-redef]
    import cgroups  # type: ignore[no-redef]
    import clone  # type: ignore[no-redef]
    import logcap  # type: ignore[no-redef]
    import procs  # type: ignore[no-redef]

BAD_CLAIM = "abandoned"
#: how long one clock tick of /proc/PID/stat's start time lasts, in nanoseconds
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: how long, once its task has ended, a keeper waits for what the task left to die and its
#: output to close, before it records the end all the same (a process stuck in the kernel)
DRAIN_S = 10.0
#: how long a launch's `cleanup` command may take
CLEANUP_S = 30.0


def start_ticks(pid: int | str) -> str:
    """A process's start time, in clock ticks since boot."""
    return procs.stat_fields(pid)[19].decode()


def forked_ticks(before_ns: int, after_ns: int) -> str | None:
    """The start time a process forked between two readings of CLOCK_BOOTTIME has, when
    both fall in the same clock tick (the kernel takes it from that clock at the fork).

    Reading it from /proc instead waits until the child's exec is done: milliseconds a
    launch would otherwise spend asleep. None when the readings straddle a tick."""
    tick = before_ns // TICK_NS
    return str(tick) if after_ns // TICK_NS == tick else None


#: the soft limit of open files the launcher was started with (`more_files`), which its
#: keepers give back to the tasks they start
_FILES_SOFT: int | None = None


def more_files() -> None:
    """(the launcher, once) Raise the soft limit of open files to the hard one: it holds
    one pipe for each running task (the keeper's answer pipe, until the end is recorded),
    more than a soft limit of 1024 leaves room for on a node that runs a thousand."""
    global _FILES_SOFT
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        _FILES_SOFT = soft


def prctl(option: int, value: int) -> bool:
    return bool(_libc().prctl(option, value, 0, 0, 0) == 0)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


#: what an end says besides its exit code (the `E` line), the numbers this version knows
END_DETAILS = ("oom_kills", "memory_mb", "log_dropped")


def end_of(details: dict[str, Any], code: Any) -> dict[str, int] | None:
    """An end as the launcher tells it: the exit code `code` and what `details` says of
    END_DETAILS; None when `code` is no exit code."""
    if isinstance(code, str) and code.lstrip("-").isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    said = {k: v for k, v in details.items() if k in END_DETAILS and isinstance(v, int)}
    return {"code": code, **said}


def said_end(said: bytes) -> dict[str, int] | None:
    """The end a keeper said on its answer pipe once it had recorded it (a JSON object)."""
    try:
        end = json.loads(said)
    except ValueError:
        return None
    return end_of(end, end.get("code")) if isinstance(end, dict) else None


def recorded_end(claim: str) -> dict[str, int] | None:
    """The end a claim file records, once its keeper has written it (and the file is still
    the one it wrote: no link, its own): for a keeper killed between recording its end
    and saying it."""
    try:
        text, _st = beneath.read(claim, owner=os.geteuid())
    except OSError:
        return None
    lines = [x for x in text.split("\n") if x and x[:2] not in ("L ", "C ")]
    details: dict[str, Any] = {}
    if len(lines) == 3 and lines[1].startswith("E "):
        with contextlib.suppress(ValueError):
            details = json.loads(lines.pop(1)[2:])
    if len(lines) != 2 or not isinstance(details, dict):
        return None
    return end_of(details, lines[1])


def run(request_fd: int, answer_fd: int, launcher: int) -> NoReturn:
    """(the child of the launcher's fork) Get ready, wait for the launch to keep on
    `request_fd`, keep it, then exit."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == launcher:
            ready = Keeper(answer_fd, request_fd)
            req = read_request(request_fd)
            if req is not None:
                ready.keep(req)
    except BaseException:  # (a bug: the traceback goes to the launcher's error log)
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
    finally:
        os._exit(0)


def read_request(fd: int) -> dict[str, Any] | None:
    """The launch a keeper is given: a JSON object, read from `fd` until it closes (which
    it then closes); None when it closed with nothing on it."""
    raw = b""
    while chunk := os.read(fd, 1 << 16):
        raw += chunk
    os.close(fd)
    return json.loads(raw) if raw else None


class Keeper:
    def __init__(self, answer_fd: int, request_fd: int) -> None:
        """Ready for a launch, before it is known: the launcher's descriptors dropped
        (all but the pipes of this launch), a child subreaper."""
        self.answer_fd = answer_fd
        self.req: dict[str, Any] = {}
        self.claim = ""
        #: the claim's folder and the claim, held from the claim on: the attempt's folder
        #: is the task's user's, who may put a link or a folder of theirs where these were
        self.ctl = -1
        self.claim_fd = -1
        self.group: cgroups.Group | None = None
        self.proc: subprocess.Popen[bytes] | clone.Child | None = None
        self.code: int | None = None
        self.sink: logcap.Sink | None = None
        self.pipe = -1
        signal.set_wakeup_fd(-1)  # the launcher's, closed next
        self._own_fds(answer_fd, request_fd)
        if _FILES_SOFT is not None:  # the task gets the limit the launcher was given
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (_FILES_SOFT, hard))
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.ticks = start_ticks("self")

    @staticmethod
    def _own_fds(*kept: int) -> None:
        """Hold none of the launcher's pipes (but `kept`): the server learns that the
        launcher has gone from their closing, and a keeper learns its launch from its
        request pipe's."""
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd not in kept:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def keep(self, req: dict[str, Any]) -> None:
        self.req = req
        self.claim = req["prefix"] + ".claim"
        found = req.get("cgroup")
        if found:
            self.group = cgroups.Group(int(found["version"]), tuple(found["dirs"]))
        reply = self.start()
        with contextlib.suppress(OSError):
            os.write(self.answer_fd, json.dumps(reply).encode() + b"\n")
        if "error" in reply:
            return
        prctl(PR_SET_PDEATHSIG, 0)  # started: it outlives the launcher from now on
        self.watch()
        self.finish()
        os.close(self.answer_fd)  # the end is recorded: the launcher tells it now

    def start(self) -> dict[str, Any]:
        try:
            fd = self._claim()
        except FileExistsError:
            return {"error": "its launch was given up by the server"}
        except OSError as exc:
            return {"error": f"cannot claim the launch: {exc}"}
        try:
            os.write(fd, f"L {os.getpid()} {self.ticks}\n".encode())
            if self.group is not None:
                os.write(fd, f"C {self.group.dumps()}\n".encode())
            try:
                self.proc, ticks = self._spawn()
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                os.write(fd, b"-\n")  # never started: a recovering server starts it anew
                if self.group is not None:
                    self.group.remove()
                return {"error": str(exc)}
            os.write(fd, f"{self.proc.pid}\n".encode())
            self.claim_fd = fd  # its end is appended here, whatever has its name by then
        finally:
            if self.claim_fd != fd:
                os.close(fd)
        if ticks is None:
            try:
                ticks = start_ticks(self.proc.pid)
            except (OSError, IndexError):  # already ended
                ticks = "0"
        return {"pid": self.proc.pid, "ticks": float(ticks), "keeper": os.getpid()}

    def _claim(self) -> int:
        """Create the launch's claim file exclusively, in a folder of the server's reached
        through no link (made when missing: the scheduler makes it before a launch, other
        callers may not have); its descriptor."""
        me = os.geteuid()
        self.ctl = beneath.open_dir(os.path.dirname(self.claim), make=True, owner=me)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        return beneath.open_at(self.ctl, os.path.basename(self.claim), flags, owner=me,
                               shown=self.claim)

    def _spawn(self) -> tuple[subprocess.Popen[bytes] | clone.Child, str | None]:
        """The task started, and its start time when the clock tells it (forked_ticks)."""
        req = self.req
        argv = req["argv"]
        if req.get("shell"):
            # The command line, then its arguments as "$@" when it has any (a command that
            # ends in a keyword, `...; fi`, takes none). The shell outlives a SIGTERM to
            # the group (a trapped signal is reset to its default in what it starts), so
            # that it reports how its command ended, not that it was stopped first.
            args = ' "$@"' if len(argv) > 1 else ""
            argv = ["/bin/sh", "-c", f"trap : TERM INT HUP; {argv[0]}{args}", "sh",
                    *argv[1:]]
        user = req.get("user")
        if self.group is not None:
            found = req["cgroup"]
            try:
                self.group.create(int(found.get("memory_mb") or 0),
                                  tuple(found.get("controllers") or ()))
            except OSError as exc:
                raise OSError(f"cannot make its cgroup: {exc}") from None
        cap = int(req.get("log_max") or 0)
        # Not O_APPEND: splice writes at an offset, which an appending file refuses. The
        # log's folder, and the log when a relaunch finds it, must be the server's.
        log = beneath.open_file(req["log"], os.O_WRONLY | os.O_CREAT
                                | (0 if cap else os.O_APPEND), make=True, owner=os.geteuid())
        out = log
        if cap:
            self.pipe, out = os.pipe()
            with contextlib.suppress(OSError):  # fewer, bigger moves for a chatty task
                fcntl.fcntl(out, fcntl.F_SETPIPE_SZ, logcap.CHUNK)
        try:
            before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            proc = self._fork(argv, out, user)
            ticks = forked_ticks(before, time.clock_gettime_ns(time.CLOCK_BOOTTIME))
        except BaseException:
            os.close(log)
            if cap:
                os.close(self.pipe)
                self.pipe = -1
            raise
        finally:
            if cap:
                os.close(out)
        if cap:
            os.set_blocking(self.pipe, False)
            self.sink = logcap.Sink(log, cap=cap, task=str(req.get("task") or "the task"),
                                    ring_dir=self.ctl)
        else:
            os.close(log)
        return proc, ticks

    def _fork(self, argv: list[str], out: int, user: list[int] | None,
              ) -> subprocess.Popen[bytes] | clone.Child:
        """Start the task, in its cgroup from its first instruction: made there by the
        kernel (cgroup v2, `clone`), or forked by the keeper from inside the cgroup, which
        it leaves right after (a task's cgroup is killed whole)."""
        if self.group is not None and self.group.version == 2:
            child = clone.spawn(clone.Start(argv, self.req["cwd"], self.req["env"], out,
                                            (user[0], user[1]) if user else None),
                                self.group.dirs[0])
            if child is not None:
                return child
        if self.group is not None:
            self.group.join()
        try:
            return subprocess.Popen(
                argv, cwd=self.req["cwd"], env=self.req["env"], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                close_fds=True, user=user[0] if user else None,
                group=user[1] if user else None, extra_groups=[] if user else None)
        finally:
            if self.group is not None:
                try:
                    self.group.leave()
                except OSError:
                    # It could not leave: the task's end would kill it with the task, and
                    # nobody would record that end.
                    self.group.kill(timeout=1.0)
                    raise

    def watch(self) -> None:
        """Move the task's output until it ends; then kill what it left and wait until
        nothing is left and its output has closed (at most DRAIN_S)."""
        poller = select.poll()
        poller.register(self.wake_r, select.POLLIN)
        if self.pipe >= 0:
            poller.register(self.pipe, select.POLLIN)
        deadline: float | None = None
        while True:
            for fd, _ev in poller.poll(None if deadline is None else 20):
                if fd == self.wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                elif self.sink is not None and not self.sink.pump(fd):
                    poller.unregister(fd)
                    os.close(fd)
                    self.pipe = -1
            self._reap()
            if self.code is None:
                continue
            if deadline is None:
                deadline = time.monotonic() + DRAIN_S
            if (self._kill_left() and self.pipe < 0) or time.monotonic() > deadline:
                return

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.proc is not None and pid == self.proc.pid:
                code = os.waitstatus_to_exitcode(status)
                self.proc.returncode = code  # reaped here: Popen must not wait for it again
                self.code = 128 - code if code < 0 else code

    def _kill_left(self) -> bool:
        """SIGKILL what the task left: in its cgroup, and under this subreaper (each a
        child not yet reaped, so its pid cannot have been reused). True once none is left."""
        gone = self.group.kill(timeout=0) if self.group is not None else True
        left = procs.children(os.getpid())
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return gone and not left

    def finish(self) -> None:
        end: dict[str, int] = {}
        if self.pipe >= 0:
            os.close(self.pipe)
        if self.sink is not None:
            with contextlib.suppress(OSError):
                dropped = self.sink.finish()
                if dropped:
                    end["log_dropped"] = dropped
            self.sink.close()
            os.close(self.sink.fd)
        if self.group is not None:
            oom = self.group.oom_kills()
            if oom:
                end["oom_kills"] = oom
                end["memory_mb"] = int(self.req["cgroup"].get("memory_mb") or 0)
            self.group.kill(timeout=1.0)
            self.group.remove()
        self._clean_up()
        lines = ((f"E {json.dumps(end)}\n" if end else "") + f"{self.code}\n").encode()
        try:
            recorded = os.write(self.claim_fd, lines) == len(lines)
        except OSError:  # its disk is full, say
            recorded = False
        if recorded:  # said to the launcher, which tells it without reading the claim
            with contextlib.suppress(OSError):
                os.write(self.answer_fd, json.dumps({"code": self.code, **end}).encode())
        os.close(self.claim_fd)
        os.close(self.ctl)

    def _clean_up(self) -> None:
        """Run the launch's `cleanup` command, as the server's user, within CLEANUP_S."""
        argv = self.req.get("cleanup")
        if argv:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(argv, env=self.req["env"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=CLEANUP_S, check=False)
