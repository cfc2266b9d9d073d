"""The local executor's launcher: starts tasks, each under a keeper, and tells their ends.

One launcher runs beside each server, started with the server's first task in a session of
its own, so that it outlives a server that is killed. Each launch is kept by a keeper
(`keeper`), a fork of the launcher, which claims the launch, starts the task as its child
and records how it ended in the launch's claim file. The launcher forks the next launch's
keeper ahead, whenever it has none and no keeper is starting a task (so the fork does not
take a core from a starting task); a launch that finds it ready is handed to it at once,
one that finds none gets one forked then.

It reads launch requests on stdin, one JSON object a line (`id`, `prefix`, `argv`, `shell`:
argv[0] is a command line for /bin/sh and the rest its arguments, `cwd`, `env`, `log`,
`user`, `task`, `cgroup`: where the task's cgroup goes and its memory limit, `log_max`: the
log's cap in bytes, 0 for none), and answers each on stdout once its keeper has started the
task, one JSON line: `{"id", "pid", "ticks", "keeper"}` or `{"id", "error"}`; it does not
wait for that answer to go on telling the ends of other tasks. Once a keeper
that started its task has recorded the task's end in the claim (it then says the end on
the pipe it answered on and closes it), or has died, it writes `<id> <end>` to the exit
pipe (the file descriptor given as its argument): the end the keeper recorded, a JSON
object (`code`, and `oom_kills`, `memory_mb`, `log_dropped` when it says them), or
`<id> -` when it recorded none (it was killed). So the server learns of an end when it is
recorded, not once the keeper's process has gone, and without reading the claim.

It is a child subreaper: a keeper that is killed leaves its task and whatever the task
started to the launcher, which kills them (its only children of its own are keepers).

When stdin closes (its server stopped or died) it takes no more requests (the keeper forked
ahead is told so, and exits), goes on telling ends, and exits once its last keeper has.

Only the standard library and `corral.oskit` (loaded as plain files): it runs as
`python -I -S` and starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
from typing import Any

if __package__:  # corral's module, as the server imports it
    from corral.executors.local import keeper
    from corral.oskit import procs
else:  # run as a script: corral is not on the path; its siblings are beside it, and the
    # OS primitives they load are in corral/oskit/
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [_HERE, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "oskit")]
    import keeper  # type: ignore[no-redef]
    import procs  # type: ignore[no-redef]


#: a keeper forked for a launch: its pid, the pipe its launch is written to, and the pipe
#: it answers on
Forked = tuple[int, int, int]


class Launcher:
    def __init__(self, exit_fd: int, answer_fd: int = 1) -> None:
        self.exit_fd: int | None = exit_fd
        self.answer_fd = answer_fd
        self.pid = os.getpid()
        #: the keepers not yet reaped
        self.keepers: set[int] = set()
        #: the keeper forked ahead, ready for the next launch
        self.ready: Forked | None = None
        #: whether to fork the next keeper ahead: not after one died while ready (a
        #: keeper that cannot get ready must not be forked again and again), until the
        #: next launch
        self.ahead = True
        #: the answer pipe of each keeper still starting its task -> (the request, what the
        #: keeper has said so far)
        self.starting: dict[int, tuple[dict[str, Any], bytes]] = {}
        #: the answer pipe of each keeper that started its task -> (its claim file, its
        #: launch id, what the keeper has said since its answer): the keeper says the
        #: task's end there and closes it once it has recorded the end
        self.ends: dict[int, tuple[str, str, bytes]] = {}
        self.poller = select.poll()

    def request(self, req: dict[str, Any], raw: bytes) -> None:
        """Hand the launch (`raw`, its JSON) to the keeper forked ahead, or to one forked
        now. Its answer is passed on when it comes (`heard`); the ends of other tasks are
        told meanwhile, not after the milliseconds a keeper takes to start its task."""
        ready, self.ready = self.ready, None
        self.ahead = True
        if ready is not None and self._hand(ready, req, raw):
            return
        try:  # (none was ready, or it died before it was handed the launch)
            forked = self.fork()
        except OSError as exc:  # out of descriptors or processes, say
            self.answer({"id": req["id"], "error": f"cannot start its keeper: {exc}"})
            return
        if not self._hand(forked, req, raw):
            self.answer({"id": req["id"], "error": "its keeper died before starting it"})

    def fork(self) -> Forked:
        """A keeper, getting ready, its launch not yet written (OSError: none)."""
        answer_r, answer_w = os.pipe()
        try:
            request_r, request_w = os.pipe()
        except OSError:
            os.close(answer_r)
            os.close(answer_w)
            raise
        try:
            pid = os.fork()
        except OSError:
            for fd in (answer_r, answer_w, request_r, request_w):
                os.close(fd)
            raise
        if pid == 0:  # (the launcher's ends, closed at once: its launch ends with EOF)
            os.close(request_w)
            os.close(answer_r)
            keeper.run(request_r, answer_w, self.pid)  # never returns
        os.close(answer_w)
        os.close(request_r)
        self.keepers.add(pid)
        os.set_blocking(answer_r, False)
        return pid, request_w, answer_r

    def fork_ahead(self) -> None:
        """Fork the next launch's keeper, unless one is ready, a keeper is starting a
        task (the fork would take a core from it), or the last one died while ready."""
        if self.ready is None and not self.starting and self.ahead:
            with contextlib.suppress(OSError):  # the next launch forks one then
                self.ready = self.fork()

    def _hand(self, forked: Forked, req: dict[str, Any], raw: bytes) -> bool:
        """Write the launch to the keeper `forked`; False when it died before reading it."""
        _pid, request_w, answer_r = forked
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(request_w, view):]
        except OSError:
            os.close(answer_r)
            return False
        finally:
            os.close(request_w)
        self.starting[answer_r] = (req, b"")
        self.poller.register(answer_r, select.POLLIN)
        return True

    def drop_ready(self) -> None:
        """Let the keeper forked ahead go: closing its request pipe tells it that no launch
        comes, and it exits (if it still lives: one that died is forked anew)."""
        if self.ready is not None:
            _pid, request_w, answer_r = self.ready
            self.ready = None
            os.close(request_w)
            os.close(answer_r)

    def answer(self, reply: dict[str, Any]) -> None:
        # A server that died after asking cannot read it: the claim says it all.
        with contextlib.suppress(OSError):
            os.write(self.answer_fd, json.dumps(reply).encode() + b"\n")

    def heard(self, fd: int) -> None:
        """Read what the keeper starting a task says on its answer pipe `fd`; once it has
        said how the start went (a line), pass it on. A keeper that started its task keeps
        the pipe open until it has recorded the task's end (`ended`)."""
        req, said = self.starting[fd]
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        said += chunk
        if chunk and b"\n" not in said:
            self.starting[fd] = (req, said)
            return
        del self.starting[fd]
        try:
            reply: dict[str, Any] = json.loads(said.split(b"\n", 1)[0])
        except ValueError:
            reply = {"error": "its keeper died before starting it"}
        self.answer({"id": req["id"], **reply})
        if "pid" in reply:  # (its closing, once it comes, wakes the poll as any other)
            self.ends[fd] = (req["prefix"] + ".claim", req["id"], said.partition(b"\n")[2])
            return
        self.poller.unregister(fd)
        os.close(fd)

    def ended(self, fd: int) -> None:
        """Tell the end of the task whose keeper's answer pipe `fd` is, once it closed: as
        the keeper said it there, or, from a keeper killed before it said it, as its claim
        records it (if it does)."""
        claim, launch_id, said = self.ends[fd]
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self.ends[fd] = (claim, launch_id, said + chunk)
            return
        del self.ends[fd]
        self.poller.unregister(fd)
        os.close(fd)
        end = keeper.said_end(said) if said else None
        if end is None:
            end = keeper.recorded_end(claim)
        told = "-" if end is None else json.dumps(end, separators=(",", ":"))
        self._tell(f"{launch_id} {told}\n".encode())

    def reap(self) -> None:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self.keepers.discard(pid)  # (its end is told when its answer pipe closes)
            if self.ready is not None and self.ready[0] == pid:  # died while ready
                self.drop_ready()
                self.ahead = False
        self.kill_strays()

    def kill_strays(self) -> None:
        """SIGKILL every child that is no keeper: orphaned by a keeper that was killed (a
        child not yet reaped keeps its pid, so none is mistaken)."""
        for pid in procs.children(os.getpid()):
            if pid not in self.keepers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _tell(self, line: bytes) -> None:
        if self.exit_fd is None:
            return
        try:
            os.write(self.exit_fd, line)
        except OSError:  # the server is gone; the claim files keep the codes
            os.close(self.exit_fd)
            self.exit_fd = None


def main(exit_fd: int) -> int:
    keeper.prctl(keeper.PR_SET_CHILD_SUBREAPER, 1)
    keeper.more_files()
    launcher = Launcher(exit_fd)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    # A handler (not SIG_IGN, which tasks would inherit) so that poll() wakes up.
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = launcher.poller
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    requests_open = True
    pending = b""
    while requests_open or launcher.keepers or launcher.starting or launcher.ends:
        if requests_open:
            launcher.fork_ahead()
        for fd, _ev in poller.poll():
            if fd in launcher.starting:
                launcher.heard(fd)
                continue
            if fd in launcher.ends:
                launcher.ended(fd)
                continue
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
                launcher.drop_ready()
                continue
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                launcher.request(json.loads(line), line)
        launcher.reap()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
