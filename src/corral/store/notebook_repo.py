"""The notebooks table: a notebook's row, its state changes (guarded, with events), and
the lists the API and the controller read."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, notebooks
from corral.store import job_repo, kind_repo, kind_rows, kind_tables, schema

T = kind_tables.notebooks


class NotebookNotFound(errors.NotFound):
    """The notebook does not exist."""


def new_id() -> str:
    return str(uuid.uuid4())


def insert(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    conn.execute(T.insert(), dict(values))


def get(conn: sa.Connection, project_id: str, notebook_id: str) -> kind_rows.Notebook:
    """The project's notebook, or NotebookNotFound (also for another project's)."""
    found = conn.execute(sa.select(T).where(T.c.id == notebook_id,
                                            T.c.project_id == project_id)).first()
    if found is None:
        raise NotebookNotFound(f"notebook '{notebook_id}' does not exist")
    return kind_rows.Notebook.of(found)


def by_id(conn: sa.Connection, notebook_id: str) -> kind_rows.Notebook | None:
    found = conn.execute(sa.select(T).where(T.c.id == notebook_id)).first()
    return kind_rows.Notebook.of(found) if found is not None else None


def live(conn: sa.Connection) -> list[kind_rows.Notebook]:
    """Every notebook with a session, or getting or losing one (the controller's work)."""
    q = sa.select(T).where(T.c.state.in_(sorted(notebooks.LIVE))).order_by(T.c.created_at)
    return kind_rows.Notebook.all(conn.execute(q))


def search(conn: sa.Connection, project_id: str, *, name: str | None = None,
           states: Collection[str] = (), flavor: str | None = None,
           image_id: str | None = None, owner: str | None = None, offset: int = 0,
           limit: int = 10, sort_key: str = "created_at",
           descending: bool = True) -> tuple[int, list[kind_rows.Notebook]]:
    """(how many notebooks match, the page asked for)."""
    where = [T.c.project_id == project_id]
    if name:
        where.append(T.c.name.like(f"%{job_repo.escape_like(name)}%", escape="\\"))
    if states:
        where.append(T.c.state.in_(sorted(states)))
    for column, value in ((T.c.flavor_id, flavor), (T.c.image_id, image_id),
                          (T.c.user_name, owner)):
        if value:
            where.append(column == value)
    total = conn.execute(sa.select(sa.func.count()).select_from(T).where(*where)).scalar_one()
    key = T.c[sort_key]
    order = [key.desc() if descending else key.asc(), T.c.id]
    q = sa.select(T).where(*where).order_by(*order).offset(offset).limit(limit)
    return int(total), kind_rows.Notebook.all(conn.execute(q))


def transition(conn: sa.Connection, nb: kind_rows.Notebook, *, to: notebooks.State, now: int,
               message: str, level: str = "Info", unchanged: bool = False,
               **values: Any) -> bool:
    """Move `nb` to state `to` from any state `notebooks.TRANSITIONS` allows it from, with
    its event; its session must still be the one read (a stale decision is dropped).
    `unchanged`: a compare-and-set, from the state `nb` was read in only."""
    return kind_repo.transition(
        conn, T, {"id": nb.id, "session": nb.session}, to=to,
        transitions=notebooks.TRANSITIONS, was=notebooks.State(nb.state) if unchanged else None,
        kind=notebooks.KIND, object_id=nb.id, now=now, message=message, level=level,
        values={**values, "updated_at": now})


def update(conn: sa.Connection, nb: kind_rows.Notebook, now: int, **values: Any) -> bool:
    """Change fields of `nb` while its state and session are the ones read."""
    q = (T.update().where(T.c.id == nb.id, T.c.state == nb.state, T.c.session == nb.session)
         .values(**values, updated_at=now))
    return bool(conn.execute(q).rowcount == 1)


def touch(conn: sa.Connection, notebook_id: str, now: int) -> None:
    """A change was made through the proxy (idle leases count it as activity)."""
    conn.execute(T.update().where(T.c.id == notebook_id).values(last_request_at=now))


def delete(conn: sa.Connection, notebook_id: str) -> None:
    kind_repo.delete_events(conn, notebooks.KIND, notebook_id)
    conn.execute(T.delete().where(T.c.id == notebook_id))


def last_gpu_use(conn: sa.Connection, job_id: str, since: int) -> int | None:
    """The latest sample since `since` in which a task of the job used its GPUs."""
    s = schema.task_metrics
    q = (sa.select(sa.func.max(s.c.time))
         .where(s.c.job_id == job_id, s.c.time >= since,
                s.c.gpu_util >= notebooks.GPU_BUSY_PERCENT))
    found = conn.execute(q).scalar_one_or_none()
    return int(found) if found is not None else None
