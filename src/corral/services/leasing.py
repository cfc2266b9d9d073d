"""This server's part in who schedules: renewing or taking the lease, and the fencing
guard its scheduler's writes run first.

The rules are domain/leadership.py's and the SQL store/lease_repo.py's. `Leader.step` is
one renewal (or takeover attempt), made every `leader_renew` seconds by the server's
leadership thread; `Leader.guard(epoch)` is what a term's store runs at the start of each
write transaction (see db.Store.fenced): it refuses, by raising `leadership.LostLease`,
once this server's own clock says the lease may have run out or the row names another
epoch.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa

from corral.domain import leadership
from corral.oskit import procs
from corral.store import db, lease_repo

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Times:
    """A lease's times, in milliseconds (settings `leader_lease`, `leader_renew`)."""

    lease_ms: int = leadership.LEASE_MS
    renew_ms: int = leadership.RENEW_MS

    @property
    def margin_ms(self) -> int:
        return leadership.margin_for(self.lease_ms)

    @property
    def hold_ms(self) -> int:
        return leadership.hold_for(self.lease_ms)


def identity(name: str) -> str:
    """This process as a lease holder: "name:pid:start" (its start time tells it from a
    later process given the same pid)."""
    return f"{name}:{os.getpid()}:{procs.start_ticks(os.getpid()) or 0:.0f}"


def default_name() -> str:
    return socket.gethostname()


class Leader:
    def __init__(self, store: db.Store, name: str, url: str | None, times: Times, *,
                 exclusive: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`store`: the database (not fenced); `name`: this server's name (settings
        `server_name`), whose holders' processes it may check on this machine;
        `exclusive`: nothing else can use the database while this server runs (SQLite,
        locked): a lease another holder left is taken at once."""
        self.store = store
        self.name = name
        self.me = identity(name)
        self.url = url
        self.times = times
        self.exclusive = exclusive
        self.clock = clock
        self.term = leadership.Term()
        self._lock = threading.Lock()

    def step(self) -> bool:
        """Renew the lease, or take it if it is free: whether this server leads now."""
        sent = self.clock()
        try:
            decision, done = self._apply()
        except sa.exc.DBAPIError as exc:
            # unreachable, a conflict, or the row still locked after hold_ms: the clock decides
            log.warning("cannot renew or take the leadership lease: %s", exc)
            return self.holds()
        with self._lock:
            if done:
                if decision.action is leadership.Action.ACQUIRE:
                    log.info("leading the scheduling (epoch %d) as %s", decision.epoch,
                             self.me)
                self.term.granted(decision.epoch, sent, self.times.lease_ms,
                                  self.times.margin_ms)
            elif self.term.epoch is not None:
                log.warning("lost the leadership lease (epoch %d): scheduling stops here",
                            self.term.epoch)
                self.term.lost()
        return self.holds()

    def _apply(self) -> tuple[leadership.Decision, bool]:
        """One renewal or takeover. The row is read unlocked first: a follower holds no lock
        on it (frozen there, it would stall the leader's writes) and waits for none; only a
        takeover reads it FOR UPDATE, waiting for the fenced transactions under way, and
        decides again on what it then sees."""
        with self.store.begin() as conn:
            lease_repo.limit(conn, self.times.hold_ms)
            decision = self._decide(conn, lease := lease_repo.read(conn))
            if decision.action is leadership.Action.ACQUIRE:
                decision = self._decide(conn, lease := lease_repo.read(conn, for_update=True))
            if decision.action is leadership.Action.RENEW:
                return decision, lease_repo.renew(conn, self.me, decision.epoch,
                                                  self.times.lease_ms)
            if decision.action is leadership.Action.ACQUIRE:
                return decision, lease_repo.take(conn, self.me, self.url, lease.epoch,
                                                 self.times.lease_ms)
            return decision, False

    def _decide(self, conn: sa.Connection, lease: leadership.Lease) -> leadership.Decision:
        return leadership.decide(lease, lease_repo.now(conn), self.me, self.term.epoch,
                                 holder_gone=self._gone(lease.holder))

    def _gone(self, holder: str | None) -> bool:
        """Whether the holder is known dead: any other holder of an exclusive database, or
        a holder of this server's name whose process is no longer there."""
        if holder is None or holder == self.me:
            return False
        if self.exclusive:
            return True
        parts = holder.rsplit(":", 2)
        if len(parts) != 3 or parts[0] != self.name or not parts[1].isdigit():
            return False
        ticks = procs.start_ticks(int(parts[1]))
        return ticks is None or f"{ticks:.0f}" != parts[2]

    def holds(self) -> bool:
        """Whether this server may act as the leader now, by its own clock."""
        with self._lock:
            return self.term.holds(self.clock())

    def epoch(self) -> int | None:
        with self._lock:
            return self.term.epoch if self.term.holds(self.clock()) else None

    def guard(self, epoch: int) -> Callable[[sa.Connection], None]:
        """The fencing guard of a term begun in `epoch` (db.Store.fenced). On an exclusive
        database no other server can have taken the lease, so this server's own clock is
        all there is to ask: no statement (SQLite; every scheduler write runs the guard)."""

        def check(conn: sa.Connection) -> None:
            with self._lock:
                mine = self.term.epoch == epoch and self.term.holds(self.clock())
            if not mine or not (self.exclusive or lease_repo.guard(
                    conn, self.me, epoch, self.times.hold_ms)):
                raise leadership.LostLease(
                    f"epoch {epoch} is over: this server no longer leads")

        return check

    def release(self) -> None:
        """A leader stopping: its lease ends now, so that a standby takes over at once."""
        with self._lock:
            epoch = self.term.epoch
            self.term.lost()
        if epoch is None:
            return
        try:
            with self.store.begin() as conn:
                lease_repo.limit(conn, self.times.hold_ms)
                lease_repo.release(conn, self.me, epoch)
        except sa.exc.DBAPIError as exc:
            log.warning("cannot release the leadership lease: %s", exc)


def current(store: db.Store) -> tuple[leadership.Lease, int]:
    """The lease as it stands, and the database's clock."""
    with store.read() as conn:
        return lease_repo.read(conn), lease_repo.now(conn)


class Fence:
    """The guard of one term's writes: refuses every transaction until the term begins
    (`epoch` set) and after this server's lease of that epoch is over."""

    def __init__(self, leader: Leader) -> None:
        self.leader = leader
        self.epoch: int | None = None

    def __call__(self, conn: sa.Connection) -> None:
        epoch = self.epoch
        if epoch is None:
            raise leadership.LostLease(
                "this server does not lead: its scheduler's writes are refused")
        self.leader.guard(epoch)(conn)

    def holds(self) -> bool:
        """Whether this term is still on: begun, and this server still leads in its epoch
        by its own clock (a term ended and a new one begun in the same epoch: False)."""
        epoch = self.epoch
        return epoch is not None and self.leader.epoch() == epoch
