"""SQL for projects, users, memberships, access keys and tokens (callers own transactions).

Secrets never pass through here in clear: access keys arrive with their secret already
sealed by the server key, tokens as their hash.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, identity
from corral.store import schema

U = schema.users
MS = schema.memberships
K = schema.access_keys
TK = schema.tokens
P = schema.projects


@dataclasses.dataclass(frozen=True)
class KeyRecord:
    """An access key that is live (not revoked, its user not disabled)."""

    access_key: str
    secret_sealed: str
    project_id: str
    user_id: str


# --- projects ------------------------------------------------------------------------------


def create_project(conn: sa.Connection, name: str, now: int) -> str:
    identity.check_name("project", name)
    if conn.execute(sa.select(P.c.id).where(P.c.name == name)).first():
        raise errors.DuplicateName(f"a project named '{name}' already exists")
    pid = secrets.token_hex(16)
    conn.execute(P.insert().values(id=pid, name=name, created_at=now))
    return pid


def find_project(conn: sa.Connection, id_or_name: str) -> Any:
    row = conn.execute(sa.select(P).where(sa.or_(P.c.id == id_or_name,
                                                 P.c.name == id_or_name))).first()
    if row is None:
        raise errors.ProjectNotFound(f"project '{id_or_name}' does not exist")
    return row


def list_projects(conn: sa.Connection, only: set[str] | None = None) -> list[Any]:
    q = sa.select(P).order_by(P.c.created_at, P.c.name)
    if only is not None:
        q = q.where(P.c.id.in_(sorted(only)))
    return list(conn.execute(q))


# --- users and memberships -----------------------------------------------------------------


def has_users(conn: sa.Connection) -> bool:
    return conn.execute(sa.select(U.c.id).limit(1)).first() is not None


def create_user(conn: sa.Connection, name: str, *, is_admin: bool, now: int) -> str:
    identity.check_name("user", name)
    if conn.execute(sa.select(U.c.id).where(U.c.name == name)).first():
        raise errors.DuplicateName(f"a user named '{name}' already exists")
    uid = secrets.token_hex(16)
    conn.execute(U.insert().values(id=uid, name=name, is_admin=is_admin, created_at=now))
    return uid


def find_user(conn: sa.Connection, name: str) -> Any:
    row = conn.execute(sa.select(U).where(U.c.name == name, U.c.disabled_at.is_(None))).first()
    if row is None:
        raise errors.NotFound(f"user '{name}' does not exist")
    return row


def list_users(conn: sa.Connection) -> list[Any]:
    return list(conn.execute(sa.select(U).where(U.c.disabled_at.is_(None))
                             .order_by(U.c.created_at, U.c.name)))


def disable_user(conn: sa.Connection, user_id: str, now: int) -> None:
    conn.execute(U.update().where(U.c.id == user_id).values(disabled_at=now))
    conn.execute(K.update().where(K.c.user_id == user_id, K.c.revoked_at.is_(None))
                 .values(revoked_at=now))
    conn.execute(TK.update().where(TK.c.user_id == user_id, TK.c.revoked_at.is_(None))
                 .values(revoked_at=now))


def set_role(conn: sa.Connection, user_id: str, project_id: str, role: identity.Role,
             now: int) -> None:
    updated = conn.execute(MS.update().where(MS.c.user_id == user_id,
                                             MS.c.project_id == project_id)
                           .values(role=role.value)).rowcount
    if not updated:
        conn.execute(MS.insert().values(user_id=user_id, project_id=project_id,
                                        role=role.value, created_at=now))


def remove_member(conn: sa.Connection, user_id: str, project_id: str, now: int) -> None:
    """Take a user out of a project; their keys for it are revoked with it."""
    conn.execute(MS.delete().where(MS.c.user_id == user_id, MS.c.project_id == project_id))
    conn.execute(K.update().where(K.c.user_id == user_id, K.c.project_id == project_id,
                                  K.c.revoked_at.is_(None)).values(revoked_at=now))


def roles_of(conn: sa.Connection, user_id: str) -> dict[str, identity.Role]:
    rows = conn.execute(sa.select(MS.c.project_id, MS.c.role).where(MS.c.user_id == user_id))
    return {r.project_id: identity.Role(r.role) for r in rows}


def members_of(conn: sa.Connection) -> dict[str, dict[str, str]]:
    """user id -> {project id: role}, for listings."""
    out: dict[str, dict[str, str]] = {}
    for r in conn.execute(sa.select(MS.c.user_id, MS.c.project_id, MS.c.role)):
        out.setdefault(r.user_id, {})[r.project_id] = r.role
    return out


def principal(conn: sa.Connection, user_id: str, *, key_project: str | None = None,
              credential: str = "") -> identity.Principal | None:
    """The principal of a live user, or None when the user is gone or disabled."""
    user = conn.execute(sa.select(U).where(U.c.id == user_id,
                                           U.c.disabled_at.is_(None))).first()
    if user is None:
        return None
    return identity.Principal(user_id=user.id, user_name=user.name, is_admin=user.is_admin,
                              roles=roles_of(conn, user.id), key_project=key_project,
                              credential=credential)


# --- access keys ---------------------------------------------------------------------------


def create_key(conn: sa.Connection, *, access_key: str, secret_sealed: str, user_id: str,
               project_id: str, description: str, now: int) -> None:
    conn.execute(K.insert().values(access_key=access_key, secret_sealed=secret_sealed,
                                   user_id=user_id, project_id=project_id,
                                   description=description, created_at=now))


def live_key(conn: sa.Connection, access_key: str) -> KeyRecord | None:
    row = conn.execute(
        sa.select(K.c.access_key, K.c.secret_sealed, K.c.project_id, K.c.user_id)
        .join(U, U.c.id == K.c.user_id)
        .where(K.c.access_key == access_key, K.c.revoked_at.is_(None),
               U.c.disabled_at.is_(None))).first()
    return None if row is None else KeyRecord(*row)


def list_keys(conn: sa.Connection, project_id: str, user_id: str | None) -> list[Any]:
    q = (sa.select(K.c.access_key, K.c.project_id, K.c.description, K.c.created_at,
                   K.c.revoked_at, U.c.name.label("user_name"))
         .join(U, U.c.id == K.c.user_id).where(K.c.project_id == project_id)
         .order_by(K.c.created_at))
    if user_id is not None:
        q = q.where(K.c.user_id == user_id)
    return list(conn.execute(q))


def key_row(conn: sa.Connection, project_id: str, access_key: str) -> Any:
    row = conn.execute(sa.select(K).where(K.c.access_key == access_key,
                                          K.c.project_id == project_id)).first()
    if row is None:
        raise errors.NotFound(f"access key '{access_key}' does not exist")
    return row


def revoke_key(conn: sa.Connection, access_key: str, now: int) -> None:
    conn.execute(K.update().where(K.c.access_key == access_key, K.c.revoked_at.is_(None))
                 .values(revoked_at=now))


# --- tokens --------------------------------------------------------------------------------


def create_token(conn: sa.Connection, *, user_id: str, token_hash: str, description: str,
                 now: int, expires_at: int | None = None, project_id: str | None = None) -> str:
    tid = secrets.token_hex(8)
    conn.execute(TK.insert().values(id=tid, user_id=user_id, token_hash=token_hash,
                                    description=description, created_at=now,
                                    expires_at=expires_at, project_id=project_id))
    return tid


def live_token(conn: sa.Connection, token_hash: str, now: int) -> Any:
    """(id, user_id, project_id, expires_at) of a token that is neither revoked nor expired,
    or None."""
    row = conn.execute(
        sa.select(TK.c.id, TK.c.user_id, TK.c.project_id, TK.c.expires_at).where(
            TK.c.token_hash == token_hash, TK.c.revoked_at.is_(None),
            sa.or_(TK.c.expires_at.is_(None), TK.c.expires_at > now))).first()
    return row


def list_tokens(conn: sa.Connection, user_id: str) -> list[Any]:
    return list(conn.execute(
        sa.select(TK.c.id, TK.c.description, TK.c.project_id, TK.c.created_at,
                  TK.c.expires_at, TK.c.revoked_at)
        .where(TK.c.user_id == user_id).order_by(TK.c.created_at)))


def revoke_token(conn: sa.Connection, user_id: str, token_id: str, now: int) -> None:
    done = conn.execute(TK.update().where(TK.c.id == token_id, TK.c.user_id == user_id,
                                          TK.c.revoked_at.is_(None))
                        .values(revoked_at=now)).rowcount
    if not done:
        raise errors.NotFound(f"token '{token_id}' does not exist or is already revoked")
