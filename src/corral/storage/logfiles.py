"""A task's log read in pieces: a window of whole lines before or after an offset, a
search, and the open file for a download.

A log may be gigabytes long and still growing while it is read. Nothing here reads more
than it is asked for: a window is at most its `max_bytes`, a search scans at most
`max_scan` bytes a call, a block at a time, and says where the next call goes on. Files
are opened as `runs.open_run_file` opens them (no link followed, a regular file only).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import BinaryIO

from corral.storage import runs

#: how much a search reads at once
BLOCK = 4 * 1024 * 1024
#: a line longer than this is cut where a search shows it
LINE_SHOWN = 2000


@dataclasses.dataclass(frozen=True)
class Window:
    """Bytes `[start, end)` of a file of `size` bytes."""

    data: bytes
    start: int
    end: int
    size: int


@dataclasses.dataclass(frozen=True)
class Match:
    offset: int  #: where the line starts
    line: bytes  #: the line, without its end (cut at LINE_SHOWN bytes)


@dataclasses.dataclass(frozen=True)
class Found:
    matches: list[Match]
    next_offset: int  #: where the next call goes on (a line's start)
    size: int  #: the file's size when it was read


def open_log(path: pathlib.Path) -> BinaryIO | None:
    """The log, open for reading; None when there is none (or it is one a job planted)."""
    try:
        return runs.open_run_file(path)
    except OSError:
        return None


def before(path: pathlib.Path, end: int, max_bytes: int) -> Window:
    """At most `max_bytes` ending at `end` (the file's size at most), starting at a line's
    start: the first, partial line is left out, unless it is all the window holds (a line
    longer than the window); then the window starts on a whole character."""
    fh = open_log(path)
    if fh is None:
        return Window(b"", 0, 0, 0)
    with fh:
        size = os.fstat(fh.fileno()).st_size
        end = min(end, size)
        start = max(0, end - max_bytes)
        lead = 1 if start > 0 else 0  # the byte before the window: does a line start?
        fh.seek(start - lead)
        data = fh.read(end - start + lead)
    if lead:
        prev, data = data[:1], data[1:]
        if prev != b"\n":
            cut = data.find(b"\n") + 1
            if cut in (0, len(data)):
                cut = _char_start(data)
            data, start = data[cut:], start + cut
    return Window(data, start, start + len(data), size)


def line_start(path: pathlib.Path, at: int, max_back: int) -> int:
    """Where the line holding byte `at` starts (the line still being written, where `at`
    is the end): after the last line break before `at`, looked for at most `max_back`
    bytes back; `at` itself where there is none that close."""
    fh = open_log(path)
    if fh is None:
        return 0
    with fh:
        at = min(at, os.fstat(fh.fileno()).st_size)
        low = max(0, at - max_back)
        data = os.pread(fh.fileno(), at - low, low)
    cut = data.rfind(b"\n")
    if cut >= 0:
        return low + cut + 1
    return 0 if low == 0 else at


def after(path: pathlib.Path, start: int, max_bytes: int) -> Window:
    """At most `max_bytes` from `start`, ending after a line break unless the window holds
    none (a line longer than the window) or reaches the end of the file (a line still
    being written); then it ends on a whole character."""
    fh = open_log(path)
    if fh is None:
        return Window(b"", 0, 0, 0)
    with fh:
        return _after(fh.fileno(), start, max_bytes)


def _after(fd: int, start: int, max_bytes: int) -> Window:
    size = os.fstat(fd).st_size
    start = min(start, size)
    data = os.pread(fd, min(max_bytes, size - start), start)
    if not data.endswith(b"\n"):
        # A line break ends it, but at the end of the file (a line being written) or
        # where none is in the window; then a whole character does.
        cut = data.rfind(b"\n") + 1 if start + len(data) < size else 0
        data = data[:cut] if cut > 0 else data[:_char_end(data)]
    return Window(data, start, start + len(data), size)


class OpenLog:
    """A log held open while it is followed: a look at its end is one `fstat`, a read one
    `pread`, and its path is walked (checked for planted links) once, when it is opened.
    A log's bytes never move once written (executors/local/logcap.py; Ray's are appended
    to), so what was read stays true for as long as it is open."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._fh: BinaryIO | None = None

    def size(self) -> int:
        """How long it is; 0 while there is none (it is opened once it exists)."""
        if self._fh is None:
            try:
                os.lstat(self.path)  # one call while a job waits, not a walk of the path
            except OSError:
                return 0
            self._fh = open_log(self.path)
            if self._fh is None:
                return 0
        return os.fstat(self._fh.fileno()).st_size

    def after(self, start: int, max_bytes: int) -> Window:
        """`after` on the open log (an empty window while there is none)."""
        if self._fh is None and not self.size():
            return Window(b"", 0, 0, 0)
        assert self._fh is not None
        return _after(self._fh.fileno(), start, max_bytes)

    def move_to(self, path: pathlib.Path) -> None:
        """Follow `path` from now on (the log of another attempt), when it is another."""
        if path != self.path:
            self.close()
            self.path = path

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def search(path: pathlib.Path, needle: bytes, *, start: int, max_scan: int, limit: int,
           ignore_case: bool = False) -> Found:
    """The lines from `start` on that hold `needle`, at most `limit` of them, reading at most
    about `max_scan` bytes; `next_offset` is where a further call goes on."""
    fh = open_log(path)
    if fh is None or not needle:
        return Found([], 0, 0)
    if ignore_case:
        needle = needle.lower()
    matches: list[Match] = []
    with fh:
        size = os.fstat(fh.fileno()).st_size
        pos = min(start, size)
        fh.seek(pos)
        carry = b""
        scanned = 0
        while pos + len(carry) < size and scanned < max_scan and len(matches) < limit:
            block = carry + fh.read(min(BLOCK, size - pos - len(carry)))
            scanned += len(block) - len(carry)
            at_end = pos + len(block) >= size
            # Whole lines only; the rest is read again with the next block (or, a line
            # longer than a block, cut there).
            cut = len(block) if at_end else block.rfind(b"\n") + 1 or len(block)
            lines, carry = block[:cut], block[cut:]
            pos = _scan(lines, pos, needle, ignore_case, matches, limit)
            if len(matches) >= limit:
                break
    return Found(matches, pos, size)


def _scan(lines: bytes, base: int, needle: bytes, ignore_case: bool,
          matches: list[Match], limit: int) -> int:
    """Add the lines of `lines` (which starts at offset `base`) that hold `needle`; the
    offset after the last line looked at."""
    hay = lines.lower() if ignore_case else lines
    i = hay.find(needle)
    while i >= 0:
        line_start = lines.rfind(b"\n", 0, i) + 1
        line_end = lines.find(b"\n", i)
        line_end = len(lines) if line_end < 0 else line_end
        matches.append(Match(base + line_start, lines[line_start:line_end][:LINE_SHOWN]))
        if len(matches) >= limit:
            return base + min(len(lines), line_end + 1)
        i = hay.find(needle, line_end + 1)
    return base + len(lines)


def _char_start(data: bytes) -> int:
    """How many bytes to skip so as not to start inside a UTF-8 character."""
    i = 0
    while i < min(4, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


def _char_end(data: bytes) -> int:
    """Where to end so as not to end inside a UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0x80 == 0:
            return len(data)
        if b & 0xC0 == 0xC0:
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)
