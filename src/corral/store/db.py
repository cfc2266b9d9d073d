"""Connecting to the database and bringing its schema up to date.

`Store` hands out transactions; the code that opens one owns it (repository functions
never commit). On SQLite every write transaction starts with BEGIN IMMEDIATE, so that two
writers queue on the busy timeout instead of failing when a reader upgrades to a writer.
"""

from __future__ import annotations

import contextlib
import copy
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from corral.domain import errors

MIGRATIONS = pathlib.Path(__file__).parent / "migrations"
_IDLE_LIMIT = sa.text("SELECT set_config('idle_in_transaction_session_timeout', :hold, true)")
#: the execution option that makes a SQLite transaction BEGIN IMMEDIATE (see _sqlite_setup)
WRITE = "corral_write"


class Store:
    def __init__(self, url: str, *, echo: bool = False, pooled: bool = False,
                 dead_after: float | None = None) -> None:
        """`pooled`: a connection pooler in transaction mode (PgBouncer) stands between
        corral and PostgreSQL: no statement is prepared on the server (a prepared statement
        lives in a server session, which the next transaction may not get). `dead_after`:
        seconds after which a PostgreSQL connection whose other end is silent is given up
        (`make_engine`)."""
        self.url = url
        self.engine = make_engine(url, echo=echo, pooled=pooled, dead_after=dead_after)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        #: milliseconds a write transaction may wait for this server (PostgreSQL: `begin`)
        self.hold_ms = None if dead_after is None or self.is_sqlite else round(dead_after * 1000)
        # SQLite lets one writer in at a time and makes the others poll with sleeps of up
        # to 100 ms; queueing this process's writers on a lock hands the database over the
        # moment it is free. (One server per database is enforced by server.py.)
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.is_sqlite else contextlib.nullcontext())
        #: run first in every write transaction (a leader's fencing guard: `fenced`)
        self._guard: Callable[[sa.Connection], None] | None = None
        self._turns: dict[str, threading.Lock] = {}
        self._turns_lock = threading.Lock()

    def fenced(self, guard: Callable[[sa.Connection], None]) -> Store:
        """The same database, whose write transactions each run `guard` first: it raises
        to refuse the transaction (a leader that no longer holds its lease)."""
        view = copy.copy(self)
        view._guard = guard
        return view

    @contextlib.contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A write transaction, committed when the block ends without an error.

        On PostgreSQL (with `dead_after`) the database ends it once it has waited
        `hold_ms` for this server between statements (idle_in_transaction_session_timeout,
        for this transaction alone: set_config is_local, which holds behind PgBouncer): a
        server frozen or cut off inside it would otherwise keep its row locks, and every
        writer of those rows (the leader's scheduling, holding the lease row) waiting, for
        as long as it stays frozen. So no write transaction does slow work (files, object
        storage, processes) between its statements: see `turn`. (The fencing guard sets
        the same limit in its own statement.)
        """
        with self._write_lock, self.engine.connect() as conn:
            conn.execution_options(**{WRITE: True})
            with conn.begin():
                if self._guard is not None:
                    self._guard(conn)
                elif self.hold_ms is not None:
                    conn.execute(_IDLE_LIMIT, {"hold": str(self.hold_ms)})
                yield conn

    @contextlib.contextmanager
    def turn(self, key: str, wait_s: float) -> Iterator[None]:
        """Holds `key` against every other holder of it, in any server of the database,
        for slow work done outside write transactions (an append to a dataset's file):
        waits at most `wait_s` for it, else raises InvalidState.

        PostgreSQL: a transaction-scoped advisory lock, in a transaction of its own that
        locks no row and so holds no writer back but the next holder of `key`; it has no
        idle limit, since the work it covers may take long (a server frozen while holding
        it keeps only other holders of `key` waiting, each for at most `wait_s`). SQLite
        (one server per database): a lock of this process.
        """
        if self.is_sqlite:
            with self._turns_lock:
                lock = self._turns.setdefault(key, threading.Lock())
            if not lock.acquire(timeout=wait_s):
                raise errors.InvalidState(f"{key}: busy with another request; try again")
            try:
                yield
            finally:
                lock.release()
            return
        with self.engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SELECT set_config('lock_timeout', :wait, true)"),
                         {"wait": str(max(1, round(wait_s * 1000)))})
            try:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                             {"key": key})
            except sa.exc.OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != "55P03":  # lock_not_available
                    raise
                raise errors.InvalidState(f"{key}: busy with another request; try again"
                                          ) from None
            yield

    @contextlib.contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read-only transaction (one consistent snapshot)."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def migrate(self) -> None:
        upgrade(self.engine)

    def dispose(self) -> None:
        self.engine.dispose()


def make_engine(url: str, *, echo: bool = False, pooled: bool = False,
                dead_after: float | None = None) -> sa.Engine:
    """`dead_after` (PostgreSQL): seconds after which a connection is given up when the
    database (or the pooler) stops answering: TCP keepalives probe a connection waiting
    for an answer, and data sent stays unacknowledged no longer (tcp_user_timeout).
    Without them a statement on a connection cut off silently (a network partition, the
    database's machine frozen) waits until the kernel gives up, which takes many minutes."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=8, max_overflow=16)
        _sqlite_setup(engine)
        return engine
    args: dict[str, Any] = {"prepare_threshold": None} if pooled else {}
    if dead_after is not None:
        args.update(_keepalives(dead_after))
    engine = sa.create_engine(url, echo=echo, pool_size=8, max_overflow=16,
                              pool_pre_ping=True, connect_args=args)
    _no_pipelines(engine)
    return engine


def _no_pipelines(engine: sa.Engine) -> None:
    """A statement run for many rows (`conn.execute(stmt, [rows])`) runs as one statement
    per row, each ended as a single one is.

    psycopg runs such a statement in pipeline mode: it sends each row's execution as it
    goes and ends the batch (Sync) only after the last. Until then PostgreSQL counts the
    transaction as busy ("active"), not as waiting for its server, so
    idle_in_transaction_session_timeout never ends it: a server frozen in the middle of the
    batch would keep its row locks (the guard's share lock on the lease row, and with it
    every takeover) for as long as it stayed frozen. Row by row, the transaction waits
    for its server between rows as between statements, and is ended as it is there."""

    @event.listens_for(engine, "do_executemany")
    def _row_by_row(cursor: Any, statement: str, rows: Any, _context: Any) -> bool:
        for row in rows:
            cursor.execute(statement, row)
        return True


def _keepalives(dead_after: float) -> dict[str, int]:
    """libpq's connection parameters that give a silent connection up after about
    `dead_after` seconds: silent for a third of it, then two probes a third apart."""
    third = max(1, int(dead_after / 3))
    return {"keepalives": 1, "keepalives_idle": third, "keepalives_interval": third,
            "keepalives_count": 2, "tcp_user_timeout": max(1000, round(dead_after * 1000))}


def _sqlite_setup(engine: sa.Engine) -> None:
    """WAL, foreign keys, and transactions that begin when corral says so.

    pysqlite opens transactions itself, lazily and always DEFERRED; SQLAlchemy's documented
    recipe hands that to the `begin` event instead, which lets a write transaction take the
    write lock at its start (BEGIN IMMEDIATE) rather than at its first write.
    """

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # no implicit BEGIN from the driver
        cur = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                       "busy_timeout=30000"):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Apply every Alembic migration not yet applied (up to `revision`)."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_alembic(conn), revision)


def downgrade(engine: sa.Engine, revision: str) -> None:
    """Undo the migrations after `revision` (tests of the migrations use it)."""
    from alembic import command

    with engine.begin() as conn:
        command.downgrade(_alembic(conn), revision)


def _alembic(conn: sa.Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg
