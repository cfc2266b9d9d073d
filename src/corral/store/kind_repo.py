"""What the controllers of job kinds (kinds/) share in the store: their objects' events,
and guarded state changes on their own tables.

Each kind keeps its objects in tables of its own. Like a job's phase, an object's state
moves only through `move` (or `transition`, which adds its event): an UPDATE guarded by
the states its kind's table (in `domain/`) allows the new one from, in the caller's
transaction, so that a controller and the API acting on the same object at once never
undo each other.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

import sqlalchemy as sa

from corral.domain import machines
from corral.store import kind_rows, kind_tables

EVENTS = kind_tables.kind_events
S = TypeVar("S", bound=enum.Enum)


def add_event(conn: sa.Connection, kind: str, object_id: str, now: int, message: str, *,
              level: str = "Info") -> None:
    conn.execute(EVENTS.insert(), {"kind": kind, "object_id": object_id, "time": now,
                                   "level": level, "message": message})


def add_event_unless_last(conn: sa.Connection, kind: str, object_id: str, now: int,
                          message: str, *, level: str = "Info") -> bool:
    """`add_event`, unless the object's latest event says the same already (what repeats at
    every pass is said once); whether it was added."""
    q = (sa.select(EVENTS.c.message)
         .where(EVENTS.c.kind == kind, EVENTS.c.object_id == object_id)
         .order_by(EVENTS.c.id.desc()).limit(1))
    if conn.execute(q).scalar() == message:
        return False
    add_event(conn, kind, object_id, now, message, level=level)
    return True


def list_events(conn: sa.Connection, kind: str, object_id: str, *, offset: int = 0,
                limit: int = 100, order: str = "asc") -> tuple[int, list[kind_rows.KindEvent]]:
    """(how many events the object has, the requested page of them)."""
    mine = [EVENTS.c.kind == kind, EVENTS.c.object_id == object_id]
    total = conn.execute(sa.select(sa.func.count()).select_from(EVENTS).where(*mine))
    key = EVENTS.c.id.asc() if order == "asc" else EVENTS.c.id.desc()
    q = sa.select(EVENTS).where(*mine).order_by(key).offset(offset).limit(limit)
    return int(total.scalar_one()), kind_rows.KindEvent.all(conn.execute(q))


def delete_events(conn: sa.Connection, kind: str, object_id: str) -> None:
    conn.execute(EVENTS.delete().where(EVENTS.c.kind == kind, EVENTS.c.object_id == object_id))


def move(conn: sa.Connection, table: sa.Table, key: Mapping[str, Any], *, to: S,
         transitions: machines.Table[S], was: S | None = None, state_column: str = "state",
         values: Mapping[str, Any] | None = None) -> bool:
    """Move the row of `table` found by `key` (column -> value) to state `to`, if it is in
    a state `transitions` allows `to` from; False, and nothing written, otherwise.

    `was` makes it a compare-and-set: the move holds only while the row is still in `was`,
    the state the caller read and decided on (and the table must allow `to` from it)."""
    allowed = machines.allowed_from(transitions, to)
    if was is not None:
        allowed &= {was}
    state = table.c[state_column]
    q = (table.update().where(*(table.c[c] == v for c, v in key.items()))
         .where(state.in_(sorted(str(s.value) for s in allowed)))
         .values({**(values or {}), state_column: to.value}))
    return bool(conn.execute(q).rowcount == 1)


def transition(conn: sa.Connection, table: sa.Table, key: Mapping[str, Any], *, to: S,
               transitions: machines.Table[S], kind: str, object_id: str, now: int,
               message: str, level: str = "Info", was: S | None = None,
               state_column: str = "state", values: Mapping[str, Any] | None = None) -> bool:
    """`move`, with its event (`kind_events`) when it moved."""
    if not move(conn, table, key, to=to, transitions=transitions, was=was,
                state_column=state_column, values=values):
        return False
    add_event(conn, kind, object_id, now, message, level=level)
    return True
