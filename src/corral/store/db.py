"""Connecting to the database and bringing its schema up to date.

`Store` hands out transactions; the code that opens one owns it (repository functions
never commit). On SQLite every write transaction starts with BEGIN IMMEDIATE, so that two
writers queue on the busy timeout instead of failing when a reader upgrades to a writer.
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
#: the execution option that makes a SQLite transaction BEGIN IMMEDIATE (see _sqlite_setup)
WRITE = "corral_write"


class Store:
    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.engine = make_engine(url, echo=echo)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        # SQLite lets one writer in at a time and makes the others poll with sleeps of up
        # to 100 ms; queueing this process's writers on a lock hands the database over the
        # moment it is free. (One server per database is enforced by server.py.)
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.is_sqlite else contextlib.nullcontext())

    @contextlib.contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A write transaction, committed when the block ends without an error."""
        with self._write_lock, self.engine.connect() as conn:
            conn.execution_options(**{WRITE: True})
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read-only transaction (one consistent snapshot)."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def migrate(self) -> None:
        upgrade(self.engine)

    def dispose(self) -> None:
        self.engine.dispose()


def make_engine(url: str, *, echo: bool = False) -> sa.Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=8, max_overflow=16)
        _sqlite_setup(engine)
        return engine
    return sa.create_engine(url, echo=echo, pool_size=8, max_overflow=16, pool_pre_ping=True)


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
