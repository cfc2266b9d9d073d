"""The lease's SQL (store/lease_repo.py, services/leasing.py) on SQLite and
PostgreSQL: one leader at a time, takeovers raise the epoch, and the fencing guard refuses
the writes of a leader whose epoch is over."""

from __future__ import annotations

import contextlib
import pathlib
import socket
import threading

import psycopg
import psycopg.types.string
import pytest
import sqlalchemy as sa

from corral import server
from corral.domain import leadership
from corral.services import leasing
from corral.store import db, lease_repo
from tests import factories
from tests.conftest import make_settings

TIMES = leasing.Times(lease_ms=10_000, renew_ms=2_000)


def expire(store: db.Store) -> None:
    """The lease runs out (as if its holder had been paused past it)."""
    with store.begin() as conn:
        conn.execute(sa.text("UPDATE leadership SET expires_at = 0"))


def test_one_server_leads_and_the_other_follows(store: db.Store) -> None:
    a = leasing.Leader(store, "a", "http://a", TIMES)
    b = leasing.Leader(store, "b", "http://b", TIMES)
    assert a.step() and not b.step()
    assert a.step()  # a renewal
    lease, now = leasing.current(store)
    assert (lease.holder, lease.epoch, lease.url) == (a.me, 1, "http://a")
    assert now < lease.expires_at <= now + TIMES.lease_ms


def test_a_takeover_fences_the_old_leaders_writes(store: db.Store) -> None:
    a = leasing.Leader(store, "a", None, TIMES)
    b = leasing.Leader(store, "b", None, TIMES)
    assert a.step()
    fenced_a = store.fenced(a.guard(1))
    with fenced_a.begin() as conn:  # a leads: its writes land
        conn.execute(sa.text("UPDATE leadership SET url = 'written by a'"))
    expire(store)
    assert b.step()  # b takes over: epoch 2
    assert a.holds()  # a, paused, still believes it leads by its own clock...
    with pytest.raises(leadership.LostLease), fenced_a.begin() as conn:  # ...but is fenced
        conn.execute(sa.text("UPDATE leadership SET url = 'stale'"))
    assert not a.step() and not a.holds()  # and then learns it
    lease, _ = leasing.current(store)
    assert (lease.holder, lease.epoch) == (b.me, 2)


def test_an_exclusive_leaders_guard_asks_its_own_clock_and_runs_no_statement(
        tmp_path: pathlib.Path) -> None:
    """SQLite (one server, which locks it): nobody else can take the lease, so the guard of
    every scheduler write reads no row; it still refuses once the term is over by this
    server's own clock, and an epoch that is not the term's."""
    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    now = [0.0]
    a = leasing.Leader(store, "a", None, TIMES, exclusive=True, clock=lambda: now[0])
    try:
        assert a.step()
        ran: list[str] = []
        sa.event.listen(store.engine, "before_cursor_execute",
                        lambda _c, _cur, stmt, *_: ran.append(stmt))
        with store.fenced(a.guard(1)).begin():
            pass
        assert ran == ["BEGIN IMMEDIATE"]
        with pytest.raises(leadership.LostLease), store.fenced(a.guard(2)).begin():
            pass  # not the term's epoch
        now[0] += TIMES.lease_ms / 1000  # no renewal for a whole lease: over by its clock
        with pytest.raises(leadership.LostLease), store.fenced(a.guard(1)).begin() as conn:
            conn.execute(sa.text("UPDATE leadership SET url = 'stale'"))
        lease, _ = leasing.current(store)
        assert lease.url is None
    finally:
        store.dispose()


