"""Files under paths a job can write, opened without following the links it may plant.

A job's processes can write in its attempt folder (`runs/<job>/attempt-<n>/` is theirs),
in its output folders and, through them, in folders other jobs are later given. Between
the moment the server checked such a path and the moment it uses it, a job can put a
symbolic link where a folder or a file was; a server that then opens the path as root
reads or writes wherever the link points. So the paths given here must be real ones
(resolved when they were checked against the storage roots, or built on the resolved
runs directory), and each is opened one component at a time from `/`, with O_NOFOLLOW:
a link found in one now is one a job planted, and is refused. A file opened for reading
must also be a regular file with a single name: a hard link to a file the job could not
read, or a fifo that would hold the server up, is refused too.

The same file is the child process that does a job's file work with the rights of the
user the job runs as: `python -I -S nofollow.py <operation> [<uid> <gid>]`, a JSON request
on stdin and a JSON answer on stdout (see `main`). It drops to that user before it reads
anything, so the kernel checks that user's permissions: a root-only file cannot be read,
a folder the user may not write cannot be written. It imports only the standard library.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

_O_PATH = getattr(os, "O_PATH", 0)
#: a folder passed through on the way down: searching it is all that is needed
_PASS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (_O_PATH or os.O_RDONLY)
#: a folder to list, change or make things in
_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: a file opened for reading (O_NONBLOCK: opening a fifo must not wait for a writer)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
#: a file written anew, beside the name it then replaces
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20


class Refused(OSError):
    """A link where a folder or a file was expected, or a file of the wrong kind."""


def _refused(path: object, why: str) -> Refused:
    return Refused(errno.ELOOP, f"refused, {why}", str(path))


def _named(exc: OSError, path: object) -> OSError:
    """`exc` again, naming the whole path rather than its last component."""
    return type(exc)(exc.errno, exc.strerror, str(path))


def components(path: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(path)
    if not text.startswith("/"):
        raise ValueError(f"not an absolute path: {text!r}")
    names = [n for n in text.split("/") if n and n != "."]
    if ".." in names:
        raise _refused(text, "'..' in a path opened without following links")
    return names


def _step(dir_fd: int, name: str, flags: int, make: bool, shown: str) -> tuple[int, bool]:
    """Folder `name` in `dir_fd`, not through a link (made first when missing and `make`):
    its descriptor, and whether it was made here."""
    made = False
    try:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make:
                raise
            try:
                os.mkdir(name, 0o777, dir_fd=dir_fd)
                made = True
            except FileExistsError:  # made meanwhile by someone else
                pass
            fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(shown, "not a folder (a link?)") from None
        raise _named(exc, shown) from None
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_PATH with O_NOFOLLOW opens a link itself
        os.close(fd)
        raise _refused(shown, "a link where a folder was expected")
    return fd, made


def _open_dir(path: str | os.PathLike[str], *, make: bool = False,
              last: int = _OPEN) -> tuple[int, bool]:
    names = components(path)
    fd = os.open("/", last if not names else _PASS)
    made = False
    shown = ""
    try:
        for i, name in enumerate(names):
            shown += "/" + name
            nxt, made = _step(fd, name, last if i == len(names) - 1 else _PASS, make, shown)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def open_dir(path: str | os.PathLike[str], *, make: bool = False) -> int:
    """A descriptor of folder `path` (one to list, change or make things in), no component
    of it a link; its missing components are made first with `make`."""
    return _open_dir(path, make=make)[0]


def open_sub(dir_fd: int, name: str, *, shown: object = None, make: bool = False) -> int:
    """A descriptor of folder `name` of folder `dir_fd` (one to list, change or make things
    in), not through a link; made first when missing with `make`."""
    return _step(dir_fd, name, _OPEN, make, str(shown or name))[0]


def make_dirs(path: str | os.PathLike[str], owner: tuple[int, int] | None = None) -> None:
    """Make folder `path` where it is missing; the folder made is `owner`'s when given
    (the ones made on the way stay the server's)."""
    fd, made = _open_dir(path, make=True)
    try:
        if made and owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)


