"""Waiting on a job without polling: `GET /training-jobs/{id}?watch=<phase>`.

Whoever changes a job's phase (the scheduler's passes, the API's terminate and delete, the
storage thread) says so once its transaction has committed, through `JobChanges.changed`;
a request watching that job reads it again then, and answers once its phase differs from
the one the client last saw. The scheduler also says which phase each job moved to (and
which of the jobs it names kept theirs): a change that leaves the job in a phase a watch
waits through does not wake that watch, so it does not read the job while the scheduler
starts it (a stream of the job's changes, which waits through no phase, is woken by every
change). The job is also read again every RECHECK_S, so that a change nobody announced is
still answered, late.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping

#: the longest a watching request waits (the client asks again)
MAX_TIMEOUT_S = 60.0
DEFAULT_TIMEOUT_S = 30.0
#: how often a watched job is read again anyway
RECHECK_S = 1.0
#: what `Watcher.poke` is told of a change that kept the job's phase
KEPT = ""


class Watcher:
    """One request's wait for one job (see `JobChanges.watching`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 waits_through: Collection[str] = ()) -> None:
        self._loop = loop
        #: the phases the watch waits through: a move to one of them is not its answer
        self._through = frozenset(waits_through)
        self._changed = False
        #: what `wait` awaits, while it does
        self._waiter: asyncio.Future[None] | None = None

    def poke(self, moved_to: str | None = None) -> None:
        """(any thread) The job changed: moved to phase `moved_to`, or kept its phase
        (KEPT), when the changer says. Neither wakes a watch that waits through that
        phase."""
        if self._through and (moved_to == KEPT or moved_to in self._through):
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            self._loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        self._changed = True
        _release(self._waiter)

    def arm(self) -> None:
        """Forget earlier changes: call before reading the job, so that a change made
        after the read ends the next `wait` at once."""
        self._changed = False

    async def wait(self, timeout: float) -> bool:
        """Until the job changed (True), or `timeout` seconds (RECHECK_S at most) have
        passed. One future and one timer, woken straight from the poke: an Event under
        `asyncio.wait_for` took a task and two more turns of the loop."""
        if self._changed:
            return True
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(min(timeout, RECHECK_S), _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        return self._changed


def _release(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class JobChanges:
    """Who watches which job; told of changes by any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: dict[str, set[Watcher]] = {}

    def changed(self, job_ids: Iterable[str], moved: Mapping[str, str] | None = None) -> None:
        """Jobs changed (their transactions have committed). `moved`, from a changer that
        knows: the phase each job it names moved to; a job of `job_ids` it does not name
        kept its phase (which wakes no watch waiting through phases)."""
        if not self._watchers:  # the usual case: nobody watches
            return
        with self._lock:
            poked = [(w, job_id) for job_id in job_ids
                     for w in self._watchers.get(job_id, ())]
        for w, job_id in poked:
            w.poke(None if moved is None else moved.get(job_id, KEPT))

    @contextlib.contextmanager
    def watching(self, job_id: str, waits_through: Collection[str] = ()) -> Iterator[Watcher]:
        """Watch a job for the length of the block (in the event loop's thread), until its
        phase is none of `waits_through`."""
        w = Watcher(asyncio.get_running_loop(), waits_through)
        with self._lock:
            self._watchers.setdefault(job_id, set()).add(w)
        try:
            yield w
        finally:
            with self._lock:
                left = self._watchers.get(job_id)
                if left is not None:
                    left.discard(w)
                    if not left:
                        del self._watchers[job_id]

    def watched(self) -> int:
        """How many watches are open (for tests and diagnostics)."""
        with self._lock:
            return sum(len(ws) for ws in self._watchers.values())
