"""The thread that wakes the scheduler the moment a local task ends.

A launcher tells each exit of its tasks through a pipe, read here as it comes; a task
adopted after a restart (or orphaned by a launcher that died) has no launcher to tell, and
its end shows on its pidfd instead, watched here too.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable


class ExitWatcher(threading.Thread):
    """Wakes the scheduler the moment a task ends: a launcher says so through its pipe,
    and an adopted task's end shows on its pidfd."""

    def __init__(self) -> None:
        super().__init__(name="corral-exit-watcher", daemon=True)
        self.wake: Callable[[], None] = lambda: None
        self._poll = select.poll()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._poll.register(self._r, select.POLLIN)
        self._pending: list[int] = []
        #: pipes read here: fd -> what gets their lines (None once they close)
        self._readers: dict[int, Callable[[list[bytes] | None], None]] = {}
        self._unfinished: dict[int, bytes] = {}  #: a pipe's last line, while incomplete
        self._lock = threading.Lock()
        self._stopped = False
        self.supported = hasattr(os, "pidfd_open")

    def watch(self, pid: int) -> None:
        if not self.supported:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            self.wake()  # already gone: let the scheduler look now
            return
        self._add(fd)

    def read(self, fd: int, on_lines: Callable[[list[bytes] | None], None]) -> None:
        """Hand the lines that arrive on the pipe `fd` to `on_lines`, then wake the
        scheduler; None at its end (the pipe is closed here)."""
        with self._lock:
            self._readers[fd] = on_lines
        self._add(fd)

    def _add(self, fd: int) -> None:
        with self._lock:
            self._pending.append(fd)
        os.write(self._w, b"x")

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._w, b"x")

    def run(self) -> None:
        while not self._stopped:
            for fd, _ev in self._poll.poll():
                if fd == self._r:
                    self._take_pending()
                    continue
                on_lines = self._readers.get(fd)
                data = None
                if on_lines is not None:
                    with contextlib.suppress(BlockingIOError):
                        data = os.read(fd, 1 << 16)
                    if data:
                        *lines, self._unfinished[fd] = (
                            self._unfinished.get(fd, b"") + data).split(b"\n")
                        if lines:
                            on_lines(lines)
                            self.wake()
                        continue
                self._poll.unregister(fd)
                os.close(fd)
                if on_lines is not None:
                    with self._lock:
                        del self._readers[fd]
                    self._unfinished.pop(fd, None)
                    on_lines(None)
                self.wake()

    def _take_pending(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._r, 4096)
        with self._lock:
            fds, self._pending = self._pending, []
        for fd in fds:
            self._poll.register(fd, select.POLLIN)
