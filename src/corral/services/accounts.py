"""Issuing credentials: the first start's admin, access keys and bearer tokens.

Each function runs in the caller's transaction and returns the secret exactly once; what
is stored is the secret key sealed with the server key, or the token's hash.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from corral.domain import identity
from corral.services import secretbox
from corral.store import identity_repo

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
