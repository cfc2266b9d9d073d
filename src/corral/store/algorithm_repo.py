"""SQL for saved algorithms (the `algorithms` table).

Functions run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, values
from corral.store import rows, schema

ALGORITHMS = schema.algorithms
#: what a list may be sorted by
SORTS = {"create_time": ALGORITHMS.c.create_time, "update_time": ALGORITHMS.c.update_time,
         "name": ALGORITHMS.c.name}


@values.value
class Algorithm(rows.FromRow):
    """A saved algorithm (the `algorithms` table)."""

    id: str
    project_id: str
    name: str
    description: str
    user_name: str
    body: str  #: the AlgorithmBody as JSON
    create_time: int
    update_time: int


class AlgorithmNotFound(errors.NotFound):
    """The algorithm does not exist."""


class DuplicateAlgorithm(errors.DuplicateName):
    """An algorithm with this name already exists."""


def insert(conn: sa.Connection, values: Mapping[str, Any]) -> str:
    """Insert an algorithm (its id is made here); DuplicateAlgorithm when the name is
    taken in its project."""
    _free(conn, values["project_id"], values["name"])
    algorithm_id = str(uuid.uuid4())
    try:
        with conn.begin_nested():
            conn.execute(ALGORITHMS.insert().values(id=algorithm_id, **values))
    except sa.exc.IntegrityError:  # taken by a concurrent insert since the check
        raise _duplicate(values["name"]) from None
    return algorithm_id


def update(conn: sa.Connection, algorithm_id: str, values: Mapping[str, Any]) -> None:
    """Replace an algorithm's name, description and body."""
    found = get(conn, values["project_id"], algorithm_id)
    if values["name"] != found.name:
        _free(conn, found.project_id, values["name"])
    try:
        with conn.begin_nested():
            conn.execute(ALGORITHMS.update().where(ALGORITHMS.c.id == algorithm_id)
                         .values(**values))
    except sa.exc.IntegrityError:
        raise _duplicate(values["name"]) from None


def get(conn: sa.Connection, project_id: str, algorithm_id: str) -> Algorithm:
    """The project's algorithm with this id, or AlgorithmNotFound (another project's
    too: the two answer alike)."""
    r = conn.execute(sa.select(ALGORITHMS).where(ALGORITHMS.c.id == algorithm_id,
                                                 ALGORITHMS.c.project_id == project_id)).first()
    if r is None:
        raise AlgorithmNotFound(f"algorithm '{algorithm_id}' does not exist")
    return Algorithm.of(r)


def by_name(conn: sa.Connection, project_id: str, name: str) -> Algorithm | None:
    r = conn.execute(sa.select(ALGORITHMS).where(ALGORITHMS.c.project_id == project_id,
                                                 ALGORITHMS.c.name == name)).first()
    return None if r is None else Algorithm.of(r)


def delete(conn: sa.Connection, project_id: str, algorithm_id: str) -> None:
    get(conn, project_id, algorithm_id)
    conn.execute(ALGORITHMS.delete().where(ALGORITHMS.c.id == algorithm_id))


def page(conn: sa.Connection, project_id: str, *, offset: int, limit: int, sort_by: str,
         order: str, name_like: str | None) -> tuple[int, int, list[Algorithm]]:
    """(every algorithm of the project, those matching `name_like`, the page of those
    from row `offset`)."""
    mine = ALGORITHMS.c.project_id == project_id
    total = conn.execute(sa.select(sa.func.count()).where(mine)).scalar_one()
    where = [mine]
    if name_like:
        escaped = name_like.lower().replace("\\", "\\\\").replace("%", "\\%") \
            .replace("_", "\\_")
        where.append(sa.func.lower(ALGORITHMS.c.name).like(f"%{escaped}%", escape="\\"))
    count = conn.execute(sa.select(sa.func.count()).where(*where)).scalar_one()
    key = SORTS[sort_by]
    keys = (key.desc(), ALGORITHMS.c.id.desc()) if order == "desc" else (
        key.asc(), ALGORITHMS.c.id.asc())
    found = Algorithm.all(conn.execute(sa.select(ALGORITHMS).where(*where).order_by(*keys)
                                       .offset(offset).limit(limit)))
    return int(total), int(count), found


def _free(conn: sa.Connection, project_id: str, name: str) -> None:
    if by_name(conn, project_id, name) is not None:
        raise _duplicate(name)


def _duplicate(name: str) -> DuplicateAlgorithm:
    return DuplicateAlgorithm(f"an algorithm named '{name}' already exists in the project")
