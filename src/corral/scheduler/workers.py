"""Threads beside the scheduler's for work on files whose size has no bound: copying an
attempt's code aside, exporting logs, removing a deleted job's files.

Done on the scheduler's own thread, a `code_dir` of gigabytes would hold up every other
job meanwhile: exits unrecorded, a stop unanswered, free room left empty.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)
#: seconds a worker thread waits for more work before it ends
IDLE_S = 10.0


class Workers:
    """Daemon threads, at most `size`, that run what is handed to them in order; started
    when there is work, ended after IDLE_S without any."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, work: Callable[[], None]) -> None:
        with self._lock:
            self._queue.put(work)
            if self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._run, name=self.name, daemon=True).start()

    def drain(self, timeout: float) -> bool:
        """Wait until what was handed over so far has been done (with one thread: they are
        done in order); False if `timeout` passed first."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            try:
                work = self._queue.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:  # what is put meanwhile finds a thread (or starts one)
                    if self._queue.empty():
                        self._threads -= 1
                        return
                continue
            try:
                work()
            except Exception:  # one chore's bug must not end the thread with work queued
                log.exception("%s: a chore failed", self.name)
