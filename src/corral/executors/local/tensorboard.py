"""A TensorBoard process on this machine: started on a socket the server made, and stopped.

The server chooses the address and takes it before the process exists: it binds a unix
socket in a folder of its own (mode 0700: nobody else may enter it, so no job can put
anything there nor connect to what is there), listens, and hands the listening descriptor
to the process it starts (`tbstart.py`), then closes its own copy, so that a process that
ends takes every connection with it instead of leaving them waiting. No port, no token:
the server's proxy is the only way in (api/tensorboard_proxy.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pathlib
import signal
import socket
import stat
import subprocess
import sys

from corral.executors.local import tbstart

#: seconds a TensorBoard has to end after SIGTERM before it is killed
GRACE_S = 3.0
#: connections that may wait for TensorBoard to accept them (its start takes seconds)
BACKLOG = 64
#: bytes of the end of its log shown when it ended by itself
TAIL_BYTES = 2000


@dataclasses.dataclass
class Process:
    """A running TensorBoard: where it answers, and its log."""

    sock: pathlib.Path
    log: pathlib.Path
    proc: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        """The end of its log (what it said before it ended)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - TAIL_BYTES))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""


def prepare(folder: pathlib.Path, *, clean: bool = False) -> None:
    """Make `folder` (the server's, mode 0700) where missing, and give it that owner and
    mode again where it has them no more; `clean`: remove the sockets and logs in it (of
    TensorBoards no longer running)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, os.geteuid(), os.getegid())
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
        for name in os.listdir(fd) if clean else ():
            if name.endswith((".sock", ".log")):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def start(folder: pathlib.Path, name: str, *, logdir: str, prefix: str,
          user: tuple[int, int] | None) -> Process:
    """TensorBoard over `logdir` under the URL path `prefix`, as `user` (uid, gid; None:
    the server's own), answering on `<folder>/<name>.sock` (`folder` made by `prepare`);
    its output in `<name>.log` there."""
    sock_path, log_path = folder / f"{name}.sock", folder / f"{name}.log"
    listener = _listen(folder, sock_path.name)
    try:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                      | os.O_CLOEXEC, 0o600)
        try:
            argv = [sys.executable, "-I", "-c", _script(), str(listener.fileno()), logdir,
                    prefix, str(os.getpid())]
            proc = subprocess.Popen(
                argv, cwd="/", env=_env(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                pass_fds=(listener.fileno(),), user=user[0] if user else None,
                group=user[1] if user else None, extra_groups=[] if user else None)
        finally:
            os.close(log)
    finally:
        listener.close()
    return Process(sock=sock_path, log=log_path, proc=proc)


def stop(process: Process) -> None:
    """End it (SIGTERM, then SIGKILL after GRACE_S) and remove its socket and its log."""
    if process.alive():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.proc.pid, signal.SIGTERM)
        try:
            process.proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.proc.pid, signal.SIGKILL)
            process.proc.wait()
    for path in (process.sock, process.log):
        with contextlib.suppress(OSError):
            path.unlink()


def _listen(folder: pathlib.Path, name: str) -> socket.socket:
    """A unix socket bound at `folder/name` (what was there removed first) and listening.
    Bound through a descriptor of the folder: a path longer than a socket's address holds
    (108 bytes) is reached that way (kinds/notebooks/sockets.address connects the same)."""
    dirfd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dirfd)
        sock.bind(f"/proc/self/fd/{dirfd}/{name}")
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(dirfd)
    return sock


def _env() -> dict[str, str]:
    """What TensorBoard's environment holds: a search path and a locale, nothing of the
    server's (its settings, its credentials)."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": "/nonexistent"}


@functools.cache
def _script() -> str:
    return pathlib.Path(tbstart.__file__).read_text()
