"""Folders a job can write, read by the server on its behalf: output folders it uploads to
object storage or registers as a model, and an earlier version's outputs it resumes from.

A folder is walked from its real path without following a link (`oskit.walk`): a link
inside is left out, as is anything but a regular file with a single name; and with a
`Reader` (the user tasks run as), what that user could not read itself. What was left out
is said (`Tree.skipped`) for the caller to tell the job's owner.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable

from corral.oskit import beneath, walk


@dataclasses.dataclass
class Tree:
    """A folder's files (relative path -> (size, mtime in ns)) and what was left out of it
    (relative path, a folder's with a "/" -> why)."""

    files: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)


def list_tree(root: str, reader: walk.Reader | None = None,
              leave: Callable[[str], bool] | None = None) -> Tree:
    """Every regular file with a single name under folder `root` (a real path, checked by
    the caller), in the order `walk` visits them; `leave`: top-level names not to list (nor
    say). FileNotFoundError when there is no such folder, beneath.Refused when it is a link
    or not the reader's to list."""
    fd = _root(root, reader, walk.LIST)
    found = Tree()
    try:
        for e in walk.walk(fd, reader, leave):
            if e.why:
                found.skipped[e.rel + "/" if e.why == walk.FOLDER_DENIED else e.rel] = e.why
            elif stat.S_ISREG(e.st.st_mode):
                found.files[e.rel] = (e.st.st_size, e.st.st_mtime_ns)
    finally:
        os.close(fd)
    return found


def _root(root: str, reader: walk.Reader | None, bits: int) -> int:
    fd = beneath.open_dir(root)
    if reader is not None and not reader.may(os.fstat(fd), bits):
        os.close(fd)
        raise walk.denied(root, "a folder")
    return fd


def open_file(root: str, rel: str, reader: walk.Reader | None = None) -> int:
    """File `rel` of folder `root` (a real path) for reading, as `list_tree` would take it,
    whatever was done to the folder since it was listed: beneath.Refused otherwise."""
    fd = _root(root, reader, walk.SEARCH)
    try:
        return walk.open_below(fd, rel, reader, root)
    finally:
        os.close(fd)


def open_single(path: str, reader: walk.Reader | None = None) -> int:
    """A file given by its own real path, opened as `open_file` opens one in a folder."""
    parent, name = os.path.split(path)
    return open_file(parent, name, reader)
