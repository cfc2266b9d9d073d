"""SQL for the model registry: models, their numbered versions and movable aliases.

A version's number is never given twice, even after it is deleted (each model counts its
own). Functions run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.store import schema

M = schema.models
MV = schema.model_versions
MA = schema.model_aliases


class ModelNotFound(errors.NotFound):
    """The model does not exist."""

    error_code = "ModelArts.2775"


def get(conn: sa.Connection, project_id: str, name: str) -> sa.Row[Any]:
    row = conn.execute(sa.select(M).where(M.c.project_id == project_id,
                                          M.c.name == name)).first()
    if row is None:
        raise ModelNotFound(f"model '{name}' does not exist")
    return row


def ensure(conn: sa.Connection, project_id: str, name: str, now: int) -> sa.Row[Any]:
    row = conn.execute(sa.select(M).where(M.c.project_id == project_id,
                                          M.c.name == name)).first()
    if row is not None:
        return row
    conn.execute(M.insert().values(id=str(uuid.uuid4()), project_id=project_id, name=name,
                                   next_version=1, created_at=now, updated_at=now))
    return get(conn, project_id, name)


def take_number(conn: sa.Connection, model_id: str, now: int) -> int:
    conn.execute(M.update().where(M.c.id == model_id)
                 .values(next_version=M.c.next_version + 1, updated_at=now))
    return int(conn.execute(sa.select(M.c.next_version).where(M.c.id == model_id))
               .scalar_one()) - 1


def add_version(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    row = dict(values)
    for key in ("metrics", "parameters", "inputs"):
        row[key] = json.dumps(row.get(key) or {})
    conn.execute(MV.insert().values(**row))


def registered_from(conn: sa.Connection, job_id: str) -> sa.Row[Any] | None:
    """The model version a job was registered as, if it was."""
    q = (sa.select(MV, M.c.name.label("model_name")).join(M, M.c.id == MV.c.model_id)
         .where(MV.c.source_job_id == job_id))
    return conn.execute(q).first()


def list_models(conn: sa.Connection, project_id: str) -> list[sa.Row[Any]]:
    return list(conn.execute(sa.select(M).where(M.c.project_id == project_id)
                             .order_by(M.c.name)))


def versions(conn: sa.Connection, model_id: str) -> list[sa.Row[Any]]:
    return list(conn.execute(sa.select(MV).where(MV.c.model_id == model_id)
                             .order_by(MV.c.version)))


def aliases(conn: sa.Connection, model_id: str) -> dict[str, int]:
    q = sa.select(MA.c.alias, MA.c.version).where(MA.c.model_id == model_id).order_by(MA.c.alias)
    return {r.alias: int(r.version) for r in conn.execute(q)}


def resolve(conn: sa.Connection, model: Any, version: int | None = None,
            alias: str | None = None) -> sa.Row[Any]:
    """A version of `model` by number or alias; the latest when given neither."""
    if alias is not None:
        number = aliases(conn, model.id).get(alias)
        if number is None:
            raise ModelNotFound(f"model '{model.name}' has no alias '{alias}'")
        version = number
    q = sa.select(MV).where(MV.c.model_id == model.id)
    q = (q.where(MV.c.version == version) if version is not None
         else q.order_by(MV.c.version.desc()).limit(1))
    row = conn.execute(q).first()
    if row is None:
        what = f"version {version}" if version is not None else "any version"
        raise ModelNotFound(f"model '{model.name}' has no {what}")
    return row


def set_alias(conn: sa.Connection, model_id: str, alias: str, version: int, now: int) -> None:
    key = (MA.c.model_id == model_id, MA.c.alias == alias)
    if conn.execute(MA.update().where(*key).values(version=version, updated_at=now)).rowcount:
        return
    conn.execute(MA.insert().values(model_id=model_id, alias=alias, version=version,
                                    updated_at=now))


def drop_alias(conn: sa.Connection, model_id: str, alias: str) -> bool:
    res = conn.execute(MA.delete().where(MA.c.model_id == model_id, MA.c.alias == alias))
    return bool(res.rowcount)


def delete_version(conn: sa.Connection, model_id: str, version: int) -> None:
    conn.execute(MA.delete().where(MA.c.model_id == model_id, MA.c.version == version))
    conn.execute(MV.delete().where(MV.c.model_id == model_id, MV.c.version == version))


def delete_model(conn: sa.Connection, model_id: str) -> None:
    for table in (MA, MV):
        conn.execute(table.delete().where(table.c.model_id == model_id))
    conn.execute(M.delete().where(M.c.id == model_id))
