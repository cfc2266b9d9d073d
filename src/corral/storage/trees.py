"""Folders a job can write, read by the server on its behalf: output folders it uploads to
object storage or registers as a model, and an earlier version's outputs it resumes from.

The server reads them with its own rights (root, with `run_as`), and a job may have put a
link in one, a hard link to a file it could not read, or a folder of root's renamed into
place. So a folder is listed and its files opened one component at a time from its real
path (see `oskit.beneath`): a link inside is never followed but left out, as is anything but a
regular file with a single name; and with a `Reader` (the user tasks run as), what that
user could not read itself, by the modes of what was opened, is left out too. What was
left out is said (`Tree.skipped`) for the caller to tell the job's owner.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import pwd
import stat
from collections.abc import Callable

from corral.oskit import beneath

#: the bits a folder must give to be listed, to be passed through, and a file to be read
LIST, SEARCH, READ = 5, 1, 4


@dataclasses.dataclass(frozen=True)
class Reader:
    """The user tasks run as, by this machine's account of them: what the server reads on
    a job's behalf must be what they could read themselves."""

    uid: int
    gids: frozenset[int]

    @classmethod
    def of(cls, owner: tuple[int, int]) -> Reader:
        try:
            name = pwd.getpwuid(owner[0]).pw_name
            groups = frozenset(os.getgrouplist(name, owner[1]))
        except KeyError:
            groups = frozenset({owner[1]})
        return cls(owner[0], groups)

    def may(self, st: os.stat_result, bits: int) -> bool:
        """Whether the mode of `st` gives this user all of `bits`."""
        if st.st_uid == self.uid:
            return st.st_mode >> 6 & bits == bits
        if st.st_gid in self.gids:
            return st.st_mode >> 3 & bits == bits
        return st.st_mode & bits == bits


@dataclasses.dataclass
class Tree:
    """A folder's files (relative path -> (size, mtime in ns)) and what was left out of it
    (relative path -> why)."""

    files: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)


def list_tree(root: str, reader: Reader | None = None,
              leave: Callable[[str], bool] | None = None) -> Tree:
    """Every regular file with a single name under folder `root` (a real path, checked by
    the caller), in the order of their relative paths; `leave`: top-level names not to
    list (nor say). FileNotFoundError when there is no such folder, beneath.Refused when
    it is a link or not the reader's to list."""
    fd = _root(root, reader, LIST)
    found = Tree()
    try:
        _list(fd, "", reader, found, leave)
    finally:
        os.close(fd)
    return found


def _root(root: str, reader: Reader | None, bits: int) -> int:
    fd = beneath.open_dir(root)
    if reader is not None and not reader.may(os.fstat(fd), bits):
        os.close(fd)
        raise _denied(root, "a folder")
    return fd


def _list(fd: int, prefix: str, reader: Reader | None, found: Tree,
          leave: Callable[[str], bool] | None) -> None:
    with os.scandir(fd) as entries:
        listed = sorted((e.name, e) for e in entries)
    for name, entry in listed:
        if leave is not None and not prefix and leave(name):
            continue
        rel = prefix + name
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed meanwhile
            continue
        if stat.S_ISDIR(st.st_mode):
            _folder(fd, name, rel, reader, found)
        elif stat.S_ISREG(st.st_mode) and _readable(st, reader, rel, found):
            found.files[rel] = (st.st_size, st.st_mtime_ns)
        elif not stat.S_ISREG(st.st_mode):
            found.skipped[rel] = "a link" if stat.S_ISLNK(st.st_mode) else \
                "not a regular file"


def _folder(fd: int, name: str, rel: str, reader: Reader | None, found: Tree) -> None:
    try:
        sub = beneath.open_dir(name, start=fd, shown=rel)
    except beneath.Refused:  # made a link since it was listed
        found.skipped[rel] = "a link"
        return
    except FileNotFoundError:
        return
    try:
        if reader is not None and not reader.may(os.fstat(sub), LIST):
            found.skipped[rel + "/"] = "a folder the job's user may not read"
            return
        _list(sub, rel + "/", reader, found, None)
    finally:
        os.close(sub)


def _readable(st: os.stat_result, reader: Reader | None, rel: str, found: Tree) -> bool:
    if st.st_nlink != 1:
        found.skipped[rel] = "a file with a second name (a hard link)"
        return False
    if reader is not None and not reader.may(st, READ):
        found.skipped[rel] = "a file the job's user may not read"
        return False
    return True


def open_file(root: str, rel: str, reader: Reader | None = None) -> int:
    """File `rel` of folder `root` (a real path) for reading, as `list_tree` would take it,
    whatever was done to the folder since it was listed: beneath.Refused otherwise."""
    names = [n for n in rel.split("/") if n]
    if not names or any(n in (".", "..") for n in names):
        raise ValueError(f"not a relative file path: {rel!r}")
    fd = _root(root, reader, SEARCH)
    try:
        for name in names[:-1]:
            sub = beneath.open_dir(name, start=fd, shown=f"{root}/{rel}")
            os.close(fd)
            fd = sub
            if reader is not None and not reader.may(os.fstat(fd), SEARCH):
                raise _denied(f"{root}/{rel}", "a folder")
        file = beneath.open_at(fd, names[-1], shown=f"{root}/{rel}")
    finally:
        os.close(fd)
    if reader is not None and not reader.may(os.fstat(file), READ):
        os.close(file)
        raise _denied(f"{root}/{rel}", "a file")
    return file


def open_single(path: str, reader: Reader | None = None) -> int:
    """A file given by its own real path, opened as `open_file` opens one in a folder."""
    parent, name = os.path.split(path)
    return open_file(parent, name, reader)


def _denied(path: str, what: str) -> beneath.Refused:
    return beneath.Refused(errno.EACCES, f"refused, {what} the job's user may not read", path)
