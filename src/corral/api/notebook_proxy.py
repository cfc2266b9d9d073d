"""`{server}/notebooks/{id}/...`: a notebook's JupyterLab, behind corral's login.

HTTP and websockets are forwarded by fastapi-proxy-lib (httpx and httpx-ws: streamed
bodies both ways, hop-by-hop headers handled, websocket subprotocols and close codes
passed on) to the session's JupyterLab, which listens on 127.0.0.1 of its node. What this
module adds is who may come through:

- a corral token (`X-Auth-Token`) of the notebook's owner or a project admin;
- or the cookie set when the notebook's one-time URL (`.../lab?token=...`, from `show`)
  is opened: the token is spent, the cookie holds for the session (`Path` of the notebook
  only, `HttpOnly`, `SameSite=Lax`), and a request it authenticates must come from this
  server's own pages (its `Origin`, when it has one, is the server's).

Everything else is refused as the API refuses: another project's notebook is a 404, a
viewer is a 403. JupyterLab gets its own token instead of corral's credentials (so it
skips its own cookie, origin and XSRF checks, corral's made above), never the user's.
Requests that change something (not GET, HEAD or OPTIONS) count as activity for idle
leases. It is ASGI middleware outside `AuthMiddleware`, which knows no cookies and reads
whole bodies before it passes them on.
"""

from __future__ import annotations

import hmac
import http.cookies
import logging
import time
import urllib.parse
from typing import Any

import httpx
from fastapi_proxy_lib.core import http as proxy_http
from fastapi_proxy_lib.core import websocket as proxy_ws
from starlette.datastructures import URL, Headers
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from corral.api import auth, deps, error_bodies, notebooks
from corral.domain import errors, identity
from corral.domain import notebooks as notebook_rules
from corral.kinds.notebooks import actions
from corral.store import kind_rows, notebook_repo

log = logging.getLogger(__name__)
PREFIX = "/notebooks/"
COOKIE = "corral-notebook"
#: seconds a notebook read from the database is used for the requests that follow
CACHE_S = 1.0
#: seconds between two records of a notebook's activity
TOUCH_S = 5.0
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
#: what the proxy sends on and waits for (a download streams in chunks within these)
TIMEOUT = httpx.Timeout(300.0, connect=5.0)


class NotReady(errors.CorralError):
    """The notebook's JupyterLab is not running."""

    error_code = "ModelArts.6404"
    http_status = 503