def test_a_terms_fence_holds_only_while_its_own_term_is_on(tmp_path: pathlib.Path) -> None:
    """What a scheduler asks before it acts outside a transaction (launches, adoptions):
    not whether this server leads, but whether the term it began in still runs; one ended
    and begun again in the same epoch is another's (running.py gives it a new fence)."""
    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    now = [0.0]
    a = leasing.Leader(store, "a", None, TIMES, exclusive=True, clock=lambda: now[0])
    try:
        fence = leasing.Fence(a)
        assert a.step() and not fence.holds()  # its term not begun
        fence.epoch = a.epoch()
        assert fence.holds()
        now[0] += TIMES.lease_ms / 1000  # no renewal for a whole lease: over by its clock
        assert not fence.holds()
        assert a.step() and a.epoch() is not None
        fence.epoch = None  # the term ended (running.py `_end_term`), the lease renewed
        assert not fence.holds()
    finally:
        store.dispose()


def test_a_released_lease_is_taken_at_once(store: db.Store) -> None:
    a = leasing.Leader(store, "a", None, TIMES)
    b = leasing.Leader(store, "b", None, TIMES)
    assert a.step() and not b.step()
    a.release()
    assert b.step() and not a.holds()


def test_a_dead_holder_of_the_same_name_is_replaced_at_once(store: db.Store) -> None:
    with store.begin() as conn:  # a process of this machine that is no longer there
        assert lease_repo.take(conn, "here:999999999:1", None, 0, TIMES.lease_ms)
    assert leasing.Leader(store, "here", None, TIMES).step()


def test_a_live_holder_of_another_name_is_waited_for(store: db.Store) -> None:
    with store.begin() as conn:
        assert lease_repo.take(conn, "there:999999999:1", None, 0, TIMES.lease_ms)
    assert not leasing.Leader(store, "here", None, TIMES).step()


def test_a_takeover_waits_for_the_fenced_writes_under_way(pg_url: str) -> None:
    """PostgreSQL: the guard's share lock keeps a new epoch from beginning while a write of
    the old one is under way, so no write of an old epoch lands after a new one began."""
    store = db.Store(pg_url)
    store.migrate()
    try:
        a = leasing.Leader(store, "a", None, TIMES)
        # (b takes the lease over without waiting for it to expire: as if a were known
        # dead; an expiry could not be written while a's transaction holds the row)
        b = leasing.Leader(store, "b", None, TIMES, exclusive=True)
        assert a.step()
        order: list[str] = []
        took = threading.Thread(target=lambda: order.append(f"b leads: {b.step()}"))
        with store.fenced(a.guard(1)).begin() as conn:
            took.start()
            took.join(timeout=1.0)
            conn.execute(sa.text("UPDATE leadership SET url = 'a was here'"))
            order.append("a wrote")
        took.join(timeout=30)
        assert order == ["a wrote", "b leads: True"]
        lease, _ = leasing.current(store)
        assert (lease.holder, lease.epoch, lease.url) == (b.me, 2, None)
    finally:
        store.dispose()


#: short lease times, for the tests that wait for the database to end a transaction
SHORT = leasing.Times(lease_ms=2_000, renew_ms=500)


def backend(conn: sa.Connection) -> int:
    return int(conn.connection.driver_connection.info.backend_pid)  # type: ignore[union-attr]


def in_transaction(store: db.Store, pid: int) -> bool:
    """The session `pid` is still there, inside a transaction that waits for its client."""
    with store.read() as conn:
        state = conn.execute(sa.text("SELECT state FROM pg_stat_activity WHERE pid = :pid"),
                             {"pid": pid}).scalar()
    return state == "idle in transaction"


