"""corral's identity endpoints: who am I, projects, users, access keys and tokens.

Secrets (a secret key, a token) appear in exactly one answer, the one that creates them.
Platform admins manage projects, users and memberships; anyone manages their own keys and
tokens, and a project admin every key of the project.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from corral.api import auth, schemas
from corral.api.deps import Ctx
from corral.domain import identity
from corral.services import accounts
from corral.store import identity_repo

router = APIRouter(prefix="/corral", tags=["identity"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 401, 403, 404, 409)}
ADMIN_ONLY = [auth.require_platform_admin()]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProjectIn(_In):
    name: identity.Name


class MemberIn(_In):
    role: identity.Role


class UserIn(_In):
    name: identity.Name
    is_admin: bool = False
    #: project id (or name) -> role
    projects: dict[str, identity.Role] = Field(default_factory=dict)


class KeyIn(_In):
    description: str = Field(default="", max_length=256)


class TokenIn(_In):
    description: str = Field(default="", max_length=256)
    #: seconds the token lives; none: until revoked
    ttl_s: int | None = Field(default=None, ge=60, le=10 * 365 * 86400)


class ProjectOut(BaseModel):
    project_id: str
    name: str
    created_at: int
    role: str | None = None


class ProjectsOut(BaseModel):
    projects: list[ProjectOut]


class WhoamiOut(BaseModel):
    user: str
    is_admin: bool
    credential: str
    projects: list[ProjectOut]


class UserOut(BaseModel):
    name: str
    is_admin: bool
    created_at: int
    projects: dict[str, str]


class UsersOut(BaseModel):
    users: list[UserOut]


class NewUserOut(UserOut):
    token: str = Field(description="the user's first bearer token; shown only here")


class KeyOut(BaseModel):
    access_key: str
    project_id: str
    user_name: str
    description: str
    created_at: int
    revoked_at: int | None = None


class NewKeyOut(KeyOut):
    secret_key: str = Field(description="shown only here; corral keeps it encrypted")


class KeysOut(BaseModel):
    keys: list[KeyOut]


class TokenOut(BaseModel):
    id: str
    description: str
    project_id: str | None = None
    created_at: int
    expires_at: int | None = None
    revoked_at: int | None = None


class NewTokenOut(TokenOut):
    token: str = Field(description="shown only here; corral keeps only its hash")


class TokensOut(BaseModel):
    tokens: list[TokenOut]


def _projects(ctx: Ctx, caller: identity.Principal) -> list[dict[str, Any]]:
    with ctx.store.read() as conn:
        projects = identity_repo.list_projects(conn)
    out = []
    for r in projects:
        role = caller.role_in(r.id)
        if role is not None:
            out.append({"project_id": r.id, "name": r.name, "created_at": r.created_at,
                        "role": role.value})
    return out


@router.get("/whoami", response_model=WhoamiOut, responses=ERRORS)
def whoami(ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    return {"user": caller.user_name, "is_admin": caller.is_admin,
            "credential": caller.credential.split(":")[0], "projects": _projects(ctx, caller)}


@router.get("/projects", response_model=ProjectsOut, responses=ERRORS)
def list_projects(ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    return {"projects": _projects(ctx, caller)}


@router.post("/projects", status_code=201, response_model=ProjectOut, responses=ERRORS,
             dependencies=ADMIN_ONLY)
def create_project(body: ProjectIn, ctx: Ctx) -> dict[str, Any]:
    now = ctx.now()
    pid = accounts.create_project(ctx, body.name, now)
    return {"project_id": pid, "name": body.name, "created_at": now}


@router.put("/projects/{project_id}/members/{user_name}", response_model=UserOut,
            responses=ERRORS, dependencies=ADMIN_ONLY)
def set_member(project_id: str, user_name: str, body: MemberIn, ctx: Ctx) -> dict[str, Any]:
    return _user(accounts.set_member(ctx, project_id, user_name, body.role, ctx.now()))


@router.delete("/projects/{project_id}/members/{user_name}", response_model=UserOut,
               responses=ERRORS, dependencies=ADMIN_ONLY)
def remove_member(project_id: str, user_name: str, ctx: Ctx) -> dict[str, Any]:
    return _user(accounts.remove_member(ctx, project_id, user_name))


def _user(account: accounts.Account) -> dict[str, Any]:
    row = account.user
    return {"name": row.name, "is_admin": row.is_admin, "created_at": row.created_at,
            "projects": {p: r.value for p, r in account.roles.items()}}


@router.get("/users", response_model=UsersOut, responses=ERRORS, dependencies=ADMIN_ONLY)
def list_users(ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        members = identity_repo.members_of(conn)
        users = identity_repo.list_users(conn)
        return {"users": [{"name": u.name, "is_admin": u.is_admin, "created_at": u.created_at,
                           "projects": members.get(u.id, {})} for u in users]}


@router.post("/users", status_code=201, response_model=NewUserOut, responses=ERRORS,
             dependencies=ADMIN_ONLY)
def create_user(body: UserIn, ctx: Ctx) -> dict[str, Any]:
    made = accounts.create_user(ctx, body.name, is_admin=body.is_admin,
                                projects=body.projects, now=ctx.now())
    return {**_user(made), "token": made.token}


@router.delete("/users/{user_name}", status_code=204, responses=ERRORS,
               dependencies=ADMIN_ONLY)
def disable_user(user_name: str, ctx: Ctx, caller: auth.Caller) -> None:
    """Disable a user: every key and token of theirs stops working at once."""
    accounts.disable_user(ctx, user_name, by=caller)


# --- access keys: a project's, for signing with the SDKs -----------------------------------


@router.post("/projects/{project_id}/keys", status_code=201, response_model=NewKeyOut,
             responses=ERRORS, dependencies=[auth.require_role(identity.Role.VIEWER)])
def create_key(project_id: str, body: KeyIn, ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """A new access key pair of yours for this project (a viewer's reads only)."""
    now = ctx.now()
    key = accounts.create_key(ctx, project_id, user_id=caller.user_id,
                              description=body.description, now=now)
    return {"access_key": key.access_key, "secret_key": key.secret_key,
            "project_id": project_id, "user_name": caller.user_name,
            "description": body.description, "created_at": now}


@router.get("/projects/{project_id}/keys", response_model=KeysOut, responses=ERRORS)
def list_keys(project_id: str, ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """Your keys for this project; a project admin sees everyone's."""
    everyone = caller.role_in(project_id) is identity.Role.ADMIN
    with ctx.store.read() as conn:
        keys = identity_repo.list_keys(conn, project_id, None if everyone else caller.user_id)
    return {"keys": [dataclasses.asdict(k) for k in keys]}


@router.delete("/projects/{project_id}/keys/{access_key}", status_code=204, responses=ERRORS,
               dependencies=[auth.require_role(identity.Role.VIEWER)])
def revoke_key(project_id: str, access_key: str, ctx: Ctx, caller: auth.Caller) -> None:
    """Revoke a key at once: yours, or any of the project's for a project admin."""
    accounts.revoke_key(ctx, project_id, access_key, caller)


# --- bearer tokens: a user's, for scripts and the CLI --------------------------------------


@router.post("/tokens", status_code=201, response_model=NewTokenOut, responses=ERRORS)
def create_token(body: TokenIn, ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """A new token of yours. Made with an access key, it reaches only that key's project."""
    now = ctx.now()
    expires = None if body.ttl_s is None else now + body.ttl_s * 1000
    tid, token = accounts.create_token(ctx, user_id=caller.user_id,
                                       description=body.description, now=now,
                                       expires_at=expires, project_id=caller.key_project)
    return {"id": tid, "token": token, "description": body.description,
            "project_id": caller.key_project, "created_at": now, "expires_at": expires}


@router.get("/tokens", response_model=TokensOut, responses=ERRORS)
def list_tokens(ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    with ctx.store.read() as conn:
        tokens = identity_repo.list_tokens(conn, caller.user_id)
    return {"tokens": [dataclasses.asdict(t) for t in tokens]}


@router.delete("/tokens/{token_id}", status_code=204, responses=ERRORS)
def revoke_token(token_id: str, ctx: Ctx, caller: auth.Caller) -> None:
    accounts.revoke_token(ctx, caller.user_id, token_id)
