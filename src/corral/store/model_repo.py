"""SQL for the model registry: models, their numbered versions and movable aliases.

A version's number is never given twice, even after it is deleted (each model counts its
own). An alias moved through `move_alias` leaves a row in its history (from which version
to which, who, when, why), so that what it named at any time has an answer. Functions run
on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.store import rows, schema

MODELS = schema.models
VERSIONS = schema.model_versions
ALIASES = schema.model_aliases
HISTORY = schema.model_alias_history


class ModelNotFound(errors.NotFound):
    """The model does not exist."""

    error_code = "ModelArts.2775"


def get(conn: sa.Connection, project_id: str, name: str) -> rows.Model:
    """The project's model of this name, or ModelNotFound."""
    found = _find(conn, project_id, name)
    if found is None:
        raise ModelNotFound(f"model '{name}' does not exist")
    return found


def ensure(conn: sa.Connection, project_id: str, name: str, now: int) -> rows.Model:
    """The project's model of this name, made (with no version yet) if there is none."""
    found = _find(conn, project_id, name)
    if found is not None:
        return found
    conn.execute(MODELS.insert().values(id=str(uuid.uuid4()), project_id=project_id,
                                        name=name, next_version=1, created_at=now,
                                        updated_at=now))
    return get(conn, project_id, name)


def _find(conn: sa.Connection, project_id: str, name: str) -> rows.Model | None:
    row = conn.execute(sa.select(MODELS).where(MODELS.c.project_id == project_id,
                                               MODELS.c.name == name)).first()
    return None if row is None else rows.Model.of(row)


def take_number(conn: sa.Connection, model_id: str, now: int) -> int:
    conn.execute(MODELS.update().where(MODELS.c.id == model_id)
                 .values(next_version=MODELS.c.next_version + 1, updated_at=now))
    return int(conn.execute(sa.select(MODELS.c.next_version).where(MODELS.c.id == model_id))
               .scalar_one()) - 1


def add_version(conn: sa.Connection, values: Mapping[str, Any]) -> None:
    """Insert a version: `values` are its columns, with metrics, parameters and inputs as
    dicts and the dataset versions read as a list (stored as JSON)."""
    row = dict(values)
    for key in ("metrics", "parameters", "inputs"):
        row[key] = json.dumps(row.get(key) or {})
    row["datasets"] = json.dumps(row.get("datasets") or [])
    conn.execute(VERSIONS.insert().values(**row))


def registered_from(conn: sa.Connection, job_id: str) -> rows.RegisteredVersion | None:
    """The model version a job was registered as, if it was."""
    q = (sa.select(VERSIONS, MODELS.c.name.label("model_name"))
         .join(MODELS, MODELS.c.id == VERSIONS.c.model_id)
         .where(VERSIONS.c.source_job_id == job_id))
    row = conn.execute(q).first()
    return None if row is None else rows.RegisteredVersion.of(row)


def list_models(conn: sa.Connection, project_id: str) -> list[rows.Model]:
    return rows.Model.all(conn.execute(sa.select(MODELS).where(MODELS.c.project_id == project_id)
                                       .order_by(MODELS.c.name)))


def versions(conn: sa.Connection, model_id: str) -> list[rows.ModelVersion]:
    """The model's versions, oldest first."""
    return rows.ModelVersion.all(conn.execute(
        sa.select(VERSIONS).where(VERSIONS.c.model_id == model_id)
        .order_by(VERSIONS.c.version)))


def aliases(conn: sa.Connection, model_id: str) -> dict[str, int]:
    """alias -> the version number it names."""
    q = (sa.select(ALIASES.c.alias, ALIASES.c.version).where(ALIASES.c.model_id == model_id)
         .order_by(ALIASES.c.alias))
    return {r.alias: int(r.version) for r in conn.execute(q)}


