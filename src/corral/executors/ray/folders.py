"""Folders on the server that a job can write, read to ship them to the Ray nodes.

The server reads them with its own rights (root, with `run_as`): the attempt's code
snapshot (its user's), its inputs, the output channels a task starts from. A task, or
another of the same user, may have put links in them, or swap a folder for a link while
they are read. So they are walked from a descriptor of their top, each component opened
with O_NOFOLLOW (`beneath`): a link inside is never followed (a snapshot keeps it as a
link, inputs leave it out), nor is a file taken that has a second name; and when tasks run
as another user, only what that user could read here is taken, by the modes of what was
opened (`Reader`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import pwd
import stat
import tarfile

from corral.oskit import beneath

#: the bits a folder must give to be listed, to be passed through, and a file to be read
LIST, SEARCH, READ = 5, 1, 4


@dataclasses.dataclass(frozen=True)
class Reader:
    """The user tasks run as, by this machine's account of them (uid -1: unknown here)."""

    uid: int
    gids: frozenset[int] = frozenset()

    def may(self, st: os.stat_result, bits: int) -> bool:
        """Whether the file's mode gives the user all of `bits` (4 read, 1 search)."""
        if st.st_uid == self.uid:
            return st.st_mode >> 6 & bits == bits
        if st.st_gid in self.gids:
            return st.st_mode >> 3 & bits == bits
        return st.st_mode & bits == bits

    def reaches(self, path: str) -> bool:
        """Whether the user may search every folder on the way to `path`."""
        parent = os.path.dirname(os.path.realpath(path))
        while True:
            if not self.may(os.stat(parent), SEARCH):
                return False
            if parent == os.path.dirname(parent):
                return True
            parent = os.path.dirname(parent)


def reader_of(run_as: str | None) -> Reader | None:
    """Whose rights bound what is shipped: None when tasks run as the server's user."""
    if run_as is None:
        return None
    try:
        pw = pwd.getpwnam(run_as)
    except KeyError:
        return Reader(-1)
    if pw.pw_uid in (0, os.geteuid()):
        return None
    return Reader(pw.pw_uid, frozenset(os.getgrouplist(run_as, pw.pw_gid)))


@dataclasses.dataclass(frozen=True)
class Entry:
    """A folder, regular file or link below a folder: its relative path and status (of
    the folder as it was opened; of the file or link as it was listed)."""

    rel: str
    st: os.stat_result


def entries(top: int, reader: Reader | None, denied: list[str], shown: str) -> list[Entry]:
    """Every folder, regular file with a single name and link below folder `top` (a
    descriptor), each folder before what it holds; what `reader` may not read is left out
    and named in `denied` (as `shown`/its relative path)."""
    found: list[Entry] = []
    _walk(top, "", reader, denied, found, shown)
    return found


def _walk(fd: int, prefix: str, reader: Reader | None, denied: list[str], found: list[Entry],
          shown: str) -> None:
    with os.scandir(fd) as listed:
        names = sorted(e.name for e in listed)
    for name in names:
        rel = prefix + name
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:  # removed meanwhile
            continue
        if stat.S_ISLNK(st.st_mode):
            found.append(Entry(rel, st))
        elif stat.S_ISDIR(st.st_mode):
            try:
                sub = beneath.open_dir(name, start=fd)
            except (beneath.Refused, FileNotFoundError):  # made a link, or removed
                continue
            try:
                st = os.fstat(sub)
                if reader is not None and not reader.may(st, LIST):
                    denied.append(os.path.join(shown, rel))
                    continue
                found.append(Entry(rel, st))
                _walk(sub, rel + "/", reader, denied, found, shown)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            if st.st_nlink != 1 or (reader is not None and not reader.may(st, READ)):
                denied.append(os.path.join(shown, rel))
            else:
                found.append(Entry(rel, st))


def open_file(top: int, rel: str, reader: Reader | None, shown: str) -> int:
    """File `rel` below folder `top` (a descriptor) for reading, opened one component at a
    time without following a link, as `entries` would take it (beneath.Refused when it
    would not, whatever was done to the folder since it was listed)."""
    *folders, name = rel.split("/")
    fd = os.dup(top)
    try:
        for part in folders:
            sub = beneath.open_dir(part, start=fd)
            os.close(fd)
            fd = sub
            if reader is not None and not reader.may(os.fstat(fd), SEARCH):
                raise beneath.refused(os.path.join(shown, rel), "not the task's user's to read")
        file = beneath.open_at(fd, name, shown=os.path.join(shown, rel))
    finally:
        os.close(fd)
    if reader is not None and not reader.may(os.fstat(file), READ):
        os.close(file)
        raise beneath.refused(os.path.join(shown, rel), "not the task's user's to read")
    return file


def open_named(path: str, rel: str, reader: Reader | None) -> int:
    """File `rel` (as `open_file` opens it) of the folder a job named by `path`, or with
    `rel` "" the file `path` itself. The path's own links are followed (it was checked
    against the job's storage roots when its attempt was prepared), and what it leads to
    must be the reader's to read too."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
                 | (os.O_DIRECTORY if rel else 0))
    try:
        st = os.fstat(fd)
        if reader is not None and not reader.may(st, SEARCH if rel else READ):
            raise beneath.refused(path, "not the task's user's to read")
        if rel:
            return open_file(fd, rel, reader, path)
        if not stat.S_ISREG(st.st_mode):
            raise beneath.refused(path, "not a regular file")
        os.set_blocking(fd, True)
        return os.dup(fd)
    finally:
        os.close(fd)


def tar_of(code_dir: str, reader: Reader | None) -> bytes:
    """The code snapshot `code_dir` (a real path of the run directory: no link on it) as
    a tar: links as links, and nothing its task's user may not read."""
    top = beneath.open_dir(code_dir)
    buf = io.BytesIO()
    try:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.addfile(_info(".", tarfile.DIRTYPE, os.fstat(top)))
            for e in entries(top, reader, [], code_dir):
                _add(tar, top, e, reader, code_dir)
    finally:
        os.close(top)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, top: int, e: Entry, reader: Reader | None, shown: str) -> None:
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
        fd = open_file(top, e.rel, reader, shown)
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
