"""`{notebook origin}/training-jobs/{id}/tensorboard/`: a job's TensorBoard, behind corral's
login (`tensorboard/enable: true`; services/tensorboards.py starts and stops it).

It is served where notebooks are, on their port (api/notebook_proxy.py says why: a page
there cannot read the console's token, which the browser keeps for the API's origin), and
the API's port answers these paths with a redirect there. Requests are forwarded over
HTTP (fastapi-proxy-lib) to the job's TensorBoard on the unix socket the server bound for
it (executors/local/tensorboard.py): nothing else can reach it, so it has no credential
of its own. Who may come through:

- a corral credential (`X-Auth-Token`, or a signature) of a user with a role in the
  job's project (a viewer's is enough: TensorBoard only shows what the job wrote);
- or the cookie set when the job's TensorBoard link (`endpoints.tensorboard` of the job's
  show body: its `url` with `?token=<token>`) is opened: the token names the user it
  was given to, is signed with a key derived from the server key, expires after
  TOKEN_S seconds and is spent when opened; the cookie it is exchanged for is signed the
  same way, holds for COOKIE_S seconds, is sent to the job's TensorBoard only (`Path`,
  `HttpOnly`, `SameSite=Lax`), and a request it authenticates must come from the
  notebooks' own pages (its `Origin`, when it has one, is the one it was sent to). The
  user's role in the project is checked again on every request (read at most every
  CACHE_S seconds).

Another project's job is a 404 as the API answers it; a deleted job's TensorBoard is a
404 too. TensorBoard never gets corral's credentials nor its cookies.
"""

from __future__ import annotations

import dataclasses
import hmac
import os
import pathlib
import re
import secrets
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx
from fastapi_proxy_lib.core import http as proxy_http
from starlette.datastructures import URL, Headers
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api import auth, deps, error_bodies, proxying
from corral.domain import errors, identity, jobfields
from corral.kinds.notebooks import sockets
from corral.services import tensorboards
from corral.store import identity_repo, job_repo, rows

COOKIE = "corral-tensorboard"
#: seconds a token of a job's show body opens its TensorBoard for
TOKEN_S = 600
#: seconds the cookie it is exchanged for lasts
COOKIE_S = 8 * 3600
#: seconds a job or a user read from the database is used for the requests that follow
CACHE_S = 1.0
#: what the proxy waits for (TensorBoard's first answer comes once it has started)
TIMEOUT = httpx.Timeout(300.0, connect=5.0)
_PATH = re.compile(r"/training-jobs/([A-Za-z0-9_-]{1,128})/tensorboard(/.*)?")


def endpoints(ctx: deps.Context, request: Request, caller: identity.Principal,
              body: dict[str, Any]) -> dict[str, Any]:
    """The job's show `body` with `endpoints.tensorboard` ({url, token}: the token opens the
    page for the caller, `url?token=...`) when it asked for TensorBoard."""
    if not jobfields.wants_tensorboard(body["metadata"].get("annotations", {})):
        return body
    job_id = body["metadata"]["id"]
    url = ctx.notebook_origin(request.url) + tensorboards.url_path(job_id)
    token = ""
    if ctx.box is not None:
        expires = int(ctx.clock()) + TOKEN_S
        token = _signed(ctx, "token", job_id, caller.user_id, expires)
    return {**body, "endpoints": {"tensorboard": {"url": url, "token": token}}}


