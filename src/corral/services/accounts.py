"""Issuing credentials: the first start's admin, access keys and bearer tokens; and the
changes to projects, users, memberships, keys and tokens that the API makes.

`issue_key`, `issue_token` and `bootstrap` run in the caller's transaction and return the
secret exactly once; what is stored is the secret key sealed with the server key, or the
token's hash. The functions below them open their own: those that change who may do what
through `Runtime.credentials_change`, so that credentials verified before are forgotten.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from corral.domain import errors, identity
from corral.services import runtime, secretbox
from corral.store import identity_repo, rows

ADMIN_NAME = "admin"


@dataclasses.dataclass(frozen=True)
class IssuedKey:
    access_key: str
    secret_key: str
    project_id: str


def issue_key(conn: sa.Connection, box: secretbox.SecretBox, *, user_id: str, project_id: str,
              description: str, now: int) -> IssuedKey:
    ak, sk = secretbox.new_access_key(), secretbox.new_secret_key()
    identity_repo.create_key(conn, access_key=ak, secret_sealed=box.encrypt(sk),
                             user_id=user_id, project_id=project_id, description=description,
                             now=now)
    return IssuedKey(access_key=ak, secret_key=sk, project_id=project_id)


def issue_token(conn: sa.Connection, *, user_id: str, description: str, now: int,
                expires_at: int | None = None, project_id: str | None = None
                ) -> tuple[str, str]:
    """(token id, token); a token with a project reaches that project only."""
    token = secretbox.new_token()
    tid = identity_repo.create_token(conn, user_id=user_id,
                                     token_hash=secretbox.hash_token(token),
                                     description=description, now=now, expires_at=expires_at,
                                     project_id=project_id)
    return tid, token


@dataclasses.dataclass(frozen=True)
class Admin:
    """The first start's platform admin and its credentials, told once."""

    user: str
    token: str
    key: IssuedKey


def bootstrap(conn: sa.Connection, box: secretbox.SecretBox, *, project_id: str, now: int
              ) -> Admin | None:
    """On a platform with no user yet: a platform admin, admin of the default project, with
    a token and a key pair (else None)."""
    if identity_repo.has_users(conn):
        return None
    uid = identity_repo.create_user(conn, ADMIN_NAME, is_admin=True, now=now)
    identity_repo.set_role(conn, uid, project_id, identity.Role.ADMIN, now)
    key = issue_key(conn, box, user_id=uid, project_id=project_id,
                    description="created at first start", now=now)
    _tid, token = issue_token(conn, user_id=uid, description="created at first start", now=now)
    return Admin(user=ADMIN_NAME, token=token, key=key)


# --- changes the API makes, each in a transaction of its own ------------------------------


@dataclasses.dataclass(frozen=True)
class Account:
    """A user and their roles by project id, as stored after a change."""

    user: rows.User
    roles: dict[str, identity.Role]
    #: the new user's first token (only when the user was just made)
    token: str | None = None


def _account(conn: sa.Connection, user: rows.User, token: str | None = None) -> Account:
    return Account(user=user, roles=identity_repo.roles_of(conn, user.id), token=token)


def create_project(rt: runtime.Runtime, name: str, now: int) -> str:
    """A new project's id."""
    with rt.store.begin() as conn:
        return identity_repo.create_project(conn, name, now)


def set_member(rt: runtime.Runtime, project_id: str, user_name: str, role: identity.Role,
               now: int) -> Account:
    """Give a user a role in a project (a project's id or name)."""
    with rt.credentials_change() as conn:
        project = identity_repo.find_project(conn, project_id)
        user = identity_repo.find_user(conn, user_name)
        identity_repo.set_role(conn, user.id, project.id, role, now)
        return _account(conn, user)


def remove_member(rt: runtime.Runtime, project_id: str, user_name: str) -> Account:
    """Take a user out of a project (their keys for it are revoked with it)."""
    with rt.credentials_change() as conn:
        project = identity_repo.find_project(conn, project_id)
        user = identity_repo.find_user(conn, user_name)
        identity_repo.remove_member(conn, user.id, project.id, rt.now())
        return _account(conn, user)


def create_user(rt: runtime.Runtime, name: str, *, is_admin: bool,
                projects: dict[str, identity.Role], now: int) -> Account:
    """A new user with their roles and a first token (told here only)."""
    with rt.store.begin() as conn:
        uid = identity_repo.create_user(conn, name, is_admin=is_admin, now=now)
        for project, role in projects.items():
            found = identity_repo.find_project(conn, project)
            identity_repo.set_role(conn, uid, found.id, role, now)
        _tid, token = issue_token(conn, user_id=uid, description="first token", now=now)
        return _account(conn, identity_repo.find_user(conn, name), token)


def disable_user(rt: runtime.Runtime, user_name: str, *, by: identity.Principal) -> None:
    """Disable a user: every key and token of theirs stops working at once."""
    if user_name == by.user_name:
        raise errors.BadParameter("you cannot disable yourself")
    with rt.credentials_change() as conn:
        identity_repo.disable_user(conn, identity_repo.find_user(conn, user_name).id, rt.now())


def create_key(rt: runtime.Runtime, project_id: str, *, user_id: str, description: str,
               now: int) -> IssuedKey:
    """A new access key pair of the user's for the project (the secret told here only)."""
    assert rt.box is not None
    with rt.store.begin() as conn:
        identity_repo.find_project(conn, project_id)
        return issue_key(conn, rt.box, user_id=user_id, project_id=project_id,
                         description=description, now=now)


def revoke_key(rt: runtime.Runtime, project_id: str, access_key: str,
               by: identity.Principal) -> None:
    """Revoke a key at once: the caller's own, or any of the project's for its admin (to
    anyone else the key does not exist)."""
    with rt.credentials_change() as conn:
        row = identity_repo.key_row(conn, project_id, access_key)
        if row.user_id != by.user_id and by.role_in(project_id) is not identity.Role.ADMIN:
            raise errors.NotFound(f"access key '{access_key}' does not exist")
        identity_repo.revoke_key(conn, access_key, rt.now())


def create_token(rt: runtime.Runtime, *, user_id: str, description: str, now: int,
                 expires_at: int | None, project_id: str | None) -> tuple[str, str]:
    """`issue_token` in a transaction of its own: (token id, token)."""
    with rt.store.begin() as conn:
        return issue_token(conn, user_id=user_id, description=description, now=now,
                           expires_at=expires_at, project_id=project_id)


def revoke_token(rt: runtime.Runtime, user_id: str, token_id: str) -> None:
    """Revoke one of the user's tokens at once."""
    with rt.credentials_change() as conn:
        identity_repo.revoke_token(conn, user_id, token_id, rt.now())
