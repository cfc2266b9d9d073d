"""The local executor's launcher: starts tasks and records how each one ended.

One launcher runs beside each server, started with the server's first task in a session of
its own, so that it outlives a server that is killed. It is the parent of every task it
starts, which is what lets it know a task's true exit code whatever happens to the server.

It reads launch requests on stdin, one JSON object a line (`id`, `prefix`, `argv`, `shell`:
argv[0] is a command line for /bin/sh and the rest its arguments, `cwd`, `env`, `log`,
`user`, and optionally `after`), and answers each on stdout, one JSON line: `{"id", "pid",
"ticks"}` or `{"id", "error"}`. A request with `after`, the launch id of a task it is
running, is held until that task has ended and carried out then, before that task's exit
is told: the slot a task leaves is taken by the next one at once, without waiting for the
server (a follow-on launch). One whose task has ended already is carried out at once. A
line `{"cancel": <launch id>}` drops such a launch while it is still held, answering it
with an error that says so; one carried out already keeps the answer it had.
For each launch it

1. claims it: creates `<prefix>.claim` exclusively and writes `L <its pid> <its start
   ticks>` there. A claim that exists already was given up by a restarted server
   (`abandoned`): that launch is not run. Nor is a follow-on launch whose directory is
   gone (its job was deleted meanwhile);
2. starts the task in a new session (the task leads its own process group), stdin from
   /dev/null, stdout and stderr appended to the log, and appends the task's pid to the
   claim (`-` when it could not be started);
3. when the task ends, appends its exit code (128 + N for death by signal N) to the claim,
   then writes `<id> <code>` to the exit pipe (the file descriptor given as its argument).

When stdin closes (its server stopped or died) it takes no more requests, drops the
follow-on launches it holds (never claimed: a restarted server settles them as never
started), goes on recording exit codes, and exits once its last task has ended.

Only the standard library: it runs as `python -I -S` and starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

BAD_CLAIM = "abandoned"
#: the answer to a follow-on launch taken back before it ran
WITHDRAWN = "withdrawn before it ran"
#: how long one clock tick of /proc/PID/stat's start time lasts, in nanoseconds
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int | str) -> list[bytes]:
    """/proc/PID/stat's fields from the state on ([0] the state, [19] the start time in
    clock ticks since boot). The command name before them may hold spaces and
    parentheses: the split is after the last ')'."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read()
    return raw[raw.rindex(b")") + 2:].split()


def start_ticks(pid: int | str) -> str:
    """A process's start time, in clock ticks since boot."""
    return stat_fields(pid)[19].decode()


def forked_ticks(before_ns: int, after_ns: int) -> str | None:
    """The start time a process forked between two readings of CLOCK_BOOTTIME has, when
    both fall in the same clock tick (the kernel takes it from that clock at the fork).

    Reading it from /proc instead waits until the child's exec is done: milliseconds a
    launch would otherwise spend asleep. None when the readings straddle a tick."""
    tick = before_ns // TICK_NS
    return str(tick) if after_ns // TICK_NS == tick else None


def open_in_dir(path: str, flags: int) -> int:
    """os.open, making the file's directory first when it is missing (the scheduler makes
    an attempt's directories before it launches; other callers may not have)."""
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags, 0o644)