class Proxy:
    def __init__(self, app: ASGIApp, context: deps.Context) -> None:
        self.app = app
        self.ctx = context
        self._clients: dict[str, tuple[httpx.AsyncClient, proxy_http.BaseHttpProxy]] = {}
        self._jobs: dict[str, tuple[float, rows.Job | None]] = {}
        self._users: dict[str, tuple[float, identity.Principal | None]] = {}
        #: job id -> the folder its TensorBoard shows
        self._folders: dict[str, str] = {}
        #: tokens opened, until they expire
        self._spent: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = (_PATH.fullmatch(scope["path"])
                 if scope["type"] in ("http", "websocket") else None)
        if found is None:
            await self.app(scope, receive, send)
            return
        try:
            if scope["type"] == "websocket":
                raise errors.NotFound("TensorBoard takes no websockets")
            if not self._on_notebook_port(scope):
                if self.ctx.notebook_port is None:
                    raise errors.NotFound("TensorBoard is served on the notebooks' port, "
                                          "which this server has not opened")
                target = self.ctx.notebook_origin(URL(scope=scope)) + proxying.path_and_query(scope)
                response: ASGIApp = RedirectResponse(target, status_code=307)
            elif found[2] is None:  # the cookie's path ends with the slash
                response = RedirectResponse(scope["path"] + "/", status_code=308)
            else:
                response = await self._serve(scope, receive, found[1])
        except errors.CorralError as exc:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008,
                            "reason": exc.message[:120]})
                return
            response = error_bodies.of(exc)
        await response(scope, receive, send)

    def _on_notebook_port(self, scope: Scope) -> bool:
        server = scope.get("server")
        return (self.ctx.notebook_port is not None and server is not None
                and server[1] == self.ctx.notebook_port)

    async def _serve(self, scope: Scope, receive: Receive, job_id: str) -> ASGIApp:
        headers = Headers(scope=scope)
        cookie = _cookie(headers)
        user_id = cookie and _verified(self.ctx, "cookie", job_id, cookie)
        offered = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1")
                                        ).get("token", [""])[0]
        if offered and scope["method"] == "GET":
            return self._welcome(scope, job_id, offered, bool(user_id))
        principal = await self._principal(scope, headers, user_id)
        job = await self._job(job_id)
        if job is None or principal.role_in(job.project_id) is None:
            # (another project's job answers as one that does not exist: its project's id,
            # and that it exists, are not the caller's to know)
            raise errors.NotFound(f"training job '{job_id}' does not exist")
        principal.require(job.project_id, identity.Role.VIEWER)
        folder = self._folders.get(job.id)
        if folder is None:
            folder = await self.ctx.blocking(_logdir, job)
            if len(self._folders) > 1000:
                self._folders.clear()
            self._folders[job.id] = folder  # (a job's spec never changes)
        boards = self.ctx.tensorboards
        try:
            board = await self.ctx.blocking(boards.open, job.id, folder)
        except tensorboards.Unavailable as exc:
            raise error_bodies.NotReady(exc.message) from None
        try:
            response = await self._forward(scope, receive, headers, str(board.sock))
        except BaseException:
            boards.done(board)
            raise
        return _Then(response, lambda: boards.done(board))

    async def _principal(self, scope: Scope, headers: Headers,
                         user_id: str) -> identity.Principal:
        """Who asks: the user of the job's cookie (`user_id`, when it had a valid one), or
        of a corral credential."""
        if not user_id:
            principal = (auth.authenticate(self.ctx, scope, b"", cached_only=True)
                         or await self.ctx.blocking(auth.authenticate, self.ctx, scope, b""))
            assert principal is not None
            return principal
        if headers.get("origin") and urllib.parse.urlsplit(
                headers["origin"]).netloc != headers.get("host"):
            raise errors.Forbidden("a TensorBoard's cookie works from its own pages only")
        found = await self._user(user_id)
        if found is None:
            raise errors.BadCredential("the user of this TensorBoard's cookie is gone")
        return found

    async def _forward(self, scope: Scope, receive: Receive, headers: Headers,
                       sock: str) -> Response:
        forwarded = {**scope, "headers": proxying.forwarded(headers)}
        client, proxy = await self._client(sock)
        try:
            response = await proxy.send_request_to_target(
                request=Request(forwarded, receive),
                target_url=httpx.URL(f"http://localhost{scope['path']}"))
        except httpx.TransportError as exc:
            self._clients.pop(sock, None)
            await client.aclose()
            raise error_bodies.NotReady(f"the job's TensorBoard did not answer: {exc}") from None
        return proxying.passed_back(response)

    def _welcome(self, scope: Scope, job_id: str, token: str, has_cookie: bool) -> Response:
        """The link, opened: a cookie for the user the token names (the token spent), and
        the same page without the token. A link opened again by a browser that has the
        cookie goes to the page; anyone else is refused."""
        now = int(self.ctx.clock())
        self._spent = {t: until for t, until in self._spent.items() if until > now}
        user_id = _verified(self.ctx, "token", job_id, token)
        if not user_id or token in self._spent:
            if not has_cookie:
                raise errors.BadCredential("this TensorBoard link is not valid, expired or "
                                           "was opened already: show the job for a new one")
            return RedirectResponse(_without_token(scope), status_code=302)
        self._spent[token] = int(token.split(".")[1])
        response = RedirectResponse(_without_token(scope), status_code=302)
        expires = now + COOKIE_S
        response.set_cookie(COOKIE, _signed(self.ctx, "cookie", job_id, user_id, expires),
                            max_age=COOKIE_S, path=tensorboards.url_path(job_id),
                            httponly=True, samesite="lax",
                            secure=URL(scope=scope).scheme == "https")
        return response

    async def _job(self, job_id: str) -> rows.Job | None:
        """The job (None: none, or deleted), read at most every CACHE_S."""
        now = time.monotonic()
        cached = self._jobs.get(job_id)
        if cached is not None and cached[0] > now:
            return cached[1]

        def read() -> rows.Job | None:
            with self.ctx.store.read() as conn:
                return job_repo.job_by_id(conn, job_id)

        job = await self.ctx.blocking(read)
        job = job if job is not None and job.deleted_at is None else None
        if len(self._jobs) > 1000:
            self._jobs.clear()
        self._jobs[job_id] = (now + CACHE_S, job)
        return job

    async def _user(self, user_id: str) -> identity.Principal | None:
        """A cookie's user as they are now (None: gone or disabled), read at most every
        CACHE_S."""
        now = time.monotonic()
        cached = self._users.get(user_id)
        if cached is not None and cached[0] > now:
            return cached[1]

        def read() -> identity.Principal | None:
            with self.ctx.store.read() as conn:
                return identity_repo.principal(conn, user_id, credential="tensorboard-cookie")

        principal = await self.ctx.blocking(read)
        if len(self._users) > 1000:
            self._users.clear()
        self._users[user_id] = (now + CACHE_S, principal)
        return principal

    async def _client(self, sock: str) -> tuple[httpx.AsyncClient, proxy_http.BaseHttpProxy]:
        """A client of the TensorBoard on `sock` (one per socket, kept while it is there)."""
        found = self._clients.get(sock)
        if found is None:
            for gone in [p for p in self._clients if not os.path.exists(p)]:
                await self._clients.pop(gone)[0].aclose()
            transport = httpx.AsyncHTTPTransport(uds=sockets.address(pathlib.Path(sock)))
            client = proxying.client(transport=transport, timeout=TIMEOUT)
            found = self._clients[sock] = (client, proxy_http.BaseHttpProxy(client))
        return found