def resolve(conn: sa.Connection, model: rows.Model, version: int | None = None,
            alias: str | None = None) -> rows.ModelVersion:
    """A version of `model` by number or alias; the latest when given neither."""
    if alias is not None:
        number = aliases(conn, model.id).get(alias)
        if number is None:
            raise ModelNotFound(f"model '{model.name}' has no alias '{alias}'")
        version = number
    q = sa.select(VERSIONS).where(VERSIONS.c.model_id == model.id)
    q = (q.where(VERSIONS.c.version == version) if version is not None
         else q.order_by(VERSIONS.c.version.desc()).limit(1))
    row = conn.execute(q).first()
    if row is None:
        what = f"version {version}" if version is not None else "any version"
        raise ModelNotFound(f"model '{model.name}' has no {what}")
    return rows.ModelVersion.of(row)


def set_alias(conn: sa.Connection, model_id: str, alias: str, version: int, now: int, *,
              user_name: str = "", reason: str = "set by hand") -> None:
    """Point `alias` at `version`, with a row in its history."""
    move_alias(conn, model_id, alias, version, now=now, user_name=user_name, reason=reason)


def drop_alias(conn: sa.Connection, model_id: str, alias: str, *, now: int,
               user_name: str = "", reason: str = "removed by hand") -> bool:
    """Remove `alias`, with a row in its history; False when the model had no such
    alias."""
    if alias not in aliases(conn, model_id):
        return False
    move_alias(conn, model_id, alias, None, now=now, user_name=user_name, reason=reason)
    return True


def move_alias(conn: sa.Connection, model_id: str, alias: str, version: int | None, *,
               now: int, user_name: str, reason: str) -> int | None:
    """Point `alias` at `version` (remove it for None), with a row in its history; returns
    the version it named before."""
    before = aliases(conn, model_id).get(alias)
    if version is None:
        _remove_alias(conn, model_id, alias)
    else:
        key = (ALIASES.c.model_id == model_id, ALIASES.c.alias == alias)
        if not conn.execute(ALIASES.update().where(*key)
                            .values(version=version, updated_at=now)).rowcount:
            conn.execute(ALIASES.insert().values(model_id=model_id, alias=alias,
                                                 version=version, updated_at=now))
    conn.execute(HISTORY.insert().values(model_id=model_id, alias=alias, from_version=before,
                                         to_version=version, time=now, user_name=user_name,
                                         reason=reason))
    return before


def _remove_alias(conn: sa.Connection, model_id: str, alias: str) -> None:
    conn.execute(ALIASES.delete().where(ALIASES.c.model_id == model_id,
                                        ALIASES.c.alias == alias))


def alias_history(conn: sa.Connection, model_id: str,
                  alias: str | None = None) -> list[rows.AliasMove]:
    """The moves of the model's aliases (or of one), oldest first."""
    q = sa.select(HISTORY).where(HISTORY.c.model_id == model_id)
    if alias is not None:
        q = q.where(HISTORY.c.alias == alias)
    return rows.AliasMove.all(conn.execute(q.order_by(HISTORY.c.id)))


def alias_at(conn: sa.Connection, model_id: str, alias: str, time: int) -> int | None:
    """The version `alias` named at `time`, as its history says (None: it named none)."""
    q = (sa.select(HISTORY.c.to_version)
         .where(HISTORY.c.model_id == model_id, HISTORY.c.alias == alias,
                HISTORY.c.time <= time)
         .order_by(HISTORY.c.id.desc()).limit(1))
    found = conn.execute(q).first()
    return None if found is None or found[0] is None else int(found[0])


def delete_version(conn: sa.Connection, model_id: str, version: int, *, now: int,
                   user_name: str = "") -> None:
    """Delete a version; the aliases naming it go too, in their history."""
    for alias, named in aliases(conn, model_id).items():
        if named == version:
            move_alias(conn, model_id, alias, None, now=now, user_name=user_name,
                       reason=f"version {version} deleted")
    conn.execute(ALIASES.delete().where(ALIASES.c.model_id == model_id,
                                        ALIASES.c.version == version))
    conn.execute(VERSIONS.delete().where(VERSIONS.c.model_id == model_id,
                                         VERSIONS.c.version == version))


def delete_model(conn: sa.Connection, model_id: str) -> None:
    for table in (HISTORY, ALIASES, VERSIONS):
        conn.execute(table.delete().where(table.c.model_id == model_id))
    conn.execute(MODELS.delete().where(MODELS.c.id == model_id))
