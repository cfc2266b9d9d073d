"""Connecting to the database and bringing its schema up to date.

`Store` hands out transactions; the code that opens one owns it (repository functions
never commit). On SQLite every write transaction starts with BEGIN IMMEDIATE so that two
writers queue on the busy timeout instead of failing when a reader upgrades.
"""

from __future__ import annotations

import contextlib
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

MIGRATIONS = pathlib.Path(__file__).parent / "migrations"
#: set in a pooled SQLite connection's info to make its next transaction BEGIN IMMEDIATE
IMMEDIATE = "corral_immediate"
#: SQLite connections kept open between transactions, at most (see Store._connection)
KEEP_OPEN = 8


class Store:
    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.engine = make_engine(url, echo=echo)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.is_sqlite else contextlib.nullcontext())
        #: SQLite connections between two transactions (see `_connection`)
        self._open: list[sa.Connection] = []

    @contextlib.contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A write transaction, committed when the block ends without an error."""
        # SQLite lets one writer in at a time and makes the others poll with sleeps of up
        # to 100 ms; queueing this process's writers on a lock instead hands the database
        # over the moment it is free. (One server per database is enforced elsewhere.)
        with self._write_lock, self._connection() as conn:
            if self.is_sqlite:
                conn.connection.info[IMMEDIATE] = True  # read by the dialect's do_begin
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read-only transaction (one consistent snapshot)."""
        with self._connection() as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sa.Connection]:
        """A connection for one transaction. On SQLite one left open by an earlier
        transaction, when there is one: taking a connection from the pool and giving it
        back cost more than a small transaction (several times more on a thread that was
        idle), and an open SQLite connection outside a transaction holds no lock. On
        PostgreSQL the pool's, which checks that the server is still there."""
        try:
            conn = self._open.pop()
        except IndexError:
            conn = self.engine.connect()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        if self.is_sqlite and not conn.invalidated and len(self._open) < KEEP_OPEN:
            self._open.append(conn)
        else:
            conn.close()

    def migrate(self) -> None:
        upgrade(self.engine)

    def dispose(self) -> None:
        while self._open:
            self._open.pop().close()
        self.engine.dispose()


def make_engine(url: str, *, echo: bool = False) -> sa.Engine:
    # Every connection is used inside Store.begin()/read(), which always commit or roll
    # back, so the pool's own rollback on check-in (pool_reset_on_return) would repeat that.
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=8, max_overflow=16, pool_reset_on_return=None,
        )
        _sqlite_setup(engine)
        return engine
    return sa.create_engine(url, echo=echo, pool_size=8, max_overflow=16, pool_pre_ping=True,
                            pool_reset_on_return=None)


def _sqlite_setup(engine: sa.Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # corral issues BEGIN itself (do_begin below; pysqlite's own is deferred-only).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    # The dialect starts every transaction itself. (A "begin" event listener would do the
    # same, but any engine-level listener makes SQLAlchemy dispatch its execute events on
    # every statement, about a fifth of the cost of a simple query.)
    def do_begin(dbapi_conn: Any) -> None:
        immediate = dbapi_conn.info.pop(IMMEDIATE, False)
        dbapi_conn.driver_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    engine.dialect.do_begin = do_begin  # type: ignore[method-assign,assignment]


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
