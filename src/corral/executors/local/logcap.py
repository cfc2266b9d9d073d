"""A task's log, capped: its head and its tail are kept, the middle is dropped and said so.

A task writes its output into a pipe; its keeper moves it into the log (`Sink.pump`, by
splice: the bytes never pass through Python). The first half of the cap is written as it
comes, so that `corral logs -f` follows it; once that is full, a line says so, and what
follows goes to a ring the size of the other half (an unnamed file in the claim's folder). When
the task ends, a line saying how much was dropped, then the ring's content, oldest first,
are appended (`Sink.finish`). So a log never grows beyond its cap (plus those two lines),
its bytes never move (readers keep their offsets), and a task cannot make it grow by
writing to it: it never has the file.

Standard library only: the launcher, which cannot import corral's package, imports it too.
"""

from __future__ import annotations

import contextlib
import errno
import os

#: the most moved at once: the size the keeper asks for its tasks' pipes, too
CHUNK = 1 << 20
#: how far into the kept tail a line's end is looked for, so the tail starts on a line
LINE_SEARCH = 64 << 10


class Sink:
    """Where one task's output goes: its log file, and its ring once the head is full."""

    def __init__(self, log_fd: int, *, cap: int, task: str, ring_dir: int) -> None:
        self.fd = log_fd
        self.at = os.fstat(log_fd).st_size  #: where the next byte of the log goes
        self.cap, self.task, self.ring_dir = cap, task, ring_dir
        self.tail = cap // 2
        self.head_left = cap - self.tail if cap else -1  #: -1: no cap
        self.ring_fd = -1
        self.ring_at = 0
        self.held = 0  #: bytes that went to the ring, all told
        self.lost = 0  #: bytes read but never written, the log's disk having failed
        self.error = ""  #: why
        self._splice = True

    def pump(self, src: int) -> bool:
        """Move what the pipe `src` holds (it does not block); False at its end."""
        if self.error:  # the task must not block on a full pipe: what it writes is lost
            try:
                lost = len(os.read(src, CHUNK))
            except BlockingIOError:
                return True
            self.lost += lost
            return lost > 0
        try:
            if self.head_left != 0:
                n = CHUNK if self.head_left < 0 else min(CHUNK, self.head_left)
                moved = self._move(src, self.fd, n, self.at)
                self.at += moved
                if self.head_left > 0:
                    self.head_left -= moved
                    if self.head_left == 0:
                        self._say(f"{self.task}'s log reached half of its {_mb(self.cap)} "
                                  f"cap: what follows is held back, and its last "
                                  f"{_mb(self.tail)} is added here when the task ends")
            else:
                if self.ring_fd < 0:
                    self.ring_fd = _unnamed(self.ring_dir)
                n = min(CHUNK, self.tail - self.ring_at)
                moved = self._move(src, self.ring_fd, n, self.ring_at)
                self.ring_at = (self.ring_at + moved) % self.tail
                self.held += moved
        except BlockingIOError:
            return True
        except OSError as exc:  # the disk is full, say: the log stops, the task goes on
            self.error = exc.strerror or str(exc)
            return True
        return moved > 0

    def finish(self) -> int:
        """Append the held-back tail, after a line saying what was dropped; the number of
        bytes dropped."""
        if self.error:
            with contextlib.suppress(OSError):
                self._say(f"{_mb(self.lost)} of {self.task}'s output could not be written "
                          f"to its log: {self.error}")
            return self.lost + self.held
        if self.held == 0:
            return 0
        dropped = max(0, self.held - self.tail)
        # oldest first: the ring's older part starts where the next byte would have gone
        parts = [(self.ring_at, self.tail - self.ring_at), (0, self.ring_at)] if dropped \
            else [(0, self.held)]
        if dropped:
            skip = self._to_line_end(*parts[0], *parts[1])
            dropped += skip
            parts = _skip(parts, skip)
            self._say(f"{_mb(dropped)} of {self.task}'s log dropped here (its cap is "
                      f"{_mb(self.cap)}); its last {_mb(self.held - dropped)} follow")
        else:
            self._say(f"the output held back follows; nothing of {self.task}'s log was "
                      "dropped")
        for start, length in parts:
            self._copy(start, length)
        os.close(self.ring_fd)
        self.ring_fd = -1
        return dropped

    def close(self) -> None:
        if self.ring_fd >= 0:
            os.close(self.ring_fd)
            self.ring_fd = -1

    def _move(self, src: int, dst: int, n: int, at: int) -> int:
        if self._splice:
            try:
                return os.splice(src, dst, n, offset_dst=at)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                self._splice = False  # a file system splice cannot write to
        data = os.read(src, n)
        os.pwrite(dst, data, at)
        return len(data)

    def _say(self, words: str) -> None:
        line = f"\n[corral] {words}\n".encode()
        os.pwrite(self.fd, line, self.at)
        self.at += len(line)

    def _copy(self, start: int, length: int) -> None:
        while length > 0:
            try:
                n = os.copy_file_range(self.ring_fd, self.fd, length, start, self.at)
            except OSError:
                n = os.pwrite(self.fd, os.pread(self.ring_fd, min(length, CHUNK), start),
                              self.at)
            if n <= 0:
                return
            start, length, self.at = start + n, length - n, self.at + n

    def _to_line_end(self, start: int, length: int, start2: int, length2: int) -> int:
        """How many bytes of the kept tail come before its first whole line."""
        seen = os.pread(self.ring_fd, min(length, LINE_SEARCH), start)
        if len(seen) < LINE_SEARCH:
            seen += os.pread(self.ring_fd, min(length2, LINE_SEARCH - len(seen)), start2)
        end = seen.find(b"\n")
        return end + 1 if end >= 0 else 0


def _skip(parts: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    out = []
    for start, length in parts:
        cut = min(n, length)
        n -= cut
        if length - cut:
            out.append((start + cut, length - cut))
    return out


def _unnamed(folder: int) -> int:
    """A file no one else can open, in folder `folder` (a descriptor: the path to it may
    be a task's to change): unnamed where the file system allows it, else named for an
    instant and unlinked."""
    with contextlib.suppress(OSError):
        return os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=folder)
    name = f".ring-{os.getpid()}"
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=folder)
    os.unlink(name, dir_fd=folder)
    return fd


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"
