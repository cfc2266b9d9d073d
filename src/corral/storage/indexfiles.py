"""Datasets' index files: one sample a line, on local disk or in object storage.

A sample is a non-empty line (a file name, a URL, a CSV row: whatever the jobs read); in a
csv file the first non-empty line is the header and no sample. Local files are read and
appended to without following links (`oskit.beneath`); an object in an s3:// store has
no append, so appending rewrites it. What a file looked like when it was read is its
`stamp` (size and modification time, or the object's ETag): a different stamp later means
it changed and its samples are counted again.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Sequence

from corral.domain import errors
from corral.storage import objects, wholefiles

FORMATS = ("txt", "csv")


@dataclasses.dataclass(frozen=True)
class Where:
    """A dataset's index file: its URL, and the confined local path of a local one."""

    url: str
    format: str
    local: pathlib.Path | None
    stores: objects.Stores | None
    project_id: str

    def remote(self) -> objects.Location:
        if self.stores is None:
            raise errors.BadParameter(f"dataset '{self.url}': object storage is not "
                                      "available here")
        return self.stores.open(self.url, self.project_id)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    stamp: str | None  #: None: there is no file
    header: str | None  #: a csv file's first line
    samples: list[str]


def format_of(url: str, given: str | None) -> str:
    fmt = (given or ("csv" if url.lower().endswith(".csv") else "txt")).lower()
    if fmt not in FORMATS:
        raise errors.BadParameter(f"format '{given}' is not one of {', '.join(FORMATS)}")
    return fmt


def parse(data: bytes, fmt: str) -> tuple[str | None, list[str]]:
    """(header, samples) of an index file's content."""
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    if fmt == "csv":
        return (lines[0], lines[1:]) if lines else (None, [])
    return None, lines


def render(header: str | None, samples: Sequence[str]) -> bytes:
    """An index file of `samples` (after `header`, for a csv file)."""
    lines = ([header] if header is not None else []) + list(samples)
    return "".join(f"{line}\n" for line in lines).encode()


def stamp(where: Where) -> str | None:
    if where.local is not None:
        return wholefiles.stamp(where.local)
    loc = where.remote()
    loc.fs.invalidate_cache()
    try:
        info = loc.fs.info(loc.path)
    except FileNotFoundError:
        return None
    tag = info.get("ETag") or info.get("LastModified") or ""
    return f"{info.get('size') or 0}:{str(tag).strip(chr(34))}"


def read(where: Where) -> Snapshot:
    """The file's samples now (none when there is no file)."""
    if where.local is not None:
        for _ in range(3):  # appended to while read: the count would not match the stamp
            try:
                before = wholefiles.stamp(where.local)
                data = wholefiles.read(where.local)
            except FileNotFoundError:
                return Snapshot(stamp=None, header=None, samples=[])
            if wholefiles.stamp(where.local) == before:
                break
        else:
            before = None  # (counted again at the next check)
    else:
        loc = where.remote()
        before = stamp(where)
        if before is None:
            return Snapshot(stamp=None, header=None, samples=[])
        data = loc.fs.cat_file(loc.path)
    header, samples = parse(data, where.format)
    return Snapshot(stamp=before, header=header, samples=samples)


def append(where: Where, lines: Sequence[str]) -> None:
    """Add samples (lines without line breaks) at the end of the file (made if missing)."""
    if not lines:
        return
    data = "".join(f"{line}\n" for line in lines).encode()
    if where.local is not None:
        wholefiles.append(where.local, data)
        return
    loc = where.remote()
    loc.fs.invalidate_cache()
    try:
        old = loc.fs.cat_file(loc.path)
    except FileNotFoundError:
        old = b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    loc.fs.pipe_file(loc.path, old + data)
