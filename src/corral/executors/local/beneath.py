"""Files of an attempt's folder, opened without following a link a job may have planted.

`runs/<job id>/` is the server's, but `attempt-<n>/` in it belongs to the user tasks run as:
a task can put a link, or a folder of its own, where the attempt's `ctl/` or `logs/` was,
or a link where a claim or a log file will be. The keeper, the launcher and the executors
open those files as the server's user (root, with `run_as`), from `/` one component at a
time with O_NOFOLLOW, so that a link on the way is refused, and take a file only when it is
a regular one with a single name (not a hard link to someone else's file, not a fifo that
would hold the server up), and, when told, its folder and the file the server's own.

The paths given here must be real ones: built on the resolved runs directory, or resolved
when they were checked against the storage roots.

Standard library only, and nothing of corral: the keeper and the launcher, which run as
scripts (`python -I -S launcher.py`), import it as their sibling. The storage layer has
the same mechanism for the server (`corral.storage.nofollow`), which executors may not use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

_O_PATH = getattr(os, "O_PATH", 0)
#: a folder passed through on the way down
_PASS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (_O_PATH or os.O_RDONLY)
#: a folder to list, or to make and open things in
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: added to every file's flags (O_NONBLOCK: opening a fifo must not wait for its other end)
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
#: a claim is a few lines; more is not one corral wrote
READ_MAX = 64 * 1024


class Refused(OSError):
    """A link where a folder or a file was expected, or a file or folder of the wrong kind
    or owner."""


def refused(path: object, why: str) -> Refused:
    return Refused(errno.ELOOP, f"refused, {why}", str(path))


def open_dir(path: str, *, make: bool = False, owner: int | None = None,
             start: int | None = None) -> int:
    """A descriptor of folder `path` (absolute; or relative to folder `start`), no component
    of it a link; its missing components made first with `make`. `owner`: the uid the
    folder must have (those on the way may be anyone's)."""
    names = [n for n in path.split("/") if n and n != "."]
    if ".." in names:
        raise refused(path, "'..' in a path opened without following links")
    if start is None:
        if not path.startswith("/"):
            raise ValueError(f"not an absolute path: {path!r}")
        fd = os.open("/", _DIR if not names else _PASS)
    else:
        fd = os.dup(start)
    try:
        for i, name in enumerate(names):
            nxt = _step(fd, name, _DIR if i == len(names) - 1 else _PASS, make, path)
            os.close(fd)
            fd = nxt
        if owner is not None and os.fstat(fd).st_uid != owner:
            raise refused(path, "a folder that is not the server's")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(dir_fd: int, name: str, flags: int, make: bool, shown: str) -> int:
    try:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make:
                raise
            with contextlib.suppress(FileExistsError):  # made meanwhile by someone else
                os.mkdir(name, 0o777, dir_fd=dir_fd)
            fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise refused(shown, "not a folder (a link?)") from None
        raise type(exc)(exc.errno, exc.strerror, shown) from None
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_PATH with O_NOFOLLOW opens a link itself
        os.close(fd)
        raise refused(shown, "a link where a folder was expected")
    return fd


def open_at(dir_fd: int, name: str, flags: int = os.O_RDONLY, *, owner: int | None = None,
            mode: int = 0o644, shown: object = None) -> int:
    """File `name` of folder `dir_fd`, opened with `flags` (O_CREAT and O_EXCL as asked),
    never through a link: a regular file with a single name, and `owner`'s when given."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    try:
        fd = os.open(name, flags | _FILE, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(shown or name, "a link where a file was expected") from None
        raise type(exc)(exc.errno, exc.strerror, str(shown or name)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise refused(shown or name, "not a regular file with a single name")
        if owner is not None and st.st_uid != owner:
            raise refused(shown or name, "a file that is not the server's")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: str, flags: int = os.O_RDONLY, *, make: bool = False,
              owner: int | None = None) -> int:
    """File `path` (absolute) opened as `open_at` opens it, its folder by `open_dir` (made
    first with `make`; `owner`'s, as the file must be, when given)."""
    parent, name = os.path.split(path)
    dir_fd = open_dir(parent, make=make, owner=owner)
    try:
        return open_at(dir_fd, name, flags, owner=owner, shown=path)
    finally:
        os.close(dir_fd)


def read(path: str, *, owner: int | None = None) -> tuple[str, os.stat_result]:
    """The text of a small file (at most READ_MAX bytes), opened as `open_file` opens it,
    and its status."""
    fd = open_file(path, owner=owner)
    try:
        return os.read(fd, READ_MAX).decode("utf-8", "replace"), os.fstat(fd)
    finally:
        os.close(fd)