class Proxy:
    def __init__(self, app: ASGIApp, context: deps.Context) -> None:
        self.app = app
        self.ctx = context
        self._http: proxy_http.BaseHttpProxy | None = None
        self._ws: proxy_ws.BaseWebSocketProxy | None = None
        self._cache: dict[str, tuple[float, kind_rows.Notebook | None]] = {}
        self._touched: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        try:
            await self._serve(scope, receive, send)
        except errors.CorralError as exc:
            await _refuse(exc, scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        notebook_id = scope["path"][len(PREFIX):].split("/", 1)[0]
        headers = Headers(scope=scope)
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        offered = query.get("token", [""])[0]
        if scope["type"] == "http" and offered and scope["method"] == "GET":
            cookie = await self.ctx.blocking(self._redeem, notebook_id, offered)
            if cookie is not None:
                await _welcome(scope, notebook_id, cookie)(scope, receive, send)
                return
        nb = await self._notebook(notebook_id)
        if nb is None:
            raise notebook_repo.NotebookNotFound(f"notebook '{notebook_id}' does not exist")
        if not _has_cookie(headers, nb):
            await self._by_credential(scope, nb)
        elif headers.get("origin") and urllib.parse.urlsplit(
                headers["origin"]).netloc != headers.get("host"):
            raise errors.Forbidden("a notebook's cookie works from this server's pages only")
        if nb.state != notebook_rules.State.RUNNING or nb.port is None:
            status = notebook_rules.status(nb.state, session=nb.session,
                                           ready=nb.ready_at is not None)
            raise NotReady(f"notebook '{nb.id}' is {status.value}")
        if scope["type"] == "http" and scope["method"] not in SAFE:
            await self._touch(nb.id)
        forwarded = {**scope, "headers": _headers_for_jupyter(headers, nb)}
        target = f"127.0.0.1:{nb.port}{scope['path']}"
        if scope["type"] == "websocket":
            await self._websocket().send_request_to_target(
                websocket=WebSocket(forwarded, receive, send),
                target_url=httpx.URL(f"ws://{target}"))
            return
        try:
            response = await self._client().send_request_to_target(
                request=Request(forwarded, receive), target_url=httpx.URL(f"http://{target}"))
        except httpx.TransportError as exc:
            # Stopping or stopped since its record was read (up to CACHE_S ago): read it
            # afresh next time, and answer as for a notebook that is not running.
            self._cache.pop(nb.id, None)
            raise NotReady(f"notebook '{nb.id}' did not answer: {exc}") from None
        await response(scope, receive, send)

    async def _by_credential(self, scope: Scope, nb: kind_rows.Notebook) -> None:
        """The caller of a corral credential, who must be allowed the notebook."""
        # A websocket's handshake is a GET (a signature covers the method); no body.
        asked = {**scope, "method": scope.get("method", "GET")}
        principal = (auth.authenticate(self.ctx, asked, b"", cached_only=True)
                     or await self.ctx.blocking(auth.authenticate, self.ctx, asked, b""))
        assert principal is not None
        principal.require(nb.project_id, identity.Role.VIEWER)
        if not notebooks.may_use(principal, nb):
            raise errors.Forbidden("only the notebook's owner or a project admin may use it")

    async def _notebook(self, notebook_id: str) -> kind_rows.Notebook | None:
        now = time.monotonic()
        cached = self._cache.get(notebook_id)
        if cached is not None and cached[0] > now:
            return cached[1]

        def read() -> kind_rows.Notebook | None:
            with self.ctx.store.read() as conn:
                return notebook_repo.by_id(conn, notebook_id)

        nb = await self.ctx.blocking(read)
        if len(self._cache) > 1000:
            self._cache.clear()
        self._cache[notebook_id] = (now + CACHE_S, nb)
        return nb

    def _redeem(self, notebook_id: str, token: str) -> str | None:
        with self.ctx.store.begin() as conn:
            cookie = actions.redeem(conn, notebook_id, token, self.ctx.now())
        self._cache.pop(notebook_id, None)
        return cookie

    async def _touch(self, notebook_id: str) -> None:
        now = time.monotonic()
        if now - self._touched.get(notebook_id, -TOUCH_S) < TOUCH_S:
            return
        self._touched[notebook_id] = now

        def write() -> None:
            with self.ctx.store.begin() as conn:
                notebook_repo.touch(conn, notebook_id, self.ctx.now())

        await self.ctx.blocking(write)

    def _client(self) -> proxy_http.BaseHttpProxy:
        if self._http is None:
            self._http = proxy_http.BaseHttpProxy(httpx.AsyncClient(timeout=TIMEOUT))
        return self._http

    def _websocket(self) -> proxy_ws.BaseWebSocketProxy:
        if self._ws is None:
            self._ws = proxy_ws.BaseWebSocketProxy(httpx.AsyncClient(timeout=TIMEOUT))
        return self._ws


def _cookies(headers: Headers) -> http.cookies.SimpleCookie:
    jar: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
    for value in headers.getlist("cookie"):
        try:
            jar.load(value)
        except http.cookies.CookieError:
            continue
    return jar


def _has_cookie(headers: Headers, nb: kind_rows.Notebook) -> bool:
    morsel = _cookies(headers).get(COOKIE)
    return bool(morsel is not None and nb.cookie_secret and hmac.compare_digest(
        morsel.value.encode(), nb.cookie_secret.encode()))


def _headers_for_jupyter(headers: Headers, nb: kind_rows.Notebook) -> list[tuple[bytes, bytes]]:
    """The request's headers less corral's credentials (and the Origin corral checked),
    with JupyterLab's own token."""
    drop = {"authorization", auth.TOKEN_HEADER, "origin", "cookie"}
    out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
           if k not in drop]
    others = [f"{k}={m.coded_value}" for k, m in _cookies(headers).items() if k != COOKIE]
    if others:
        out.append((b"cookie", "; ".join(others).encode("latin-1")))
    out.append((b"authorization", f"token {nb.jupyter_token}".encode("latin-1")))
    return out


def _welcome(scope: Scope, notebook_id: str, cookie: str) -> Response:
    """The one-time URL, opened: its cookie, and the same page without the token."""
    url = URL(scope=scope)
    kept = [(k, v) for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True)
            if k != "token"]
    target = url.path + (f"?{urllib.parse.urlencode(kept)}" if kept else "")
    response = RedirectResponse(target, status_code=302)
    response.set_cookie(COOKIE, cookie, path=f"{PREFIX}{notebook_id}/", httponly=True,
                        samesite="lax", secure=url.scheme == "https")
    return response


async def _refuse(exc: errors.CorralError, scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": exc.message[:120]})
        return
    response: Any = error_bodies.of(exc)
    await response(scope, receive, send)
