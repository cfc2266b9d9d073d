"""The thread that runs the job kinds' controllers.

Each controller's `reconcile` is a level-triggered pass over its live objects: it reads
them and their jobs and applies guarded transitions, so running it too often is harmless
and a pass missed (the server stopped) is made up by the next. The thread runs every
controller when woken (a user acted on an object, or a job that an object owns changed)
and at least every `interval` seconds, which is what time-based triggers rely on.

Most jobs belong to no object: their changes (several for each job) cost one look at
who owns them, not a pass that reads every kind's live objects; and since a job's owner is
set when the job is made and never changes, a job once seen to have none is not looked
up again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

import sqlalchemy as sa

from corral.domain import leadership
from corral.store import db, job_repo, kind_repo

log = logging.getLogger(__name__)
#: the most of an error's text an object's event repeats
ERROR_TEXT = 500
#: job ids remembered as owned by no object, at most (then forgotten, and looked up again)
UNOWNED_KEPT = 100_000


class Controller(Protocol):
    #: the job kind it runs (the `owner_kind` of its jobs)
    kind: str

    def reconcile(self, now: int) -> bool:
        """One pass over the kind's live objects; True when there is more to do at once."""
        ...


def isolated(store: db.Store, kind: str, object_id: str, now: int,
             work: Callable[[], bool]) -> bool:
    """One object's part of a controller's pass (`work`, True when it has more to do).

    An error of its own keeps no other object from its pass: it is logged, and said on
    the object, as an event its users see (once while it repeats), since the object
    cannot move on until it is fixed. The database away or this server's lease lost stop
    the whole pass instead: no other object could do better."""
    try:
        return work()
    except (leadership.LostLease, sa.exc.OperationalError, sa.exc.InterfaceError):
        raise
    except sa.exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise
        return _failed(store, kind, object_id, now, exc)
    except Exception as exc:
        return _failed(store, kind, object_id, now, exc)


def _failed(store: db.Store, kind: str, object_id: str, now: int, exc: Exception) -> bool:
    log.exception("%s %s: its pass failed", kind, object_id)
    text = _said(exc)
    try:
        with store.begin() as conn:
            kind_repo.add_event_unless_last(
                conn, kind, object_id, now, level="Error",
                message=f"The controller's pass failed ({text}); it is tried again at "
                        "every pass (the server log has the details)")
    except Exception:
        log.exception("%s %s: its failure could not be recorded", kind, object_id)
    return False


def _said(exc: Exception) -> str:
    """What an object's users are told of an error: its kind and its first line. A
    database error's own text holds its statement and parameters (ids, times), which
    differ from pass to pass (so the event would repeat) and are not the users' to see."""
    cause = exc.orig if isinstance(exc, sa.exc.StatementError) and exc.orig else exc
    first = (str(cause).strip().splitlines() or [""])[0]
    return " ".join(f"{type(cause).__name__}: {first}".split())[:ERROR_TEXT]


class Loop:
    def __init__(self, controllers: Sequence[Controller], *, interval: float = 1.0,
                 clock: Callable[[], float] = time.time, store: db.Store | None = None) -> None:
        """`store`: where the owners of jobs that changed are looked up (without one,
        every change calls for a pass)."""
        self.controllers = list(controllers)
        self.interval = interval
        self.clock = clock
        self.store = store
        self._wake = threading.Event()
        self._lock = threading.Lock()  #: over what woke the loop, set from any thread
        self._asked = False
        self._changed: set[str] = set()
        #: jobs seen to belong to no object: their changes never call for a pass
        self._unowned: set[str] = set()

    def wake(self) -> None:
        """A pass soon (from any thread)."""
        with self._lock:
            self._asked = True
        self._wake.set()

    def jobs_changed(self, job_ids: Iterable[str]) -> None:
        """These jobs changed (from any thread): a pass soon if an object owns one."""
        with self._lock:
            new = [j for j in job_ids if j not in self._unowned]
            if not new:
                return
            self._changed.update(new)
        self._wake.set()

    def _due(self, more: bool, at: float) -> bool:
        """Whether a pass is due: more to do at once, its time `at` come, a pass asked
        for, or a job that an object owns changed (since the last look)."""
        with self._lock:
            asked, changed = self._asked, self._changed
            self._asked, self._changed = False, set()
        return (more or asked or time.monotonic() >= at
                or (bool(changed) and self._owned(changed)))

    def _owned(self, job_ids: Collection[str]) -> bool:
        if self.store is None:
            return True
        with self.store.read() as conn:
            owned, unowned = job_repo.owners(conn, job_ids)
        with self._lock:
            if len(self._unowned) + len(unowned) > UNOWNED_KEPT:
                self._unowned.clear()
            self._unowned |= unowned
        return bool(owned)

    def tick(self) -> bool:
        """One pass of every controller; True when one has more to do at once. A
        controller that fails is logged and does not keep the others from their pass."""
        more = False
        for c in self.controllers:
            try:
                more = c.reconcile(round(self.clock() * 1000)) or more
            except leadership.LostLease:
                raise
            except sa.exc.OperationalError as exc:  # the database briefly away: next pass
                log.warning("%s controller pass skipped: %s", c.kind, exc)
            except Exception:
                log.exception("%s controller pass failed", c.kind)
        return more

    def run_forever(self, stop: threading.Event) -> None:
        """Passes until `stop`, or until this server no longer leads."""
        more = False
        due = time.monotonic() + self.interval  #: the next timed pass
        while not stop.is_set():
            if not more:
                self._wake.wait(max(0.0, due - time.monotonic()))
            self._wake.clear()
            if stop.is_set():
                return
            try:
                if not self._due(more, due):
                    continue  # only jobs that no object owns changed
                due = time.monotonic() + self.interval
                more = self.tick()
            except leadership.LostLease as exc:
                log.warning("the job kinds' controllers stop: %s", exc)
                return
            except sa.exc.OperationalError as exc:  # looking at the jobs' owners
                log.warning("the job kinds' pass skipped: %s", exc)
