"""The leadership row in SQL: read, take over, renew, release, and the fencing guard.

Every time here is the database's clock (milliseconds since the epoch), read by the
statement that uses it, so that no server's clock decides who leads. The decisions are
domain/leadership.py's; these functions apply them, each as a conditional write that
changes nothing when the row is no longer what the caller saw.

On PostgreSQL the guard takes a share lock on the row for the rest of the caller's
transaction, and a takeover reads the row FOR UPDATE first: a takeover therefore waits for
every fenced transaction under way to end, and no write of an old epoch can land after a
new epoch has begun. (On SQLite every write transaction holds the database's one write
lock, which orders them the same way.)

A row lock lasts as long as its transaction, and a server frozen inside one (SIGSTOP, a
paused VM, a cut network) would hold it, and hold every takeover back, until it woke. So
every transaction that locks the row first tells PostgreSQL, for itself alone (set_config
with is_local: it holds behind PgBouncer in transaction mode, and no other transaction of
the session is touched), to end it once it has waited `hold_ms` for its server
(idle_in_transaction_session_timeout), which frees the row; renewals and takeovers also
wait at most `hold_ms` for the row (lock_timeout). domain/leadership.hold_for says why
that time.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.domain import leadership

#: the row's id (there is one)
ROW = 1


def _now(conn: sa.Connection) -> str:
    return _clock(conn.dialect.name)


def _clock(dialect: str) -> str:
    if dialect == "postgresql":
        # clock_timestamp(): the time of the statement, not of the transaction's start
        return "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    return "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"


def _update(conn: sa.Connection) -> str:
    return " FOR UPDATE" if conn.dialect.name == "postgresql" else ""


def limit(conn: sa.Connection, hold_ms: int) -> None:
    """First in a renewal's, takeover's or release's transaction: PostgreSQL ends it if it
    waits `hold_ms` for this server, and its statements wait at most `hold_ms` for a lock."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(
            "SELECT set_config('idle_in_transaction_session_timeout', :hold, true), "
            "set_config('lock_timeout', :hold, true)"), {"hold": str(hold_ms)})


def now(conn: sa.Connection) -> int:
    """The database's clock, in milliseconds since the epoch."""
    return int(conn.execute(sa.text(f"SELECT {_now(conn)}")).scalar_one())


def read(conn: sa.Connection, *, for_update: bool = False) -> leadership.Lease:
    """The row; `for_update` locks it for the caller's transaction (waiting for the fenced
    transactions under way: see the module's docstring)."""
    row = conn.execute(sa.text(
        "SELECT holder, url, epoch, acquired_at, expires_at FROM leadership WHERE id = :id"
        + (_update(conn) if for_update else "")), {"id": ROW}).one()
    return leadership.Lease(holder=row.holder, epoch=int(row.epoch),
                            expires_at=int(row.expires_at), acquired_at=int(row.acquired_at),
                            url=row.url)


def take(conn: sa.Connection, me: str, url: str | None, seen: int, lease_ms: int) -> bool:
    """Take the lease over from epoch `seen` (read in this transaction): epoch `seen` + 1."""
    n = _now(conn)
    result = conn.execute(sa.text(
        f"UPDATE leadership SET holder = :me, url = :url, epoch = :seen + 1, "
        f"acquired_at = {n}, expires_at = {n} + :lease WHERE id = :id AND epoch = :seen"),
        {"me": me, "url": url, "seen": seen, "lease": lease_ms, "id": ROW})
    return result.rowcount == 1


def renew(conn: sa.Connection, me: str, epoch: int, lease_ms: int) -> bool:
    """Extend `me`'s lease of `epoch`, if it still holds it and it has not expired."""
    n = _now(conn)
    result = conn.execute(sa.text(
        f"UPDATE leadership SET expires_at = {n} + :lease WHERE id = :id AND holder = :me "
        f"AND epoch = :epoch AND expires_at > {n}"),
        {"me": me, "epoch": epoch, "lease": lease_ms, "id": ROW})
    return result.rowcount == 1


def release(conn: sa.Connection, me: str, epoch: int) -> bool:
    """A leader stopping: its lease ends now, so that a standby takes over at once."""
    result = conn.execute(sa.text(
        f"UPDATE leadership SET expires_at = {_now(conn)} WHERE id = :id AND holder = :me "
        "AND epoch = :epoch"), {"me": me, "epoch": epoch, "id": ROW})
    return result.rowcount == 1


def guard(conn: sa.Connection, me: str, epoch: int, hold_ms: int) -> bool:
    """The fencing guard (domain.leadership.may_act), first in every scheduler write
    transaction: `me` still holds `epoch` and it has not expired. On PostgreSQL the
    transaction is also ended if it waits `hold_ms` for this server (in the same statement:
    no round trip more)."""
    row = conn.execute(_GUARD[conn.dialect.name],
                       {"me": me, "epoch": epoch, "id": ROW, "hold": str(hold_ms)}).first()
    return row is not None


def _guard(dialect: str) -> sa.TextClause:
    hold = ("set_config('idle_in_transaction_session_timeout', :hold, true)"
            if dialect == "postgresql" else "NULL")
    share = " FOR SHARE" if dialect == "postgresql" else ""
    return sa.text(f"SELECT epoch, {hold} FROM leadership WHERE id = :id AND holder = :me "
                   f"AND epoch = :epoch AND expires_at > {_clock(dialect)}{share}")


#: the guard's statement for each database (built once: every scheduler write runs it)
_GUARD = {dialect: _guard(dialect) for dialect in ("sqlite", "postgresql")}
