"""Where a session's JupyterLab listens, known without trusting anything a job can write.

Every job runs as the same task user (`run_as`), so whatever that user may write, any job
of any project may write: a file JupyterLab writes about itself (`jpserver-*.json`) says
nothing a job could not have said. So the server names the place itself and checks who is
there:

- JupyterLab listens on a unix socket, never on a TCP port, at a path the server chose:
  `$CORRAL_HOME/jupyter/<notebook's hash>-<session>.sock`. That folder is the server's, mode 1733:
  the task user may make a socket in it, but neither list it nor rename or remove what is
  not the task user's (the sticky bit).
- JupyterLab binds it with mode 0 and listens only once the server has made it its own,
  mode 0600 (`claim`; `labstart.py`): until then nobody can connect (nothing listens), and
  from then on no other user can connect to it, remove it or put something else at its
  name.
- Then it asks the kernel who listens at the other end (`SO_PEERCRED`: the process that
  called listen()), and takes the socket only when that is the session's own task or a
  process it started (`listener`, `descends`). A socket a job made there first is
  refused, never used.

Standard library only, and `corral.oskit` (what /proc says of the process that listens).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import stat
import struct
import threading
import time

from corral.oskit import procs

#: the folder's mode: the task user may add a socket, not list or remove others' entries
FOLDER_MODE = 0o1733
#: what sun_path holds (108 bytes, the last a NUL)
MAX_PATH = 107
#: seconds a connection to ask who listens may take
TIMEOUT = 3.0
#: seconds a session's JupyterLab is given to listen once its socket was taken: it waits
#: for that, looking every few milliseconds (labstart.py)
LISTEN_WAIT = 1.0


def prepare(folder: pathlib.Path) -> None:
    """Make the sockets' folder (the server's, FOLDER_MODE) where missing, and give it that
    mode and owner again where it has them no more."""
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, os.geteuid(), os.getegid())
        if stat.S_IMODE(info.st_mode) != FOLDER_MODE:
            os.fchmod(fd, FOLDER_MODE)
    finally:
        os.close(fd)


def claim(path: pathlib.Path) -> bool:
    """Make the socket at `path` the server's, mode 0600, so that from now on nobody else
    connects to it or replaces it; False while there is no socket there (JupyterLab has
    not listened yet), or when what was there changed meanwhile."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            # O_PATH: the entry itself, whatever it is; a link is not followed
            held = os.open(path.name, os.O_PATH | os.O_NOFOLLOW, dir_fd=folder)
        except FileNotFoundError:
            return False
        try:
            info = os.fstat(held)
            if not stat.S_ISSOCK(info.st_mode):
                return False
            # (through the descriptor: the very inode checked, whatever has its name now)
            os.chown(f"/proc/self/fd/{held}", os.geteuid(), os.getegid())
            os.chmod(f"/proc/self/fd/{held}", 0o600)
        finally:
            os.close(held)
        try:
            now = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)
    finally:
        os.close(folder)


def address(path: pathlib.Path) -> str:
    """What to connect to for the socket at `path`: the path itself where it fits a unix
    socket's address (MAX_PATH), else the same entry reached through a descriptor of its
    folder (`/proc/self/fd/N/name`), so that no CORRAL_HOME is too long for notebooks."""
    if len(os.fsencode(path)) <= MAX_PATH:
        return str(path)
    return f"/proc/self/fd/{_folder_fd(path.parent)}/{path.name}"


_folders: dict[pathlib.Path, int] = {}
_folders_lock = threading.Lock()


def _folder_fd(folder: pathlib.Path) -> int:
    """A descriptor of `folder`, held for the process's life (connections made later, by a
    pool, use it), opened anew when the folder was made anew (the old one is not closed:
    an address already handed out must never name another file that took its number)."""
    with _folders_lock:
        fd = _folders.get(folder)
        if fd is not None:
            held, now = os.fstat(fd), os.stat(folder, follow_symlinks=False)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                return fd
        fd = _folders[folder] = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        return fd


def listener(path: pathlib.Path, *, wait: float = 0.0) -> int | None:
    """The pid of the process that listens on the socket at `path` (as it was when it
    called listen()), or None when none answers there (within `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            try:
                sock.connect(address(path))
            except OSError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.01)
                continue
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
        pid, _uid, _gid = struct.unpack("3i", creds)
        return pid or None


def descends(pid: int, task_pid: int, task_ticks: float) -> bool:
    """Whether process `pid` is the task `task_pid` (started at `task_ticks`, clock ticks
    since boot: a reused pid is not it) or a process it started."""
    if _ticks(task_pid) != task_ticks:
        return False
    for _ in range(64):  # a chain of parents; never a loop, but bounded all the same
        if pid == task_pid:
            return True
        parent = _parent(pid)
        if parent is None or parent <= 1:
            return False
        pid = parent
    return False


def remove(folder: pathlib.Path, pattern: str) -> None:
    """Remove the sockets of `folder` whose names match `pattern` (a session's, ended)."""
    with contextlib.suppress(OSError):
        for found in folder.glob(pattern):
            with contextlib.suppress(OSError):
                found.unlink()


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command's name (field 3 on)."""
    try:
        return procs.stat_fields(pid)
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _ticks(pid: int) -> float | None:
    fields = _stat(pid)
    return float(fields[19]) if fields else None