@dataclasses.dataclass
class _Then:
    """`response`, and `then()` once it has been sent (or failed to be)."""

    response: Response
    then: Callable[[], None]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.then()


def _logdir(job: rows.Job) -> str:
    """The folder the job's TensorBoard shows; NotFound when it asked for none."""
    try:
        folder = tensorboards.logdir(job)
    except errors.BadParameter as exc:  # (checked at submit: a job from before that)
        raise errors.NotFound(f"training job '{job.id}' has no TensorBoard: "
                              f"{exc.message}") from None
    if folder is None:
        raise errors.NotFound(f"training job '{job.id}' has no TensorBoard: its "
                              f"{jobfields.TENSORBOARD} annotation is not true")
    return folder


def _signed(ctx: deps.Context, what: str, job_id: str, user_id: str, expires: int,
            nonce: str | None = None) -> str:
    """A token or a cookie: `<user id>.<expires>.<nonce>.<signature>` (the nonce: two made
    in one second for one user are still two, each spent on its own)."""
    assert ctx.box is not None
    nonce = nonce if nonce is not None else secrets.token_hex(8)
    message = "\n".join((f"tensorboard-{what}", job_id, user_id, str(expires), nonce))
    return f"{user_id}.{expires}.{nonce}.{ctx.box.sign_link(message)}"


def _verified(ctx: deps.Context, what: str, job_id: str, value: str) -> str:
    """The user id a token or a cookie of the job names, when it is signed and has not
    expired; "" otherwise."""
    parts = value.split(".")
    if ctx.box is None or len(parts) != 4 or not parts[1].isdigit():
        return ""
    user_id, expires, nonce, _signature = parts
    if int(expires) <= ctx.clock():
        return ""
    expected = _signed(ctx, what, job_id, user_id, int(expires), nonce)
    return user_id if hmac.compare_digest(expected.encode(), value.encode()) else ""


def _cookie(headers: Headers) -> str:
    """The value of the TensorBoard cookie the request carries ("" when none)."""
    morsel = proxying.cookies(headers).get(COOKIE)
    return morsel.value if morsel is not None else ""


def _without_token(scope: Scope) -> str:
    kept = [(k, v) for k, v in urllib.parse.parse_qsl(
        scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if k != "token"]
    return scope["path"] + (f"?{urllib.parse.urlencode(kept)}" if kept else "")