class Launcher:
    def __init__(self, exit_fd: int, answer_fd: int = 1) -> None:
        self.exit_fd: int | None = exit_fd
        self.answer_fd = answer_fd
        self.header = f"L {os.getpid()} {start_ticks('self')}\n".encode()
        #: pid -> (the task's Popen, its claim file, its launch id)
        self.running: dict[int, tuple[subprocess.Popen[bytes], str, str]] = {}
        #: the launch ids of the tasks running
        self.live: set[str] = set()
        #: follow-on launches, by the launch id of the task each waits for
        self.held: dict[str, list[dict[str, Any]]] = {}
        #: the launch ids of those
        self.waiting: set[str] = set()

    def request(self, req: dict[str, Any]) -> None:
        """Carry out a launch request, or hold it until the task it follows has ended (or,
        following a launch held itself, until that one has run and ended)."""
        after = req.get("after")
        if after and (after in self.live or after in self.waiting):
            self.held.setdefault(after, []).append(req)
            self.waiting.add(req["id"])
            return
        self.waiting.discard(req["id"])
        reply = {"id": req["id"], **self.launch(req)}
        self.answer(reply)
        if "pid" not in reply:  # it never ran: what follows it need not wait for it
            for later in self.held.pop(req["id"], ()):
                self.request(later)

    def cancel(self, launch_id: str) -> None:
        """Drop a follow-on launch still held (the scheduler took it back) and say so; one
        carried out already has had its answer, which stands."""
        if launch_id not in self.waiting:
            return
        self.waiting.discard(launch_id)
        for after, reqs in list(self.held.items()):
            self.held[after] = [r for r in reqs if r["id"] != launch_id]
            if not self.held[after]:
                del self.held[after]
        self.answer({"id": launch_id, "error": WITHDRAWN})
        for later in self.held.pop(launch_id, ()):  # it never runs: they need not wait
            self.request(later)

    def answer(self, reply: dict[str, Any]) -> None:
        # A server that died after asking cannot read it: the claim says it all.
        with contextlib.suppress(OSError):
            os.write(self.answer_fd, json.dumps(reply).encode() + b"\n")

    def launch(self, req: dict[str, Any]) -> dict[str, Any]:
        claim = req["prefix"] + ".claim"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        try:
            # A follow-on launch's directories were made before it was sent: gone now, its
            # job was deleted meanwhile, and nothing of it may be made again.
            fd = os.open(claim, flags, 0o644) if req.get("after") else open_in_dir(claim, flags)
        except FileExistsError:
            return {"error": "its launch was given up by a restarted server"}
        except FileNotFoundError:
            return {"error": "its directory is gone: its job was deleted"}
        except OSError as exc:
            return {"error": f"cannot claim the launch: {exc}"}
        try:
            os.write(fd, self.header)
            before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            try:
                proc = self._spawn(req)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                os.write(fd, b"-\n")  # never started: a recovering server starts it anew
                return {"error": str(exc)}
            ticks = forked_ticks(before, time.clock_gettime_ns(time.CLOCK_BOOTTIME))
            os.write(fd, f"{proc.pid}\n".encode())
        finally:
            os.close(fd)
        self.running[proc.pid] = (proc, claim, req["id"])
        self.live.add(req["id"])
        if ticks is None:
            try:
                ticks = start_ticks(proc.pid)
            except (OSError, IndexError):  # already ended and reaped
                ticks = "0"
        return {"pid": proc.pid, "ticks": float(ticks)}

    @staticmethod
    def _spawn(req: dict[str, Any]) -> subprocess.Popen[bytes]:
        user = req.get("user")
        argv = req["argv"]
        if req.get("shell"):
            # The command line, then its arguments as "$@". The shell outlives a SIGTERM to
            # the group (a trapped signal is reset to its default in what it starts), so
            # that it reports how its command ended, not that it was stopped first.
            argv = ["/bin/sh", "-c", f'trap : TERM INT HUP; {argv[0]} "$@"', "sh",
                    *argv[1:]]
        log = open_in_dir(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            return subprocess.Popen(
                argv, cwd=req["cwd"], env=req["env"], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                close_fds=True, user=user[0] if user else None,
                group=user[1] if user else None, extra_groups=[] if user else None)
        finally:
            os.close(log)

    def reap(self) -> None:
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.running.pop(pid, None)
            if entry is None:
                continue
            proc, claim, launch_id = entry
            self.live.discard(launch_id)
            code = os.waitstatus_to_exitcode(status)
            proc.returncode = code  # reaped here: Popen must not wait for it again
            code = 128 - code if code < 0 else code
            try:
                fd = os.open(claim, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, f"{code}\n".encode())
                finally:
                    os.close(fd)
            except OSError:  # its job's directory was removed meanwhile: nobody asks
                pass
            # The next task in its slot starts first, and is answered before this exit is
            # told: the server learns of both at once.
            for req in self.held.pop(launch_id, ()):
                self.request(req)
            self._tell(f"{launch_id} {code}\n".encode())

    def _tell(self, line: bytes) -> None:
        if self.exit_fd is None:
            return
        try:
            os.write(self.exit_fd, line)
        except OSError:  # the server is gone; the claim files keep the codes
            os.close(self.exit_fd)
            self.exit_fd = None


def main(exit_fd: int) -> int:
    launcher = Launcher(exit_fd)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    # A handler (not SIG_IGN, which tasks would inherit) so that poll() wakes up.
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    requests_open = True
    pending = b""
    while requests_open or launcher.running:
        for fd, _ev in poller.poll():
            if fd == wake_r:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
                continue
            data = os.read(0, 1 << 16)
            if not data:
                requests_open = False
                poller.unregister(0)
                launcher.held.clear()
                launcher.waiting.clear()
                continue
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                req = json.loads(line)
                if "cancel" in req:
                    launcher.cancel(req["cancel"])
                else:
                    launcher.request(req)
        launcher.reap()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