def open_file(path: str | os.PathLike[str]) -> int:
    """A descriptor of file `path` for reading: no component of it a link, and the file a
    regular one with a single name."""
    parent, name = os.path.split(os.fspath(path))
    if not name:
        raise ValueError(f"not a file's path: {os.fspath(path)!r}")
    dir_fd = _open_dir(parent, last=_PASS)[0]
    try:
        return open_at(dir_fd, name, shown=path)
    finally:
        os.close(dir_fd)


def open_at(dir_fd: int, name: str, *, shown: object = None) -> int:
    """File `name` of folder `dir_fd` for reading, as `open_file` opens it."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(shown or name, "a link where a file was expected") from None
        raise _named(exc, shown or name) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise _refused(shown or name, "not a regular file with a single name")
    os.set_blocking(fd, True)
    return fd


def replace(dir_fd: int, name: str, fill: Callable[[int], None], mode: int = 0o644) -> None:
    """Write file `name` of folder `dir_fd` anew: `fill` writes a new file beside it, which
    then takes its name. Nothing is ever written through what was at that name."""
    tmp = f".{name}.tmp-{os.getpid()}"
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


def pump(src: int, dst: int) -> None:
    """Copy what is left of descriptor `src` to descriptor `dst`."""
    while chunk := os.read(src, CHUNK):
        write_all(dst, chunk)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --- the work done as the job's user ----------------------------------------------------


def copy_tree(src: int, dst: int, ignore: Sequence[str] = ()) -> None:
    """Copy folder `src` into the empty folder `dst` (descriptors): links are copied as
    links, never followed; names matching an `ignore` pattern are left out; set-id bits
    are dropped. A fifo, socket or device file stops the copy."""
    with os.scandir(src) as found:
        entries = sorted(found, key=lambda e: e.name)
    for e in entries:
        if any(fnmatch.fnmatch(e.name, pattern) for pattern in ignore):
            continue
        if e.is_symlink():
            os.symlink(os.readlink(e.name, dir_fd=src), e.name, dir_fd=dst)
        elif e.is_dir(follow_symlinks=False):
            sub, _ = _step(src, e.name, _OPEN, False, e.name)
            try:
                os.mkdir(e.name, 0o700, dir_fd=dst)
                out, _ = _step(dst, e.name, _OPEN, False, e.name)
                try:
                    copy_tree(sub, out, ignore)
                    os.fchmod(out, os.fstat(sub).st_mode & 0o777)
                finally:
                    os.close(out)
            finally:
                os.close(sub)
        else:
            _copy_file(src, dst, e.name)


def _copy_file(src: int, dst: int, name: str) -> None:
    fd = os.open(name, _READ, dir_fd=src)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refused(name, "not a regular file (a fifo, socket or device)")
        os.set_blocking(fd, True)
        out = os.open(name, _NEW, 0o600, dir_fd=dst)
        try:
            pump(fd, out)
            os.fchmod(out, st.st_mode & 0o777)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def tree_hash(root: int, ignore: Sequence[str] = ()) -> str:
    """`sha256:<hex>` over the relative paths, kinds and contents of every file in folder
    `root` (a descriptor), in the order of their relative paths; names matching an
    `ignore` pattern are left out.

    Names and bytes only (no times, no permissions but the executable bit), so the same
    code copied anywhere hashes the same.
    """
    h = hashlib.sha256()
    _hash_dir(h, root, "", ignore)
    return "sha256:" + h.hexdigest()


def _hash_dir(h: Any, fd: int, prefix: str, ignore: Sequence[str]) -> None:
    with os.scandir(fd) as found:
        entries = [e for e in found
                   if not any(fnmatch.fnmatch(e.name, pattern) for pattern in ignore)]
    # A folder's files follow on its name and a "/": visiting the entries in this order
    # visits the files in the order of their whole relative paths.
    folders = {e.name for e in entries if e.is_dir(follow_symlinks=False)}
    for e in sorted(entries, key=lambda e: e.name + "/" if e.name in folders else e.name):
        rel = prefix + e.name
        if e.is_symlink():
            h.update(_b(f"L {rel} -> {os.readlink(e.name, dir_fd=fd)}\0"))
        elif e.name in folders:
            sub, _ = _step(fd, e.name, _OPEN, False, rel)
            try:
                _hash_dir(h, sub, rel + "/", ignore)
            finally:
                os.close(sub)
        elif e.is_file(follow_symlinks=False):
            file = os.open(e.name, _READ, dir_fd=fd)
            try:
                st = os.fstat(file)
                os.set_blocking(file, True)
                mode = "x" if st.st_mode & 0o111 else "f"
                h.update(_b(f"{mode} {rel} {st.st_size}\0"))
                while chunk := os.read(file, CHUNK):
                    h.update(chunk)
            finally:
                os.close(file)


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove folder (or file) `path` and everything in it, never following a link: one on
    the way to it is refused (Refused), one inside it is removed, not what it points at.
    False when there was nothing to remove."""
    parent, name = os.path.split(os.path.normpath(os.fspath(path)))
    if not name or name in (".", ".."):
        raise ValueError(f"not a removable path: {os.fspath(path)!r}")
    try:
        dir_fd = _open_dir(parent, last=_OPEN)[0]
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


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def git_commit(src: str) -> str | None:
    """The commit checked out where `src` lies in a git work tree (`-dirty` when it has
    uncommitted changes), or None when it is in none or git is not installed."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", src, *args], capture_output=True, text=True,
                                 timeout=10, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{commit}-dirty" if dirty else commit


def snapshot(req: dict[str, Any]) -> dict[str, Any]:
    """Copy folder `src` to `<attempt_dir>/<tmp>`, rename it `<name>`; answer its
    `code_hash` and the `git_commit` of `src`."""
    src = open_dir(req["src"])
    try:
        att = open_dir(req["attempt_dir"])
        try:
            os.mkdir(req["tmp"], 0o700, dir_fd=att)
            out, _ = _step(att, req["tmp"], _OPEN, False, req["tmp"])
            try:
                copy_tree(src, out, req.get("ignore", ()))
                os.fchmod(out, os.fstat(src).st_mode & 0o777)
                os.rename(req["tmp"], req["name"], src_dir_fd=att, dst_dir_fd=att)
                code_hash = tree_hash(out)  # the descriptor follows the folder's new name
            finally:
                os.close(out)
        finally:
            os.close(att)
    finally:
        os.close(src)
    return {"code_hash": code_hash, "git_commit": git_commit(req["src"])}


def export(req: dict[str, Any]) -> dict[str, Any]:
    """Write each of `files` ([name, descriptor inherited from the parent]) into folder
    `dest`, made where missing."""
    dest = open_dir(req["dest"], make=True)
    try:
        for name, fd in req["files"]:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"not a file name: {name!r}")
            st = os.fstat(fd)

            def fill(out: int, fd: int = fd, st: os.stat_result = st) -> None:
                pump(fd, out)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))

            replace(dest, name, fill, st.st_mode & 0o777)
    finally:
        os.close(dest)
    return {}


OPERATIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "snapshot": snapshot, "export": export}


def main(argv: Sequence[str]) -> int:
    """`<operation> [<uid> <gid>]`: become that user first (the interpreter is started by
    the server's user: it may live where the job's user may not run it), then read the
    request from stdin and answer `{..}` or `{"error": ".."}` on stdout."""
    if len(argv) > 2:
        uid, gid = int(argv[2]), int(argv[3])
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid):
            return 3
    request = json.load(sys.stdin)
    try:
        answer = OPERATIONS[argv[1]](request)
    except (OSError, ValueError) as exc:
        answer = {"error": str(exc)}
    json.dump(answer, sys.stdout)
    return 1 if "error" in answer else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
