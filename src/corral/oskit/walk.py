"""A folder a job can write, walked by the server to read what is in it on the job's behalf.

The server reads such folders with its own rights (root, with `run_as`): a job's output
folders, an earlier version's outputs, its inputs, its code snapshot. A job may have put a
link in one, a hard link to a file it could not read, or a folder of root's renamed into
place, and may swap a folder for a link while it is walked. So a folder is walked from a
descriptor of its top, each folder below opened with O_NOFOLLOW (`beneath`): a link inside
is never followed, nor is a file taken that is not a regular one with a single name; and
with a `Reader` (the user tasks run as), what that user could not read itself, by the
modes of what was opened, is left out too. Each entry says why it was left out, for the
caller to take links as links or leave them out, and to tell the job's owner.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import pwd
import stat
from collections.abc import Callable, Iterator

if __package__:  # corral's module
    from corral.oskit import beneath
else:  # a plain file beside its siblings
    import beneath  # type: ignore[no-redef]

#: the bits a folder must give to be listed, to be passed through, and a file to be read
LIST, SEARCH, READ = 5, 1, 4

#: why an entry is not to be read ("" when it is)
LINK = "a link"
ODD = "not a regular file"
SECOND_NAME = "a file with a second name (a hard link)"
FILE_DENIED = "a file the job's user may not read"
FOLDER_DENIED = "a folder the job's user may not read"
#: what the job's user could not have read itself (beside what is never read: links, odd)
DENIED = (SECOND_NAME, FILE_DENIED, FOLDER_DENIED)


@dataclasses.dataclass(frozen=True)
class Reader:
    """The user tasks run as, by this machine's account of them (uid -1: unknown here):
    what the server reads on a job's behalf must be what they could read themselves."""

    uid: int
    gids: frozenset[int] = frozenset()

    @classmethod
    def of(cls, owner: tuple[int, int]) -> Reader:
        """The user with (uid, gid) `owner`, in the groups this machine gives them."""
        try:
            name = pwd.getpwuid(owner[0]).pw_name
            groups = frozenset(os.getgrouplist(name, owner[1]))
        except KeyError:
            groups = frozenset({owner[1]})
        return cls(owner[0], groups)

    def may(self, st: os.stat_result, bits: int) -> bool:
        """Whether the mode of `st` gives this user all of `bits` (4 read, 1 search)."""
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


@dataclasses.dataclass(frozen=True)
class Entry:
    """Something below a folder: its relative path, its status (of a folder as it was
    opened; of a file or link as it was listed), and why it is not to be read ("" when it
    may be: a folder walked, a regular file with a single name)."""

    rel: str
    st: os.stat_result
    why: str = ""


def walk(top: int, reader: Reader | None = None,
         leave: Callable[[str], bool] | None = None) -> Iterator[Entry]:
    """Everything below folder `top` (a descriptor), each folder before what it holds and
    the names of a folder in their order; `leave`: names in `top` not to walk (nor say).
    A folder left out (a link by now, or not the reader's to list) is not walked."""
    return _walk(top, "", reader, leave)


def _walk(fd: int, prefix: str, reader: Reader | None,
          leave: Callable[[str], bool] | None) -> Iterator[Entry]:
    with os.scandir(fd) as listed:
        names = sorted(e.name for e in listed)
    for name in names:
        if leave is not None and leave(name):
            continue
        rel = prefix + name
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:  # removed meanwhile
            continue
        if stat.S_ISDIR(st.st_mode):
            yield from _folder(fd, name, rel, st, reader)
        elif stat.S_ISREG(st.st_mode):
            yield Entry(rel, st, _why_not(st, reader))
        else:
            yield Entry(rel, st, LINK if stat.S_ISLNK(st.st_mode) else ODD)


def _folder(fd: int, name: str, rel: str, st: os.stat_result,
            reader: Reader | None) -> Iterator[Entry]:
    try:
        sub = beneath.open_dir(name, start=fd, shown=rel)
    except beneath.Refused:  # made a link since it was listed
        yield Entry(rel, st, LINK)
        return
    except FileNotFoundError:
        return
    try:
        st = os.fstat(sub)
        if reader is not None and not reader.may(st, LIST):
            yield Entry(rel, st, FOLDER_DENIED)
            return
        yield Entry(rel, st)
        yield from _walk(sub, rel + "/", reader, None)
    finally:
        os.close(sub)


def _why_not(st: os.stat_result, reader: Reader | None) -> str:
    if st.st_nlink != 1:
        return SECOND_NAME
    if reader is not None and not reader.may(st, READ):
        return FILE_DENIED
    return ""


def open_below(top: int, rel: str, reader: Reader | None = None, shown: str = "") -> int:
    """File `rel` below folder `top` (a descriptor) for reading, opened one component at a
    time without following a link, as `walk` would take it, whatever was done to the folder
    since it was walked: beneath.Refused otherwise. Errors name `shown`/`rel`."""
    names = [n for n in rel.split("/") if n]
    if not names or any(n in (".", "..") for n in names):
        raise ValueError(f"not a relative file path: {rel!r}")
    path = os.path.join(shown, rel)
    fd = os.dup(top)
    try:
        for name in names[:-1]:
            sub = beneath.open_dir(name, start=fd, shown=path)
            os.close(fd)
            fd = sub
            if reader is not None and not reader.may(os.fstat(fd), SEARCH):
                raise denied(path, "a folder")
        file = beneath.open_at(fd, names[-1], shown=path)
    finally:
        os.close(fd)
    if reader is not None and not reader.may(os.fstat(file), READ):
        os.close(file)
        raise denied(path, "a file")
    return file


def denied(path: str, what: str) -> beneath.Refused:
    """The error for `what` ("a file", "a folder") at `path` that the reader may not read."""
    return beneath.Refused(errno.EACCES, f"refused, {what} the job's user may not read", path)
