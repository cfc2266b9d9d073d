"""Folders on the server that a job can write, read to ship them to the Ray nodes.

The server reads them with its own rights (root, with `run_as`): the attempt's code
snapshot (its user's), its inputs, the output channels a task starts from. A task, or
another of the same user, may have put links in them, or swap a folder for a link while
they are read. So they are walked without following a link (`oskit.walk`): a link inside
is never followed (a snapshot keeps it as a link, inputs leave it out), nor is a file taken
that has a second name; and when tasks run as another user, only what that user could read
here is taken, by the modes of what was opened (`walk.Reader`).
"""

from __future__ import annotations

import io
import os
import pwd
import stat
import tarfile

from corral.oskit import beneath, walk


def reader_of(run_as: str | None) -> walk.Reader | None:
    """Whose rights bound what is shipped: None when tasks run as the server's user."""
    if run_as is None:
        return None
    try:
        pw = pwd.getpwnam(run_as)
    except KeyError:
        return walk.Reader(-1)
    if pw.pw_uid in (0, os.geteuid()):
        return None
    return walk.Reader(pw.pw_uid, frozenset(os.getgrouplist(run_as, pw.pw_gid)))


def open_named(path: str, rel: str, reader: walk.Reader | None) -> int:
    """File `rel` (as `walk.open_below` opens it) of the folder a job named by `path`, or with
    `rel` "" the file `path` itself. The path's own links are followed (it was checked
    against the job's storage roots when its attempt was prepared), and what it leads to
    must be the reader's to read too."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
                 | (os.O_DIRECTORY if rel else 0))
    try:
        st = os.fstat(fd)
        if reader is not None and not reader.may(st, walk.SEARCH if rel else walk.READ):
            raise walk.denied(path, "a folder" if rel else "a file")
        if rel:
            return walk.open_below(fd, rel, reader, path)
        if not stat.S_ISREG(st.st_mode):
            raise beneath.refused(path, "not a regular file")
        os.set_blocking(fd, True)
        return os.dup(fd)
    finally:
        os.close(fd)


def tar_of(code_dir: str, reader: walk.Reader | None) -> bytes:
    """The code snapshot `code_dir` (a real path of the run directory: no link on it) as
    a tar: links as links, and nothing its task's user may not read."""
    top = beneath.open_dir(code_dir)
    buf = io.BytesIO()
    try:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.addfile(_info(".", tarfile.DIRTYPE, os.fstat(top)))
            for e in walk.walk(top, reader):
                if not e.why or stat.S_ISLNK(e.st.st_mode):
                    _add(tar, top, e, reader, code_dir)
    finally:
        os.close(top)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, top: int, e: walk.Entry, reader: walk.Reader | None,
         shown: str) -> None:
    name = f"./{e.rel}"
    if stat.S_ISDIR(e.st.st_mode):
        tar.addfile(_info(name, tarfile.DIRTYPE, e.st))
    elif stat.S_ISLNK(e.st.st_mode):
        parent, _sep, base = e.rel.rpartition("/")
        folder = beneath.open_dir(parent, start=top)
        try:
            info = _info(name, tarfile.SYMTYPE, e.st)
            info.linkname = os.readlink(base, dir_fd=folder)
        finally:
            os.close(folder)
        tar.addfile(info)
    else:
        fd = walk.open_below(top, e.rel, reader, shown)
        with os.fdopen(fd, "rb") as fh:
            info = _info(name, tarfile.REGTYPE, os.fstat(fd))
            info.size = os.fstat(fd).st_size
            tar.addfile(info, fh)


def _info(name: str, kind: bytes, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    return info
