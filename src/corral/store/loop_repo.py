"""SQL for incremental-learning loops, their rounds and their deploys.

A loop's state moves only through `move` (kind_repo's guarded transition, with its event).
Every write transaction that changes a loop reads it first with `lock=True`, so that the
controller and a user's action on the same loop take turns (PostgreSQL holds the row;
SQLite has one writer at a time anyway). Functions never commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import states
from corral.store import kind_repo, kind_rows, kind_tables

LOOPS = kind_tables.il_loops
ROUNDS = kind_tables.il_rounds
DEPLOYS = kind_tables.il_deploys
KIND = states.KIND
_OPEN_DEPLOYS = [s.value for s in states.DEPLOY_OPEN]


class LoopNotFound(errors.NotFound):
    """The incremental-learning job does not exist."""


# --- loops --------------------------------------------------------------------------------


def insert_loop(conn: sa.Connection, values: Mapping[str, Any]) -> str:
    name = values["name"]
    taken = sa.select(LOOPS.c.id).where(LOOPS.c.project_id == values["project_id"],
                                        LOOPS.c.name == name)
    message = f"an incremental-learning job named '{name}' already exists"
    if conn.execute(taken).first() is not None:
        raise errors.DuplicateName(message)
    loop_id = str(uuid.uuid4())
    try:
        conn.execute(LOOPS.insert().values(id=loop_id, **values))
    except sa.exc.IntegrityError:
        raise errors.DuplicateName(message) from None
    return loop_id


def get_loop(conn: sa.Connection, project_id: str, ref: str, *, lock: bool = False
             ) -> kind_rows.Loop:
    """The project's loop with this id or name, or LoopNotFound."""
    q = (sa.select(LOOPS).where(LOOPS.c.project_id == project_id,
                                sa.or_(LOOPS.c.id == ref, LOOPS.c.name == ref))
         .order_by(sa.desc(LOOPS.c.id == ref)).limit(1))
    r = conn.execute(q.with_for_update() if lock else q).first()
    if r is None:
        raise LoopNotFound(f"incremental-learning job '{ref}' does not exist")
    return kind_rows.Loop.of(r)


def loop_by_id(conn: sa.Connection, loop_id: str, *, lock: bool = False) -> kind_rows.Loop | None:
    q = sa.select(LOOPS).where(LOOPS.c.id == loop_id)
    r = conn.execute(q.with_for_update() if lock else q).first()
    return None if r is None else kind_rows.Loop.of(r)


def list_loops(conn: sa.Connection, project_id: str) -> list[kind_rows.Loop]:
    q = sa.select(LOOPS).where(LOOPS.c.project_id == project_id).order_by(LOOPS.c.created_at)
    return kind_rows.Loop.all(conn.execute(q))


def busy_loops(conn: sa.Connection) -> list[str]:
    """The loops the controller has something to do for: live ones, and any with a deploy
    still open."""
    live = sa.select(LOOPS.c.id).where(LOOPS.c.state.in_([s.value for s in states.LIVE]))
    deploying = sa.select(DEPLOYS.c.loop_id).where(DEPLOYS.c.state.in_(_OPEN_DEPLOYS))
    found = conn.execute(sa.union(live, deploying)).scalars()
    return sorted(str(i) for i in found)


def update_loop(conn: sa.Connection, loop_id: str, now: int, **values: Any) -> None:
    conn.execute(LOOPS.update().where(LOOPS.c.id == loop_id).values(updated_at=now, **values))


def move(conn: sa.Connection, loop: kind_rows.Loop, *, to: states.LoopState, now: int,
         event: str, level: str = "Info", **values: Any) -> bool:
    """Move the loop to `to` if `states.LOOP_TRANSITIONS` allows it from where it is, with
    its `event` (`values` are more columns to write)."""
    return kind_repo.transition(
        conn, LOOPS, {"id": loop.id}, to=to, transitions=states.LOOP_TRANSITIONS, kind=KIND,
        object_id=loop.id, now=now, message=event, level=level,
        values={"updated_at": now, **values})


def add_event(conn: sa.Connection, loop_id: str, now: int, message: str,
          level: str = "Info") -> None:
    kind_repo.add_event(conn, KIND, loop_id, now, message, level=level)


def delete_loop(conn: sa.Connection, loop_id: str) -> None:
    for table in (DEPLOYS, ROUNDS):
        conn.execute(table.delete().where(table.c.loop_id == loop_id))
    conn.execute(LOOPS.delete().where(LOOPS.c.id == loop_id))
    kind_repo.delete_events(conn, KIND, loop_id)


# --- rounds -------------------------------------------------------------------------------


def insert_round(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    row = dict(values)
    for key in ("trigger", "train_ranges"):
        if not isinstance(row[key], str):
            row[key] = json.dumps(row[key])
    conn.execute(ROUNDS.insert().values(**row))


def get_round(conn: sa.Connection, loop_id: str, number: int) -> kind_rows.Round | None:
    r = conn.execute(sa.select(ROUNDS).where(ROUNDS.c.loop_id == loop_id,
                                             ROUNDS.c.number == number)).first()
    return None if r is None else kind_rows.Round.of(r)


def rounds_of(conn: sa.Connection, loop_id: str) -> list[kind_rows.Round]:
    q = sa.select(ROUNDS).where(ROUNDS.c.loop_id == loop_id).order_by(ROUNDS.c.number)
    return kind_rows.Round.all(conn.execute(q))


def move_round(conn: sa.Connection, rnd: kind_rows.Round, *, to: states.RoundState,
               **values: Any) -> bool:
    """Move a round to `to` if `states.ROUND_TRANSITIONS` allows it from where it is (its
    loop's event says why)."""
    return kind_repo.move(conn, ROUNDS, {"loop_id": rnd.loop_id, "number": rnd.number},
                          to=to, transitions=states.ROUND_TRANSITIONS, values=values)


def update_round(conn: sa.Connection, loop_id: str, number: int, **values: Any) -> None:
    conn.execute(ROUNDS.update().where(ROUNDS.c.loop_id == loop_id, ROUNDS.c.number == number)
                 .values(**values))


# --- deploys ------------------------------------------------------------------------------


def insert_deploy(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    conn.execute(DEPLOYS.insert().values(**values))


def deploys_of(conn: sa.Connection, loop_id: str) -> list[kind_rows.Deploy]:
    q = sa.select(DEPLOYS).where(DEPLOYS.c.loop_id == loop_id).order_by(DEPLOYS.c.seq)
    return kind_rows.Deploy.all(conn.execute(q))


def get_deploy(conn: sa.Connection, loop_id: str, seq: int) -> kind_rows.Deploy | None:
    r = conn.execute(sa.select(DEPLOYS).where(DEPLOYS.c.loop_id == loop_id,
                                              DEPLOYS.c.seq == seq)).first()
    return None if r is None else kind_rows.Deploy.of(r)


def move_deploy(conn: sa.Connection, d: kind_rows.Deploy, *, to: states.DeployState,
                **values: Any) -> bool:
    """Move a deploy to `to` if `states.DEPLOY_TRANSITIONS` allows it from where it is."""
    return kind_repo.move(conn, DEPLOYS, {"loop_id": d.loop_id, "seq": d.seq}, to=to,
                          transitions=states.DEPLOY_TRANSITIONS, values=values)