def test_a_follower_frozen_in_its_step_holds_the_leader_back_in_nothing(pg_url: str) -> None:
    """PostgreSQL: a follower's step reads the row without locking it, so a follower frozen
    in the middle of one (here: held inside it, after its read) keeps neither the leader's
    renewal nor its writes waiting. (It read the row FOR UPDATE: frozen there, it held the
    leader back until the database ended its transaction, or, before that limit existed,
    until it woke, and no one led meanwhile.)"""
    store, other = db.Store(pg_url), db.Store(pg_url)
    store.migrate()
    a = leasing.Leader(store, "a", None, TIMES)
    b = leasing.Leader(other, "b", None, TIMES)
    frozen: list[int] = []
    wake = threading.Event()

    @sa.event.listens_for(other.engine, "after_cursor_execute")
    def freeze(conn: sa.Connection, _cursor: object, statement: str, *_: object) -> None:
        if "FROM leadership" in statement and not wake.is_set():
            frozen.append(backend(conn))
            wake.wait(60)

    follower = threading.Thread(target=b.step)
    try:
        assert a.step()
        before, _ = leasing.current(store)
        follower.start()
        factories.wait_for(lambda: frozen, 30, "the follower to be inside its step")
        assert a.step()
        with store.fenced(a.guard(1)).begin() as conn:
            conn.execute(sa.text("UPDATE leadership SET url = 'a was here'"))
        assert in_transaction(store, frozen[0])  # done while the follower is still frozen
        after, _ = leasing.current(store)
        assert after.expires_at > before.expires_at and after.url == "a was here"
    finally:
        wake.set()
        follower.join(30)
        store.dispose()
        other.dispose()


