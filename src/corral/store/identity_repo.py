"""SQL for projects, users, memberships, access keys and tokens (callers own transactions).

Secrets never pass through here in clear: access keys arrive with their secret already
sealed by the server key, tokens as their hash.
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa

from corral.domain import errors, identity
from corral.store import rows, schema

USERS = schema.users
MEMBERS = schema.memberships
KEYS = schema.access_keys
TOKENS = schema.tokens
PROJECTS = schema.projects
# Built once: every API request asks it.
_PROJECT = sa.select(PROJECTS.c.id).where(PROJECTS.c.id == sa.bindparam("k_id"))


# --- projects ------------------------------------------------------------------------------


#: the meta key under which the default project's id is kept
DEFAULT_PROJECT_KEY = "default_project_id"


def ensure_default_project(conn: sa.Connection, now: int) -> str:
    """The id of the default project, created on first use (32 hex chars, as on ModelArts)."""
    found = default_project(conn)
    if found is not None:
        return found
    pid = secrets.token_hex(16)
    conn.execute(PROJECTS.insert().values(id=pid, name="default", created_at=now))
    conn.execute(schema.meta.insert().values(key=DEFAULT_PROJECT_KEY, value=pid))
    return pid


def default_project(conn: sa.Connection) -> str | None:
    """The id of the default project (None before the first server started)."""
    row = conn.execute(sa.select(schema.meta.c.value).where(
        schema.meta.c.key == DEFAULT_PROJECT_KEY)).first()
    return None if row is None else str(row[0])


def require_project(conn: sa.Connection, project_id: str) -> None:
    """ProjectNotFound unless a project has this id."""
    if conn.execute(_PROJECT, {"k_id": project_id}).first() is None:
        raise errors.ProjectNotFound(f"project '{project_id}' does not exist")


def create_project(conn: sa.Connection, name: str, now: int) -> str:
    identity.check_name("project", name)
    taken = identity.DuplicateName(f"a project named '{name}' already exists")
    if conn.execute(sa.select(PROJECTS.c.id).where(PROJECTS.c.name == name)).first():
        raise taken
    pid = secrets.token_hex(16)
    _insert(conn, PROJECTS.insert().values(id=pid, name=name, created_at=now), taken)
    return pid


def _insert(conn: sa.Connection, insert: sa.Insert, taken: errors.CorralError) -> None:
    """Insert a named row; `taken` when a concurrent insert took the name since it was
    checked (the caller's transaction is then rolled back as the error propagates)."""
    try:
        conn.execute(insert)
    except sa.exc.IntegrityError:
        raise taken from None


def find_project(conn: sa.Connection, id_or_name: str) -> rows.Project:
    row = conn.execute(sa.select(PROJECTS).where(sa.or_(PROJECTS.c.id == id_or_name,
                                                        PROJECTS.c.name == id_or_name))).first()
    if row is None:
        raise errors.ProjectNotFound(f"project '{id_or_name}' does not exist")
    return rows.Project.of(row)


def list_projects(conn: sa.Connection, only: set[str] | None = None) -> list[rows.Project]:
    q = sa.select(PROJECTS).order_by(PROJECTS.c.created_at, PROJECTS.c.name)
    if only is not None:
        q = q.where(PROJECTS.c.id.in_(sorted(only)))
    return rows.Project.all(conn.execute(q))


# --- users and memberships -----------------------------------------------------------------


def has_users(conn: sa.Connection) -> bool:
    return conn.execute(sa.select(USERS.c.id).limit(1)).first() is not None


def create_user(conn: sa.Connection, name: str, *, is_admin: bool, now: int) -> str:
    identity.check_name("user", name)
    taken = identity.DuplicateName(f"a user named '{name}' already exists")
    if conn.execute(sa.select(USERS.c.id).where(USERS.c.name == name)).first():
        raise taken
    uid = secrets.token_hex(16)
    _insert(conn, USERS.insert().values(id=uid, name=name, is_admin=is_admin, created_at=now),
            taken)
    return uid


def find_user(conn: sa.Connection, name: str) -> rows.User:
    """A user that is not disabled, by name, or NotFound."""
    row = conn.execute(sa.select(USERS).where(USERS.c.name == name,
                                              USERS.c.disabled_at.is_(None))).first()
    if row is None:
        raise errors.NotFound(f"user '{name}' does not exist")
    return rows.User.of(row)


def list_users(conn: sa.Connection) -> list[rows.User]:
    """The users that are not disabled."""
    return rows.User.all(conn.execute(sa.select(USERS).where(USERS.c.disabled_at.is_(None))
                                      .order_by(USERS.c.created_at, USERS.c.name)))


def disable_user(conn: sa.Connection, user_id: str, now: int) -> None:
    conn.execute(USERS.update().where(USERS.c.id == user_id).values(disabled_at=now))
    conn.execute(KEYS.update().where(KEYS.c.user_id == user_id, KEYS.c.revoked_at.is_(None))
                 .values(revoked_at=now))
    conn.execute(TOKENS.update().where(TOKENS.c.user_id == user_id,
                                       TOKENS.c.revoked_at.is_(None)).values(revoked_at=now))


def set_role(conn: sa.Connection, user_id: str, project_id: str, role: identity.Role,
             now: int) -> None:
    updated = conn.execute(MEMBERS.update().where(MEMBERS.c.user_id == user_id,
                                                  MEMBERS.c.project_id == project_id)
                           .values(role=role.value)).rowcount
    if not updated:
        conn.execute(MEMBERS.insert().values(user_id=user_id, project_id=project_id,
                                             role=role.value, created_at=now))


def remove_member(conn: sa.Connection, user_id: str, project_id: str, now: int) -> None:
    """Take a user out of a project; their keys for it are revoked with it."""
    conn.execute(MEMBERS.delete().where(MEMBERS.c.user_id == user_id,
                                        MEMBERS.c.project_id == project_id))
    conn.execute(KEYS.update().where(KEYS.c.user_id == user_id, KEYS.c.project_id == project_id,
                                     KEYS.c.revoked_at.is_(None)).values(revoked_at=now))


def roles_of(conn: sa.Connection, user_id: str) -> dict[str, identity.Role]:
    found = conn.execute(sa.select(MEMBERS.c.project_id, MEMBERS.c.role)
                         .where(MEMBERS.c.user_id == user_id))
    return {r.project_id: identity.Role(r.role) for r in found}


def members_of(conn: sa.Connection) -> dict[str, dict[str, str]]:
    """user id -> {project id: role}, for listings."""
    out: dict[str, dict[str, str]] = {}
    for r in conn.execute(sa.select(MEMBERS.c.user_id, MEMBERS.c.project_id, MEMBERS.c.role)):
        out.setdefault(r.user_id, {})[r.project_id] = r.role
    return out


def principal(conn: sa.Connection, user_id: str, *, key_project: str | None = None,
              credential: str = "") -> identity.Principal | None:
    """The principal of a live user, or None when the user is gone or disabled."""
    row = conn.execute(sa.select(USERS).where(USERS.c.id == user_id,
                                              USERS.c.disabled_at.is_(None))).first()
    if row is None:
        return None
    user = rows.User.of(row)
    return identity.Principal(user_id=user.id, user_name=user.name, is_admin=user.is_admin,
                              roles=roles_of(conn, user.id), key_project=key_project,
                              credential=credential)


# --- access keys ---------------------------------------------------------------------------


def create_key(conn: sa.Connection, *, access_key: str, secret_sealed: str, user_id: str,
               project_id: str, description: str, now: int) -> None:
    conn.execute(KEYS.insert().values(access_key=access_key, secret_sealed=secret_sealed,
                                      user_id=user_id, project_id=project_id,
                                      description=description, created_at=now))


def live_key(conn: sa.Connection, access_key: str) -> rows.LiveKey | None:
    """The access key, if it works (not revoked, its user not disabled)."""
    row = conn.execute(
        sa.select(KEYS.c.access_key, KEYS.c.secret_sealed, KEYS.c.project_id, KEYS.c.user_id)
        .join(USERS, USERS.c.id == KEYS.c.user_id)
        .where(KEYS.c.access_key == access_key, KEYS.c.revoked_at.is_(None),
               USERS.c.disabled_at.is_(None))).first()
    return None if row is None else rows.LiveKey.of(row)


def list_keys(conn: sa.Connection, project_id: str,
              user_id: str | None) -> list[rows.ListedKey]:
    """The project's access keys (only `user_id`'s unless None), revoked ones too."""
    q = (sa.select(KEYS.c.access_key, KEYS.c.project_id, KEYS.c.description, KEYS.c.created_at,
                   KEYS.c.revoked_at, USERS.c.name.label("user_name"))
         .join(USERS, USERS.c.id == KEYS.c.user_id).where(KEYS.c.project_id == project_id)
         .order_by(KEYS.c.created_at))
    if user_id is not None:
        q = q.where(KEYS.c.user_id == user_id)
    return rows.ListedKey.all(conn.execute(q))


def key_row(conn: sa.Connection, project_id: str, access_key: str) -> rows.AccessKey:
    """An access key of the project, revoked or not, or NotFound."""
    row = conn.execute(sa.select(KEYS).where(KEYS.c.access_key == access_key,
                                             KEYS.c.project_id == project_id)).first()
    if row is None:
        raise errors.NotFound(f"access key '{access_key}' does not exist")
    return rows.AccessKey.of(row)


def revoke_key(conn: sa.Connection, access_key: str, now: int) -> None:
    conn.execute(KEYS.update().where(KEYS.c.access_key == access_key,
                                     KEYS.c.revoked_at.is_(None)).values(revoked_at=now))


# --- tokens --------------------------------------------------------------------------------


def create_token(conn: sa.Connection, *, user_id: str, token_hash: str, description: str,
                 now: int, expires_at: int | None = None, project_id: str | None = None) -> str:
    tid = secrets.token_hex(8)
    conn.execute(TOKENS.insert().values(id=tid, user_id=user_id, token_hash=token_hash,
                                        description=description, created_at=now,
                                        expires_at=expires_at, project_id=project_id))
    return tid


def live_token(conn: sa.Connection, token_hash: str, now: int) -> rows.LiveToken | None:
    """The token with this hash, if it is neither revoked nor expired."""
    row = conn.execute(
        sa.select(TOKENS.c.id, TOKENS.c.user_id, TOKENS.c.project_id, TOKENS.c.expires_at)
        .where(TOKENS.c.token_hash == token_hash, TOKENS.c.revoked_at.is_(None),
               sa.or_(TOKENS.c.expires_at.is_(None), TOKENS.c.expires_at > now))).first()
    return None if row is None else rows.LiveToken.of(row)


def list_tokens(conn: sa.Connection, user_id: str) -> list[rows.ListedToken]:
    """The user's tokens, revoked and expired ones too, oldest first."""
    return rows.ListedToken.all(conn.execute(
        sa.select(TOKENS.c.id, TOKENS.c.description, TOKENS.c.project_id,
                  TOKENS.c.created_at, TOKENS.c.expires_at, TOKENS.c.revoked_at)
        .where(TOKENS.c.user_id == user_id).order_by(TOKENS.c.created_at)))


def revoke_token(conn: sa.Connection, user_id: str, token_id: str, now: int) -> None:
    done = conn.execute(TOKENS.update().where(TOKENS.c.id == token_id,
                                              TOKENS.c.user_id == user_id,
                                              TOKENS.c.revoked_at.is_(None))
                        .values(revoked_at=now)).rowcount
    if not done:
        raise errors.NotFound(f"token '{token_id}' does not exist or is already revoked")
