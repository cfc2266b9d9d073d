"""The thread that runs the job kinds' controllers.

Each controller's `reconcile` is a level-triggered pass over its live objects: it reads
them and their jobs and applies guarded transitions, so running it too often is harmless
and a pass missed (the server stopped) is made up by the next. The thread runs every
controller when woken (a job changed, a user acted on an object) and at least every
`interval` seconds, which is what time-based triggers rely on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import sqlalchemy as sa

from corral.scheduler import leadership
from corral.store import db, kind_repo

log = logging.getLogger(__name__)
#: the most of an error's text an object's event repeats
ERROR_TEXT = 500


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
    except (leadership.LostLease, sa.exc.OperationalError):
        raise
    except Exception as exc:
        log.exception("%s %s: its pass failed", kind, object_id)
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:ERROR_TEXT]
        try:
            with store.begin() as conn:
                kind_repo.add_event_unless_last(
                    conn, kind, object_id, now, level="Error",
                    message=f"The controller's pass failed ({text}); it is tried again at "
                            "every pass (the server log has the details)")
        except Exception:
            log.exception("%s %s: its failure could not be recorded", kind, object_id)
        return False


class Loop:
    def __init__(self, controllers: Sequence[Controller], *, interval: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.controllers = list(controllers)
        self.interval = interval
        self.clock = clock
        self._wake = threading.Event()

    def wake(self) -> None:
        """A pass soon (from any thread)."""
        self._wake.set()

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
        while not stop.is_set():
            if not more:
                self._wake.wait(self.interval)
            self._wake.clear()
            if stop.is_set():
                return
            try:
                more = self.tick()
            except leadership.LostLease as exc:
                log.warning("the job kinds' controllers stop: %s", exc)
                return