def test_a_takeover_waits_for_the_row_no_longer_than_a_leader_acts_on_a_renewal(
        pg_url: str) -> None:
    """PostgreSQL: a transaction that keeps the row locked while busy (not waiting for its
    server, so the database lets it be) holds a takeover back for `hold_ms` at most: the
    step gives up, and the standby tries again at its next one."""
    store = db.Store(pg_url)
    store.migrate()
    a = leasing.Leader(store, "a", None, SHORT)
    b = leasing.Leader(store, "b", None, SHORT)
    busy = threading.Thread(target=_lock_and_sleep, args=(store, a, 30))
    try:
        assert a.step()
        busy.start()
        factories.wait_for(lambda: _sleeping(store), 30, "a's transaction to hold the row")
        assert not b.step()  # the lease has not run out: b follows, without waiting
        factories.wait_for(lambda: _expired(store), 30, "the lease to run out")
        assert not b.step()  # the row is still locked: b gives up after hold_ms...
        assert busy.is_alive()  # ...not once a's transaction has ended
    finally:
        with store.read() as conn:  # (a's transaction need not sleep on)
            conn.execute(sa.text("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                                 "WHERE query LIKE 'SELECT pg_sleep%'"))
        busy.join(60)
        store.dispose()


def test_a_write_of_a_frozen_server_holds_the_leaders_writes_back_no_longer_than_it_may_wait(
        pg_url: str) -> None:
    """PostgreSQL: any server's write transaction (an API call's on a follower, say) that
    locks a row and then waits for its server, frozen, is ended by the database once it has
    waited `dead_after`: the leader's writes to that row go on (they waited for it for as
    long as the follower stayed frozen, holding the lease row, so no one scheduled)."""
    store = db.Store(pg_url)
    store.migrate()
    other = db.Store(pg_url, dead_after=1.0)
    a = leasing.Leader(store, "a", None, TIMES)
    wrote: list[str] = []

    def write() -> None:
        with store.fenced(a.guard(1)).begin() as conn:
            conn.execute(sa.text("UPDATE leadership SET url = 'a was here'"))
        wrote.append("a")

    leader = threading.Thread(target=write)
    try:
        assert a.step()
        with pytest.raises(sa.exc.DBAPIError), other.begin() as conn:
            conn.execute(sa.text("UPDATE leadership SET url = 'frozen follower'"))
            pid = backend(conn)  # ... and the follower stops here, inside its transaction
            leader.start()
            leader.join(30)
            assert wrote == ["a"] and not in_transaction(store, pid)
            conn.execute(sa.text("SELECT 1"))  # woken, it finds its transaction gone
        lease, _ = leasing.current(store)
        assert lease.url == "a was here"
    finally:
        leader.join(30)
        store.dispose()
        other.dispose()


class Stalled(str):
    """A value whose sending stalls until `STALLED` is set: the server frozen at that
    point of a statement."""


STALLED = threading.Event()


class _StalledDumper(psycopg.types.string.StrDumper):
    def dump(self, obj: str) -> bytes:
        STALLED.wait(60)
        return super().dump(obj)  # type: ignore[return-value]


def test_a_leader_frozen_inside_a_statement_run_for_many_rows_is_ended_as_between_statements(
        pg_url: str) -> None:
    """PostgreSQL: a fenced write that runs one statement for many rows, its server frozen
    after the first row, is ended by the database once it has waited `hold_ms` for its
    server, as one frozen between two statements is, and nothing of it lands. (psycopg sent
    such rows in one pipeline, which PostgreSQL counts as busy until the last: frozen
    there, the server kept the lease row share-locked, every takeover waiting, for as long
    as it stayed frozen.)"""
    psycopg.adapters.register_dumper(Stalled, _StalledDumper)
    store = db.Store(pg_url, dead_after=1.0)
    store.migrate()
    a = leasing.Leader(store, "a", None, SHORT)
    sessions: list[int] = []
    failed: list[BaseException] = []

    @sa.event.listens_for(store.engine, "before_cursor_execute")
    def seen(conn: sa.Connection, _cursor: object, statement: str, *_: object) -> None:
        if "SET url" in statement:
            sessions.append(backend(conn))

    def write() -> None:
        try:
            with store.fenced(a.guard(1)).begin() as conn:
                conn.execute(sa.text("UPDATE leadership SET url = :url"),
                             [{"url": "first row"}, {"url": Stalled("second row")}])
        except sa.exc.DBAPIError as exc:
            failed.append(exc)

    STALLED.clear()
    frozen = threading.Thread(target=write)
    try:
        assert a.step()
        frozen.start()
        factories.wait_for(lambda: sessions, 30, "the write to begin")
        pid = sessions[0]
        factories.wait_for(lambda: not _session(store, pid), 15,
                           "the database to end the frozen server's transaction")
        STALLED.set()  # woken, it finds its transaction gone
        frozen.join(30)
        assert failed, "the frozen write landed"
        lease, _ = leasing.current(store)
        assert lease.url is None
    finally:
        STALLED.set()
        frozen.join(30)
        store.dispose()


def _session(store: db.Store, pid: int) -> bool:
    with store.read() as conn:
        return conn.execute(sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"),
                            {"pid": pid}).first() is not None


def test_a_servers_connections_give_a_silent_database_up_after_hold_ms(
        tmp_path: pathlib.Path, pg_url: str) -> None:
    """PostgreSQL: a server's connections carry TCP keepalives and tcp_user_timeout derived
    from its lease (on a connection cut off silently a statement would otherwise wait for
    the kernel to give up, many minutes)."""
    platform = server.build(make_settings(tmp_path / "home", database_url=pg_url,
                                          leader_lease=4.0, leader_renew=1.0))
    try:
        with platform.store.read() as conn:
            fd = conn.connection.driver_connection.pgconn.socket  # type: ignore[union-attr]
            sock = socket.socket(fileno=fd)
            try:
                options = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                           sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))
            finally:
                sock.detach()  # (the connection's, not ours to close)
        assert options == (1, leasing.Times(4000, 1000).hold_ms)
    finally:
        platform.stop()


def _lock_and_sleep(store: db.Store, a: leasing.Leader, seconds: float) -> None:
    with contextlib.suppress(sa.exc.OperationalError), \
            store.fenced(a.guard(1)).begin() as conn:
        conn.execute(sa.text("SELECT pg_sleep(:s)"), {"s": seconds})


def _sleeping(store: db.Store) -> bool:
    with store.read() as conn:
        return conn.execute(sa.text(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' "
            "AND query LIKE 'SELECT pg_sleep%'")).first() is not None


def _expired(store: db.Store) -> bool:
    lease, now = leasing.current(store)
    return lease.expires_at <= now


def test_migration_0012_adds_a_lease_never_held_and_goes_back_down(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0011")
        db.upgrade(engine)
        with engine.connect() as conn:
            lease = lease_repo.read(conn)
        assert (lease.holder, lease.epoch, lease.expires_at) == (None, 0, 0)
        db.downgrade(engine, "0011")
        assert "leadership" not in sa.inspect(engine).get_table_names()
        db.upgrade(engine)
    finally:
        engine.dispose()
