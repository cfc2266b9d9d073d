"""Starting a task straight into its cgroup v2: clone3(2) with CLONE_INTO_CGROUP (Linux 5.7).

A process that moves itself, or another, into a cgroup (a write to `cgroup.procs`) takes a
lock on every process's forks and exits, and taking it waits for an RCU grace period:
milliseconds at each launch of an idle machine. A child created in its cgroup by the
kernel takes no such lock. The task's keeper calls `spawn`; where the kernel or a seccomp
filter refuses clone3 (None), the keeper moves itself in and forks as before.

The child runs a few standard-library calls between clone3 and its exec, as the child of
`subprocess.Popen` does in C: its descriptors, its folder, a session of its own, the
task's user, and default dispositions for what Python ignores. What fails there is sent
back on a pipe and raised here as Popen raises it.

Standard library only: the keeper, run by the launcher as a script, imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import os
import signal
from typing import Any, NoReturn

#: clone3's number: one for every architecture since the numbers were unified (alpha aside)
SYS_CLONE3 = 435
CLONE_INTO_CGROUP = 0x200000000


class _Args(ctypes.Structure):
    """struct clone_args, as far as CLONE_INTO_CGROUP (its 11th field)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size",
        "tls", "set_tid", "set_tid_size", "cgroup")]


@dataclasses.dataclass
class Child:
    """A task started here (what the keeper needs of a `subprocess.Popen`)."""

    pid: int
    returncode: int | None = None


@dataclasses.dataclass(frozen=True)
class Start:
    """What the task is started with."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    out: int  #: its stdout and stderr
    user: tuple[int, int] | None = None  #: (uid, gid) it runs as


def spawn(start: Start, cgroup: str) -> Child | None:
    """The task started in the cgroup v2 folder `cgroup`, in a session of its own, stdin
    from /dev/null; None when this kernel does not do it (nothing was started). OSError
    when it could not be started (its program or folder missing, say).

    None too when this process runs other threads: a bare clone3 runs none of the C
    library's fork handlers, so a lock another thread held (malloc's) stays held in the
    child, which then waits for it forever before its exec (seen from pytest's process;
    a keeper is single-threaded). The caller starts it the other way."""
    if len(os.listdir("/proc/self/task")) > 1:
        return None
    group = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    err_r, err_w = os.pipe()  # (close-on-exec: it closes when the exec succeeds)
    try:
        args = _Args(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=group)
        # As os.fork does: the interpreter readied for a fork, and its state (the GIL,
        # the other threads, which the child has not) set right on each side after it.
        # Without it a child of a process with other threads could wait for the GIL
        # forever, never reaching its exec.
        api = ctypes.pythonapi
        api.PyOS_BeforeFork()
        pid = _syscall()(SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
        if pid == 0:
            api.PyOS_AfterFork_Child()
            _child(start, null, err_w)
        api.PyOS_AfterFork_Parent()
        if pid < 0:
            return None
        os.close(err_w)
        err_w = -1
        report = b""
        while chunk := os.read(err_r, 256):
            report += chunk
    finally:
        for fd in (group, null, err_r, err_w):
            if fd >= 0:
                os.close(fd)
    if report:
        os.waitpid(pid, 0)
        stage, _, number = report.decode().partition(":")
        named = {"cwd": start.cwd, "exec": start.argv[0]}.get(stage)
        raise OSError(int(number), os.strerror(int(number)), named)
    return Child(pid)


def _child(start: Start, null: int, err_w: int) -> NoReturn:
    """(in the new process) Become the task; on failure, say where on `err_w`."""
    stage = "setup"
    try:
        signal.set_wakeup_fd(-1)  # the keeper's: no signal of this child's goes there
        os.dup2(null, 0)
        os.dup2(start.out, 1)
        os.dup2(start.out, 2)
        stage = "cwd"
        os.chdir(start.cwd)
        stage = "setup"
        os.setsid()
        if start.user is not None:
            os.setgroups([])
            os.setregid(start.user[1], start.user[1])
            os.setreuid(start.user[0], start.user[0])
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python, kept by exec
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.closerange(3, err_w)
        os.closerange(err_w + 1, os.sysconf("SC_OPEN_MAX"))
        stage = "exec"
        os.execvpe(start.argv[0], start.argv, start.env)
    except Exception as exc:  # (an OSError, or a value exec refuses: EINVAL)
        number = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
        with contextlib.suppress(OSError):
            os.write(err_w, f"{stage}:{number}".encode())
    finally:
        os._exit(255)


@functools.cache
def _syscall() -> Any:
    # PyDLL, not CDLL: the GIL stays held across clone3, as across os.fork's fork().
    call = ctypes.PyDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    call.argtypes = [ctypes.c_long, ctypes.POINTER(_Args), ctypes.c_size_t]
    return call
