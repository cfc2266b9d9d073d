"""Every request is authenticated, and checked against its project and role, here.

Deny by default: `AuthMiddleware` wraps the whole application, so a route that any module
adds is covered without knowing about it. Only `PUBLIC` paths (and those under
`PUBLIC_PREFIXES`, which check a signature of their own) pass without a credential.
For every other request it

1. verifies the credential: `X-Auth-Token` (a bearer token, stored as its SHA-256) or an
   `SDK-HMAC-SHA256` signature made with an access key (the secret is decrypted with the
   server key; the date must be within 15 minutes; the body is part of the signature).
   Who a credential belongs to is remembered for a few seconds (`authcache`): a signature
   and a token's expiry are still checked on every request, and revoking through this
   server forgets every remembered credential at once;
and then `authorize`, a dependency of the whole application (so of every API route, those
of routers included later too), once the route is known:

2. when the path has `{project_id}`, the caller must belong to that project (an access
   key, or a token made with one: be *for* that project), else the answer is exactly
   that of a project that does not exist (ModelArts.2786);
3. the caller must have the role the route needs: what it declares with
   `require_role(...)` / `require_platform_admin()` in its `dependencies=[...]`, else
   viewer for GET/HEAD and member for every other method.

Routes that are not API routes (a mount, say) are authenticated but not authorized here.

Refusals are ModelArts error bodies: 2784 (401) no valid credential, 2786 (404) not the
caller's project, 0403 (403) a role that does not allow it. Handlers get the caller with
the `Caller` dependency.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral.api import authcache, deps, error_bodies
from corral.domain import errors, identity, signing
from corral.services import secretbox
from corral.store import identity_repo, rows

log = logging.getLogger(__name__)

#: paths anyone may call: liveness and the API's own description
PUBLIC = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
#: paths whose own signature is their credential (a log's expiring link: api/loglinks.py)
PUBLIC_PREFIXES = ("/corral/log-links/",)
TOKEN_HEADER = "x-auth-token"
#: bodies larger than this are refused before anything else (the API takes small JSON)
MAX_BODY = 8 * 1024 * 1024
PLATFORM_ADMIN = "platform-admin"


def is_public(path: str) -> bool:
    """Whether `path` is called without a credential (PUBLIC, PUBLIC_PREFIXES)."""
    return path in PUBLIC or path.startswith(PUBLIC_PREFIXES)


# --- what routes declare -------------------------------------------------------------------


def require_role(role: identity.Role | str) -> Any:
    """`dependencies=[auth.require_role("admin")]`: the role a route needs in its project.

    Lower than the default works too: `require_role("viewer")` on a POST that only reads.
    """
    needed = identity.Role(role)

    async def _check(request: Request) -> None:
        caller = _principal(request)
        caller.require(request.path_params.get("project_id", ""), needed)

    _check.corral_role = needed  # type: ignore[attr-defined]
    return Depends(_check)


def require_platform_admin() -> Any:
    """`dependencies=[auth.require_platform_admin()]`: only a platform admin."""

    async def _check(request: Request) -> None:
        _principal(request).require_platform_admin()

    _check.corral_role = PLATFORM_ADMIN  # type: ignore[attr-defined]
    return Depends(_check)


def _principal(request: Request) -> identity.Principal:
    principal = request.scope.get("state", {}).get("principal")
    if not isinstance(principal, identity.Principal):  # a route AuthMiddleware did not see
        raise errors.BadCredential()
    return principal


async def _caller(request: Request) -> identity.Principal:
    return _principal(request)


Caller = Annotated[identity.Principal, Depends(_caller)]


# --- verifying credentials -----------------------------------------------------------------


def authenticate(ctx: deps.Context, scope: Scope, body: bytes, *,
                 cached_only: bool = False) -> identity.Principal | None:
    """The caller; with `cached_only`, None where that needs the database (the caller then
    asks again without it, off the event loop)."""
    headers: dict[str, bytes] = {}
    for k, v in scope["headers"]:
        headers.setdefault(k.decode("latin-1").lower(), v)
    authorization = headers.get("authorization", b"").decode("latin-1")
    token = headers.get(TOKEN_HEADER)
    if signing.is_signed(authorization):
        if token is not None:
            raise errors.BadCredential("send either a signature or X-Auth-Token, not both")
        return _by_signature(ctx, scope, headers, authorization, body, cached_only)
    if token is not None:
        return _by_token(ctx, token.decode("latin-1").strip(), cached_only)
    raise errors.BadCredential(
        "this needs a credential: an SDK-HMAC-SHA256 signature made with an access key, or "
        "a token in X-Auth-Token")


def _cached(ctx: deps.Context, key: str, cached_only: bool,
            load: Callable[[sa.Connection], authcache.Entry]) -> authcache.Entry | None:
    """The cache's entry for a credential, else `load(conn)`'s (which raises when the
    credential is not valid), remembered; None when only the cache may be asked."""
    entry = ctx.auth_cache.get(key)
    if entry is None:
        if cached_only:
            return None
        generation = ctx.auth_cache.generation
        with ctx.store.read() as conn:
            entry = load(conn)
        ctx.auth_cache.put(key, entry, generation)
    return entry


def _holder(conn: sa.Connection, found: rows.LiveToken | rows.LiveKey | None, credential: str,
            refused: str) -> identity.Principal:
    """The live user a credential row (a token, an access key) belongs to, as the principal
    its requests act as; BadCredential(`refused`) when there is no such row or user."""
    principal = found and identity_repo.principal(conn, found.user_id,
                                                  key_project=found.project_id,
                                                  credential=credential)
    if not principal:
        raise errors.BadCredential(refused)
    return principal


def _by_token(ctx: deps.Context, token: str, cached_only: bool) -> identity.Principal | None:
    digest = secretbox.hash_token(token)

    def load(conn: sa.Connection) -> authcache.Entry:
        found = identity_repo.live_token(conn, digest, ctx.now())
        principal = _holder(conn, found, f"token:{found.id}" if found else "",
                            "the token is unknown, expired or revoked")
        assert found is not None  # (_holder refused it otherwise)
        return authcache.Entry(principal, expires_at=found.expires_at)

    entry = _cached(ctx, "token:" + digest, cached_only, load)
    if entry is None:
        return None
    if entry.expires_at is not None and entry.expires_at <= ctx.now():
        raise errors.BadCredential("the token is unknown, expired or revoked")
    return entry.principal


def _by_signature(ctx: deps.Context, scope: Scope, headers: dict[str, bytes],
                  authorization: str, body: bytes,
                  cached_only: bool) -> identity.Principal | None:
    auth = signing.parse_authorization(authorization)

    def load(conn: sa.Connection) -> authcache.Entry:
        found = identity_repo.live_key(conn, auth.access_key)
        principal = _holder(conn, found, f"key:{found.access_key}" if found else "",
                            "the access key is unknown or revoked")
        assert found is not None  # (_holder refused it otherwise)
        return authcache.Entry(principal, secret_sealed=found.secret_sealed)

    entry = _cached(ctx, "key:" + auth.access_key, cached_only, load)
    if entry is None:
        return None
    assert ctx.box is not None
    raw_path = scope.get("raw_path") or scope["path"].encode()
    signing.verify(auth, ctx.box.decrypt(entry.secret_sealed), method=scope["method"],
                   path=raw_path.decode("latin-1"),
                   query=scope.get("query_string", b"").decode("latin-1"), headers=headers,
                   body=body, now=datetime.datetime.fromtimestamp(ctx.clock(), datetime.UTC))
    return entry.principal


# --- which route, which project, which role ------------------------------------------------


def _declared(dependant: Dependant) -> Any:
    for dep in dependant.dependencies:
        marker = getattr(dep.call, "corral_role", None)
        if marker is not None:
            return marker
        inner = _declared(dep)
        if inner is not None:
            return inner
    return None


async def authorize(request: Request) -> None:
    """The application-wide dependency that checks the project and the role of every route.

    FastAPI applies an application's dependencies to every API route, those of routers
    included later too, so a new route is checked without doing anything; it runs after
    routing, when the path's `project_id` is known, and before the route's own code.
    """
    if is_public(request.scope["path"]):
        return
    principal = _principal(request)
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    declared = _declared(dependant) if dependant is not None else None
    project_id = request.path_params.get("project_id")
    if declared == PLATFORM_ADMIN:
        if project_id is not None:  # a project not the caller's answers as a missing one
            principal.require(project_id, identity.Role.VIEWER)
        principal.require_platform_admin()
        return
    if project_id is not None:
        principal.require(project_id, declared or identity.default_role(request.method))


class AuthMiddleware:
    def __init__(self, app: ASGIApp, context: deps.Context) -> None:
        self.app = app
        self.ctx = context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            body, replay = await _read_body(receive)
            # A credential verified moments ago is answered here; looking one up in the
            # database blocks, so that goes to a worker thread.
            principal = (authenticate(self.ctx, scope, body, cached_only=True)
                         or await run_in_threadpool(authenticate, self.ctx, scope, body))
        except errors.CorralError as exc:
            await error_bodies.of(exc)(scope, receive, send)
            return
        except Exception:
            log.exception("authenticating a request failed")
            err = errors.CorralError("internal error; see the server log")
            await error_bodies.of(err)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, replay, send)


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body (the signature covers it), and a `receive` that hands it on."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise error_bodies.TooLarge(f"the request body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
