"""The lease and its fencing (domain/leadership.py), driven by hypothesis: two servers
whose steps, pauses, message delays and clocks (each its own rate and offset, the
database's another) are arbitrary, never act as leaders in the same epoch, never act in an
epoch older than one already acted in, and never believe they lead when the database would
let the other in.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain import leadership

LEASE, MARGIN = leadership.LEASE_MS, leadership.MARGIN_MS


@dataclasses.dataclass
class Server:
    name: str
    rate: float  #: its monotonic clock's rate against real time
    offset: float  #: seconds
    term: leadership.Term = dataclasses.field(default_factory=leadership.Term)
    #: every epoch it has held (a term's work keeps the epoch it began in)
    held: list[int] = dataclasses.field(default_factory=list)

    def mono(self, real_ms: float) -> float:
        return self.rate * real_ms / 1000 + self.offset


@dataclasses.dataclass
class World:
    servers: list[Server]
    db_offset: int
    real: float = 0.0  #: milliseconds of real time
    lease: leadership.Lease = dataclasses.field(
        default_factory=lambda: leadership.Lease(holder=None, epoch=0, expires_at=0))
    acts: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    def db_now(self) -> int:
        return int(self.real) + self.db_offset

    def step(self, s: Server, there: float, back: float) -> None:
        """One renewal: sent now, applied `there` ms later, its answer `back` ms after."""
        sent = s.mono(self.real)
        self.real += there
        now = self.db_now()
        d = leadership.decide(self.lease, now, s.name, s.term.epoch)
        done = False
        if d.action is leadership.Action.RENEW and leadership.may_act(
                self.lease, now, s.name, d.epoch):  # lease_repo.renew's conditions
            self.lease, done = leadership.renewed(self.lease, now), True
        elif d.action is leadership.Action.ACQUIRE and d.epoch == self.lease.epoch + 1:
            self.lease, done = leadership.acquired(self.lease, s.name, now), True
        self.real += back
        if done:
            s.term.granted(d.epoch, sent, LEASE, MARGIN)
            s.held.append(d.epoch)
        else:
            s.term.lost()

    def act(self, s: Server, which: int, by_clock: bool) -> None:
        """A fenced write of work begun in one of the epochs it held: by its own clock
        (unless `by_clock` is off: the guard in the transaction must suffice alone), then
        by the guard."""
        if not s.held:
            return
        epoch = s.held[which % len(s.held)]
        if by_clock and (s.term.epoch != epoch or not s.term.holds(s.mono(self.real))):
            return
        if leadership.may_act(self.lease, self.db_now(), s.name, epoch):
            self.acts.append((epoch, s.name))


servers = st.builds(lambda rate, offset: (rate, offset),
                    st.sampled_from([0.9, 1.0, 1.1]) | st.floats(0.9, 1.1), st.floats(0, 1e6))
#: milliseconds, on a grid coarse enough to land near the lease's edges often
ms = st.integers(0, 60).map(lambda k: k * 250)
ops = st.one_of(
    st.tuples(st.just("wait"), ms),
    st.tuples(st.just("step"), st.integers(0, 1), ms, ms),
    st.tuples(st.just("act"), st.integers(0, 1), st.integers(0, 3), st.booleans()),
)


def check(world: World) -> None:
    by_epoch: dict[int, str] = {}
    last = 0
    for epoch, name in world.acts:
        assert by_epoch.setdefault(epoch, name) == name, f"two leaders acted in {epoch}"
        assert epoch >= last, f"an act of epoch {epoch} after one of {last}"
        last = epoch
    for s in world.servers:  # a server that believes it leads is right to
        if s.term.holds(s.mono(world.real)):
            assert world.lease.holder == s.name and world.lease.epoch == s.term.epoch
            assert world.lease.expires_at > world.db_now()


@settings(max_examples=1500, deadline=None)
@given(a=servers, b=servers, db_offset=st.integers(-10**9, 10**9),
       steps=st.lists(ops, max_size=60))
def test_two_servers_never_act_as_leaders_in_the_same_epoch(
        a: tuple[float, float], b: tuple[float, float], db_offset: int,
        steps: list[tuple[object, ...]]) -> None:
    world = World([Server("a", *a), Server("b", *b)], db_offset=db_offset + 10**12)
    for op in steps:
        if op[0] == "wait":
            world.real += float(op[1])  # type: ignore[arg-type]
        elif op[0] == "step":
            _, i, there, back = op
            world.step(world.servers[i], float(there), float(back))  # type: ignore[index,arg-type]
        else:
            _, i, which, by_clock = op
            world.act(world.servers[i], which, by_clock)  # type: ignore[index,arg-type]
        check(world)


def test_a_lease_taken_over_raises_the_epoch_and_fences_the_old_holder() -> None:
    lease = leadership.acquired(leadership.Lease(None, 0, 0), "a", now=1000)
    assert leadership.decide(lease, 1500, "b", None).action is leadership.Action.FOLLOW
    expired = leadership.decide(lease, 1000 + LEASE, "b", None)
    assert expired == leadership.Decision(leadership.Action.ACQUIRE, 2)
    taken = leadership.acquired(lease, "b", now=1000 + LEASE)
    assert not leadership.may_act(taken, 1000 + LEASE + 1, "a", 1)
    assert leadership.may_act(taken, 1000 + LEASE + 1, "b", 2)
    # the old holder, back from a pause, follows (and must not renew epoch 1)
    assert leadership.decide(taken, 1000 + LEASE + 1, "a", 1).action is leadership.Action.FOLLOW


def test_a_dead_holder_is_replaced_before_its_lease_ends() -> None:
    lease = leadership.acquired(leadership.Lease(None, 0, 0), "a", now=1000)
    assert leadership.decide(lease, 1001, "b", None, holder_gone=True).action is (
        leadership.Action.ACQUIRE)


def test_a_leader_stops_by_its_own_clock_before_its_lease_ends() -> None:
    term = leadership.Term()
    term.granted(3, sent_at=100.0)
    assert term.holds(100.0 + (LEASE - MARGIN) / 1000 - 0.001)
    assert not term.holds(100.0 + (LEASE - MARGIN) / 1000)


def test_unsafe_lease_times_are_refused() -> None:
    assert leadership.check_times(LEASE, leadership.RENEW_MS, MARGIN) is None
    assert leadership.check_times(10_000, 8_000, 3_000) is not None


@given(lease_ms=st.integers(1_000, 300_000), sent_at=st.floats(0, 1e6))
def test_a_transaction_ended_for_waiting_hold_ms_is_one_its_leader_no_longer_acts_in(
        lease_ms: int, sent_at: float) -> None:
    """The database ends a transaction on the lease row once it has waited `hold_for` for
    its server. Begun after the renewal sent at `sent_at` (a renewal waits for it), it has
    then waited until the leader's own clock says the leader stopped acting."""
    term = leadership.Term()
    term.granted(1, sent_at, lease_ms, leadership.margin_for(lease_ms))
    assert not term.holds(sent_at + leadership.hold_for(lease_ms) / 1000)
    assert leadership.hold_for(lease_ms) < lease_ms  # and frees the row within the lease
