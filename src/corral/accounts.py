"""Issuing credentials: the first start's admin, access keys and bearer tokens.

Each function runs in the caller's transaction and returns the secret exactly once; what
is stored is the secret key sealed with the server key, or the token's hash.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from corral import credentials, secretbox
from corral.domain import identity
from corral.store import identity as store

ADMIN_NAME = "admin"


@dataclasses.dataclass(frozen=True)
class IssuedKey:
    access_key: str
    secret_key: str
    project_id: str


def issue_key(conn: sa.Connection, box: secretbox.SecretBox, *, user_id: str, project_id: str,
              description: str, now: int) -> IssuedKey:
    ak, sk = secretbox.new_access_key(), secretbox.new_secret_key()
    store.create_key(conn, access_key=ak, secret_sealed=box.encrypt(sk), user_id=user_id,
                     project_id=project_id, description=description, now=now)
    return IssuedKey(access_key=ak, secret_key=sk, project_id=project_id)


def issue_token(conn: sa.Connection, *, user_id: str, description: str, now: int,
                expires_at: int | None = None, project_id: str | None = None
                ) -> tuple[str, str]:
    """(token id, token); a token with a project reaches that project only."""
    token = secretbox.new_token()
    tid = store.create_token(conn, user_id=user_id, token_hash=secretbox.hash_token(token),
                             description=description, now=now, expires_at=expires_at,
                             project_id=project_id)
    return tid, token


def bootstrap(conn: sa.Connection, box: secretbox.SecretBox, *, project_id: str, now: int
              ) -> credentials.Login | None:
    """On a platform with no user yet: a platform admin, admin of the default project, with
    a token and a key pair. Returns the login to write for the local CLI (else None)."""
    if store.has_users(conn):
        return None
    uid = store.create_user(conn, ADMIN_NAME, is_admin=True, now=now)
    store.set_role(conn, uid, project_id, identity.Role.ADMIN, now)
    key = issue_key(conn, box, user_id=uid, project_id=project_id,
                    description="created at first start", now=now)
    _tid, token = issue_token(conn, user_id=uid, description="created at first start", now=now)
    return credentials.Login(project_id=project_id, user=ADMIN_NAME, token=token,
                             access_key=key.access_key, secret_key=key.secret_key)
