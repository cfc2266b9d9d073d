"""Whole files corral writes and reads for jobs, in folders those jobs can write too.

An incremental-learning loop writes its rounds' sample lists and its service's models and
model_config.json, appends to datasets, and reads what its service writes (an
acknowledgement, hard examples), all in folders its jobs may change. These are built on
`oskit.beneath`: every path is opened one component at a time without following a link,
and only a regular file with a single name is read or appended to. A file is written beside
its name and renamed into it, and a folder filled beside its place and renamed into it, so
that a reader sees the old one or the new one, never half of one.

The paths must be real ones, already checked against the project's storage roots.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import secrets
from collections.abc import Callable, Iterable
from typing import IO

from corral.oskit import beneath

_APPEND = os.O_RDWR | os.O_APPEND | os.O_CREAT


def _split(path: str | os.PathLike[str]) -> tuple[str, str]:
    parent, name = os.path.split(os.fspath(path))
    if not name or name in (".", ".."):
        raise ValueError(f"not a file's path: {os.fspath(path)!r}")
    return parent or "/", name


def write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at `path` with `data` in one step (its folders made as needed)."""
    parent, name = _split(path)
    fd = beneath.open_dir(parent, make=True)
    try:
        beneath.replace(fd, name, lambda out: beneath.write_all(out, data))
    finally:
        os.close(fd)


def read(path: str | os.PathLike[str], offset: int = 0, limit: int | None = None) -> bytes:
    """The file's bytes from `offset` (at most `limit` of them)."""
    fd = beneath.open_file(path)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        left = limit
        while left is None or left > 0:
            chunk = os.read(fd, beneath.CHUNK if left is None else min(left, beneath.CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left = None if left is None else left - len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def stamp(path: str | os.PathLike[str]) -> str | None:
    """The file's size and modification time, or None when there is no file."""
    try:
        fd = beneath.open_file(path)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return f"{st.st_size}:{st.st_mtime_ns}"


def size_of(found: str | None) -> int:
    """The size a `stamp` gives (0 for no file)."""
    return int(found.split(":", 1)[0]) if found else 0


def append(path: str | os.PathLike[str], data: bytes) -> None:
    """Append `data` to the file (made when missing), starting on a line of its own."""
    parent, name = _split(path)
    dir_fd = beneath.open_dir(parent)
    try:
        fd = beneath.open_at(dir_fd, name, _APPEND, shown=os.fspath(path))
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            data = b"\n" + data
        beneath.write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def is_dir(path: str | os.PathLike[str]) -> bool:
    try:
        os.close(beneath.open_dir(path))
    except FileNotFoundError:
        return False
    return True


def make_dir(path: str | os.PathLike[str]) -> None:
    beneath.make_dirs(path)


def write_tree(dest: str | os.PathLike[str], files: Iterable[str],
               source: Callable[[str], contextlib.AbstractContextManager[IO[bytes]]]) -> None:
    """Make the folder `dest` holding `files` (relative paths; `source(rel)` opens each),
    whole or not at all: it is filled beside its place and renamed into it. An existing
    `dest` is left as it is (a model's files never change)."""
    parent, name = _split(dest)
    dir_fd = beneath.open_dir(parent, make=True)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        os.mkdir(tmp, 0o755, dir_fd=dir_fd)
        for rel in files:
            *dirs, leaf = beneath.components("/" + rel)
            fd = beneath.open_dir(pathlib.PurePosixPath(parent, tmp, *dirs), make=True)
            try:
                with source(rel) as src:
                    beneath.replace(fd, leaf, functools.partial(_pump, src))
            finally:
                os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _pump(src: IO[bytes], out: int) -> None:  # (src, then beneath.replace's descriptor)
    while chunk := src.read(beneath.CHUNK):
        beneath.write_all(out, chunk)
