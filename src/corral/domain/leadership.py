"""Which server schedules: a lease with an epoch as its fencing token.

Several servers may serve one PostgreSQL database; one at a time schedules. It holds the
lease, a single row (holder, epoch, expires_at) whose times are the database's own clock,
so the servers' clocks never matter. Taking over an expired lease raises the epoch; every
write a leader's scheduler makes first checks, in its own transaction, that the row still
names it with its epoch and has not expired (`may_act`). A server that was paused past its
lease finds its epoch gone and cannot act on what it believed.

A server also stops by its own monotonic clock (`Term`): it counts its lease from the moment
it *sent* the renewal that succeeded (the database set the expiry later than that), less a
safety margin, so it stops before the database could let another server in, whatever the
delays on the way.

This module is the decision alone, with no I/O: store/lease_repo.py applies it in SQL, and
the property test drives it with arbitrary pauses and clock readings.
"""

from __future__ import annotations

import dataclasses
import enum

from corral.domain import errors


class LostLease(errors.CorralError):
    """This server no longer holds the lease: its scheduler's writes are refused."""

    error_code = "ModelArts.0503"


#: milliseconds a lease lasts from its last renewal (the database's clock)
LEASE_MS = 10_000
#: milliseconds between renewals
RENEW_MS = 2_000


def margin_for(lease_ms: int) -> int:
    """Milliseconds before its lease's end, by its own clock, at which a leader stops
    acting: 30 % of the lease, room for its clock to run up to 30 % slow."""
    return lease_ms * 3 // 10


#: the margin of the default lease
MARGIN_MS = margin_for(LEASE_MS)


def hold_for(lease_ms: int) -> int:
    """Milliseconds a transaction that holds the lease row may sit waiting for its server
    (the database then ends it), and that a renewal or takeover may wait for the row.

    The time a leader acts on one renewal, by its own clock (the lease less the margin).
    A leader's renewals wait for its own transactions on the row, so one of them left idle
    that long belongs to a leader that has already stopped acting: ending it takes nothing
    from a server still entitled to lead, and frees the row of a frozen or cut-off one
    before the lease could be taken over anyway (a takeover follows within the lease and a
    renewal interval of the freeze). A renewal that waited longer would grant nothing.
    """
    return lease_ms - margin_for(lease_ms)


@dataclasses.dataclass(frozen=True)
class Lease:
    """The leadership row as the database holds it."""

    holder: str | None  #: the server that holds it ("host:pid:start"); None: never held
    epoch: int  #: raised by one at every takeover: the fencing token
    expires_at: int  #: milliseconds, the database's clock
    acquired_at: int = 0  #: when the holder took it (database clock)
    url: str | None = None  #: where the holder serves its API


class Action(enum.Enum):
    ACQUIRE = "acquire"  #: take the lease over: epoch + 1
    RENEW = "renew"  #: extend my lease, same epoch
    FOLLOW = "follow"  #: another server holds a lease that has not expired


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    epoch: int  #: the epoch I hold after acting (ACQUIRE, RENEW) or the leader's (FOLLOW)


def decide(lease: Lease, now: int, me: str, mine: int | None, *,
           holder_gone: bool = False) -> Decision:
    """What server `me`, which believes it holds epoch `mine` (None: it holds none), does
    when the database's clock reads `now`.

    `holder_gone`: the holder is known to be dead (a process of this machine that is no
    longer there, or any holder when an exclusive lock on the database proves no other
    server runs): its lease may be taken before it expires.
    """
    if lease.holder == me and mine == lease.epoch and lease.expires_at > now:
        return Decision(Action.RENEW, lease.epoch)
    if lease.holder is None or lease.expires_at <= now or holder_gone:
        return Decision(Action.ACQUIRE, lease.epoch + 1)
    return Decision(Action.FOLLOW, lease.epoch)


def may_act(lease: Lease, now: int, me: str, epoch: int) -> bool:
    """The fencing guard: a write of leader `me` in `epoch` may land at database time `now`.
    (store/lease_repo.guard is this predicate in SQL.)"""
    return lease.holder == me and lease.epoch == epoch and lease.expires_at > now


def acquired(lease: Lease, me: str, now: int, url: str | None = None,
             lease_ms: int = LEASE_MS) -> Lease:
    """The row after `me` took it over at `now`."""
    return Lease(holder=me, epoch=lease.epoch + 1, expires_at=now + lease_ms,
                 acquired_at=now, url=url)


def renewed(lease: Lease, now: int, lease_ms: int = LEASE_MS) -> Lease:
    return dataclasses.replace(lease, expires_at=now + lease_ms)


@dataclasses.dataclass
class Term:
    """A server's own view of its lease, by its monotonic clock (seconds).

    `valid_until` is when it stops acting: the moment it sent its last successful renewal
    (or takeover) plus the lease, less the margin.
    """

    epoch: int | None = None
    valid_until: float = 0.0

    def granted(self, epoch: int, sent_at: float, lease_ms: int = LEASE_MS,
                margin_ms: int = MARGIN_MS) -> None:
        self.epoch = epoch
        self.valid_until = sent_at + (lease_ms - margin_ms) / 1000

    def lost(self) -> None:
        self.epoch = None
        self.valid_until = 0.0

    def holds(self, now: float) -> bool:
        """Whether it may act at monotonic time `now`."""
        return self.epoch is not None and now < self.valid_until


def check_times(lease_ms: int, renew_ms: int, margin_ms: int) -> str | None:
    """Why these lease times are unsafe or useless, or None."""
    if renew_ms <= 0 or margin_ms <= 0:
        return "the renewal interval and the margin must be positive"
    if margin_ms + renew_ms >= lease_ms:
        return ("the lease must be longer than a renewal interval plus the margin, or a "
                "leader would stop before it renews")
    return None
