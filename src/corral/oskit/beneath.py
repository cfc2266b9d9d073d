"""Files and folders under paths a job can write, opened without following the links it
may plant.

A job's processes can write in its attempt folder (`runs/<job>/attempt-<n>/` is theirs:
they can put a link, or a folder of their own, where its `ctl/` or `logs/` was), in its
output folders and, through them, in folders other jobs are later given. Between the moment
the server checked such a path and the moment it uses it, a job can put a symbolic link
where a folder or a file was; a server that then opens the path as root reads or writes
wherever the link points. So the paths given here must be real ones (resolved when they
were checked against the storage roots, or built on the resolved runs directory), and each
is opened one component at a time from `/` (or from a folder already open), with
O_NOFOLLOW: a link found in one now is one a job planted, and is refused. A file is taken
only when it is a regular one with a single name (not a hard link to a file the job could
not read, not a fifo that would hold the server up) and, when told, it and its folder are
the server's own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable

_O_PATH = getattr(os, "O_PATH", 0)
#: a folder passed through on the way down: searching it is all that is needed
_PASS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (_O_PATH or os.O_RDONLY)
#: a folder to list, change or make things in
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: added to every file's flags (O_NONBLOCK: opening a fifo must not wait for its other end)
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
#: a file written anew, beside the name it then replaces
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20
#: a claim or a plan is a few lines; more is not one corral wrote
READ_MAX = 64 * 1024


class Refused(OSError):
    """A link where a folder or a file was expected, or a file or folder of the wrong kind
    or owner."""


def refused(path: object, why: str) -> Refused:
    return Refused(errno.ELOOP, f"refused, {why}", str(path))


def _named(exc: OSError, path: object) -> OSError:
    """`exc` again, naming the whole path rather than its last component."""
    return type(exc)(exc.errno, exc.strerror, str(path))


def components(path: str | os.PathLike[str]) -> list[str]:
    """The names of absolute path `path`, one a component (Refused for a '..')."""
    text = os.fspath(path)
    if not text.startswith("/"):
        raise ValueError(f"not an absolute path: {text!r}")
    return _names(text)


def _names(text: str) -> list[str]:
    names = [n for n in text.split("/") if n and n != "."]
    if ".." in names:
        raise refused(text, "'..' in a path opened without following links")
    return names


def open_dir(path: str | os.PathLike[str], *, make: bool = False, owner: int | None = None,
             start: int | None = None, shown: object = None) -> int:
    """A descriptor of folder `path` (absolute; or relative to folder `start`) to list,
    change or make things in, no component of it a link; its missing components made first
    with `make`. `owner`: the uid the folder must have (those on the way may be anyone's).
    Errors name `shown` when given, else the path as far as it was opened."""
    return _descend(path, make=make, owner=owner, start=start, shown=shown)[0]


def make_dirs(path: str | os.PathLike[str], owner: tuple[int, int] | None = None) -> None:
    """Make folder `path` where it is missing; the folder made is `owner`'s (uid, gid)
    when given (the ones made on the way stay the server's)."""
    fd, made = _descend(path, make=True)
    try:
        if made and owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)


def _descend(path: str | os.PathLike[str], *, make: bool = False, owner: int | None = None,
             start: int | None = None, last: int = _DIR, shown: object = None,
             ) -> tuple[int, bool]:
    """Folder `path` opened with `last`, one component at a time: its descriptor, and
    whether its last component was made here."""
    text = os.fspath(path)
    names = components(text) if start is None else _names(text)
    fd = os.open("/", last if not names else _PASS) if start is None else os.dup(start)
    made, so_far = False, "" if start is None else None
    try:
        for i, name in enumerate(names):
            so_far = name if so_far is None else f"{so_far}/{name}"
            flags = last if i == len(names) - 1 else _PASS
            nxt, made = _step(fd, name, flags, make, shown or so_far)
            os.close(fd)
            fd = nxt
        if owner is not None and os.fstat(fd).st_uid != owner:
            raise refused(shown or text, "a folder that is not the server's")
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def _step(dir_fd: int, name: str, flags: int, make: bool, shown: object) -> tuple[int, bool]:
    """Folder `name` in `dir_fd`, not through a link (made first when missing and `make`):
    its descriptor, and whether it was made here."""
    made = False
    try:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make:
                raise
            with contextlib.suppress(FileExistsError):  # made meanwhile by someone else
                os.mkdir(name, 0o777, dir_fd=dir_fd)
                made = True
            fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise refused(shown, "not a folder (a link?)") from None
        raise _named(exc, shown) from None
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_PATH with O_NOFOLLOW opens a link itself
        os.close(fd)
        raise refused(shown, "a link where a folder was expected")
    return fd, made


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
        raise _named(exc, shown or name) from None
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


def open_file(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, make: bool = False,
              owner: int | None = None) -> int:
    """File `path` (absolute) opened as `open_at` opens it, its folder as `open_dir` does
    (made first with `make`; `owner`'s, as the file must be, when given)."""
    parent, name = os.path.split(os.fspath(path))
    if not name:
        raise ValueError(f"not a file's path: {os.fspath(path)!r}")
    dir_fd = _descend(parent, make=make, owner=owner, last=_PASS)[0]
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


def replace(dir_fd: int, name: str, fill: Callable[[int], None], mode: int = 0o644) -> None:
    """Write file `name` of folder `dir_fd` anew: `fill` writes a new file beside it, which
    then takes its name. Nothing is ever written through what was at that name."""
    tmp = _unfinished(name, os.getpid())
    with contextlib.suppress(FileNotFoundError):  # left by a writer that died
        os.unlink(tmp, dir_fd=dir_fd)
    fd = os.open(tmp, _NEW, 0o600, dir_fd=dir_fd)
    try:
        fill(fd)
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _unfinished(name: str, pid: int) -> str:
    """The name `replace` writes file `name` under until it is whole."""
    return f".{name}.tmp-{pid}"


def _writer(unfinished: str) -> int | None:
    """The pid of the process that wrote a file named by `_unfinished`; None for a name
    `_unfinished` does not make."""
    head, sep, pid = unfinished.rpartition(".tmp-")
    return int(pid) if sep and len(head) > 1 and head.startswith(".") and pid.isdigit() \
        else None


def drop_abandoned(dir_fd: int, name: str) -> int:
    """Remove from folder `dir_fd` the parts of file `name` that `replace` was writing in a
    process that is gone (killed in the middle of it); returns how many. A part whose
    writer is still there, or another user's process that may be, is left to it."""
    count = 0
    for entry in os.listdir(dir_fd):
        pid = _writer(entry)
        if pid is None or entry != _unfinished(name, pid) or _alive(pid):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry, dir_fd=dir_fd)
            count += 1
    return count


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def drop_unfinished(path: str | os.PathLike[str]) -> int:
    """Remove, anywhere under folder `path`, the files other processes were writing with
    `replace` (a server killed in the middle of one leaves its part of a file there);
    returns how many. Links are not followed; a folder that is not there has none."""
    count = 0
    with contextlib.suppress(FileNotFoundError):  # (`path` itself)
        for _where, _dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in files:
                if _writer(name) not in (None, os.getpid()):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=dir_fd)
                        count += 1
    return count


def pump(src: int, dst: int) -> None:
    """Copy what is left of descriptor `src` to descriptor `dst`."""
    while chunk := os.read(src, CHUNK):
        write_all(dst, chunk)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove folder (or file) `path` and everything in it, never following a link: one on
    the way to it is refused (Refused), one inside it is removed, not what it points at.
    False when there was nothing to remove."""
    parent, name = os.path.split(os.path.normpath(os.fspath(path)))
    if not name or name in (".", ".."):
        raise ValueError(f"not a removable path: {os.fspath(path)!r}")
    try:
        dir_fd = open_dir(parent)
    except FileNotFoundError:
        return False
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=dir_fd)  # by descriptors: links inside are not followed
        else:
            os.unlink(name, dir_fd=dir_fd)
        return True
    finally:
        os.close(dir_fd)
