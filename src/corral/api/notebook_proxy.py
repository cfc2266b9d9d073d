"""`{notebook origin}/notebooks/{id}/...`: a notebook's JupyterLab, behind corral's login.

Notebooks are served on a port of their own (`notebook_port`), never on the API's: a
page of a notebook runs whatever its JupyterLab (or what is written in it) sends, and a
browser keeps the console's token per origin, the port included; on the notebooks' origin
such a page cannot read it, nor script the console's pages. The API's port answers
`/notebooks/...` with a redirect there.

HTTP and websockets are forwarded by fastapi-proxy-lib (httpx and httpx-ws: streamed
bodies both ways, hop-by-hop headers handled, websocket subprotocols and close codes
passed on) to the session's JupyterLab, on the unix socket the server chose for it and
took as its own (kinds/notebooks/sockets.py): nobody else on the machine can connect to
it, so JupyterLab needs no credential, and has none that a page could show. A session on
a Ray node is reached over TCP at its node's address, every request carrying the token
that JupyterLab asks for there (docs/notebooks.md); a browser never sees it. What this
module adds is who may come through:

- a corral token (`X-Auth-Token`) of the notebook's owner or a project admin;
- or the cookie set when the notebook's one-time URL (`.../lab?token=...`, from `show`)
  is opened: the token is spent, the cookie holds for the session (`Path` of the notebook
  only, `HttpOnly`, `SameSite=Lax`), and a request it authenticates must come from the
  notebooks' own pages (its `Origin`, when it has one, is the one it was sent to).

Everything else is refused as the API refuses: another project's notebook is a 404, a
viewer is a 403. JupyterLab never gets corral's credentials. Requests that change
something (not GET, HEAD or OPTIONS) count as activity for idle leases. It is ASGI
middleware outside `AuthMiddleware`, which knows no cookies and reads whole bodies before
it passes them on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
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

from corral.api import auth, deps, error_bodies, notebooks, proxying
from corral.domain import errors, identity
from corral.domain import notebooks as notebook_rules
from corral.kinds.notebooks import actions, controller, jupyter
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
#: sessions whose connections are kept
SESSIONS = 256


class Proxy:
    def __init__(self, app: ASGIApp, context: deps.Context) -> None:
        self.app = app
        self.ctx = context
        #: by where the session listens, the least recently used first
        self._sessions: dict[jupyter.Where, _Proxies] = {}
        self._closing: set[asyncio.Future[None]] = set()
        #: notebook id -> (until when, the notebook, where its session listens)
        self._cache: dict[str, tuple[float, kind_rows.Notebook | None,
                                     jupyter.Where | None]] = {}
        self._touched: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        ours = scope["path"].startswith(PREFIX)
        if not self._on_notebook_port(scope):
            if not ours:
                await self.app(scope, receive, send)
            elif scope["type"] == "http" and self.ctx.notebook_port is not None:
                target = (notebooks.origin(self.ctx, URL(scope=scope))
                          + proxying.path_and_query(scope))
                await RedirectResponse(target, status_code=307)(scope, receive, send)
            else:
                await _refuse(errors.NotFound("notebooks are served on a port of their own"),
                              scope, receive, send)
            return
        try:
            if not ours:  # the notebooks' origin serves notebooks only
                raise errors.NotFound(f"{scope['path']} is not a notebook's")
            await self._serve(scope, receive, send)
        except errors.CorralError as exc:
            await _refuse(exc, scope, receive, send)

    def _on_notebook_port(self, scope: Scope) -> bool:
        server = scope.get("server")
        return (self.ctx.notebook_port is not None and server is not None
                and server[1] == self.ctx.notebook_port)

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
        nb, where = await self._notebook(notebook_id)
        if nb is None:
            raise notebook_repo.NotebookNotFound(f"notebook '{notebook_id}' does not exist")
        if not _has_cookie(headers, nb):
            await self._by_credential(scope, nb)
        elif headers.get("origin") and urllib.parse.urlsplit(
                headers["origin"]).netloc != headers.get("host"):
            raise errors.Forbidden("a notebook's cookie works from the notebooks' pages only")
        if nb.state != notebook_rules.State.RUNNING:
            status = notebook_rules.status(nb.state, session=nb.session,
                                           ready=nb.ready_at is not None)
            raise error_bodies.NotReady(f"notebook '{nb.id}' is {status.value}")
        if scope["type"] == "http" and scope["method"] not in SAFE:
            await self._touch(nb.id)
        if where is None:  # on a Ray node whose address is not known yet
            raise error_bodies.NotReady(f"notebook '{nb.id}' is not reachable yet")
        forwarded = {**scope, "headers": _headers_for_jupyter(headers)}
        target = f"{where.authority}{scope['path']}"
        if scope["type"] == "websocket":
            await self._proxies(where).ws.send_request_to_target(
                websocket=WebSocket(forwarded, receive, send),
                target_url=httpx.URL(f"ws://{target}"))
            return
        try:
            response = await self._proxies(where).http.send_request_to_target(
                request=Request(forwarded, receive), target_url=httpx.URL(f"http://{target}"))
        except httpx.TransportError as exc:
            # Stopping or stopped since its record was read (up to CACHE_S ago): read it
            # afresh next time, and answer as for a notebook that is not running.
            self._cache.pop(nb.id, None)
            raise error_bodies.NotReady(f"notebook '{nb.id}' did not answer: {exc}") from None
        await proxying.passed_back(response)(scope, receive, send)

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

    async def _notebook(self, notebook_id: str,
                        ) -> tuple[kind_rows.Notebook | None, jupyter.Where | None]:
        """The notebook, and where its session listens (read at most every CACHE_S)."""
        now = time.monotonic()
        cached = self._cache.get(notebook_id)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]

        def read() -> tuple[kind_rows.Notebook | None, jupyter.Where | None]:
            with self.ctx.store.read() as conn:
                nb = notebook_repo.by_id(conn, notebook_id)
                return nb, (controller.endpoint_of(conn, self.ctx.settings, nb)
                            if nb is not None else None)

        nb, where = await self.ctx.blocking(read)
        if len(self._cache) > 1000:
            self._cache.clear()
        self._cache[notebook_id] = (now + CACHE_S, nb, where)
        return nb, where

    def _redeem(self, notebook_id: str, token: str) -> str | None:
        cookie = actions.open_url(self.ctx, notebook_id, token)
        self._cache.pop(notebook_id, None)
        return cookie

    async def _touch(self, notebook_id: str) -> None:
        now = time.monotonic()
        if now - self._touched.get(notebook_id, -TOUCH_S) < TOUCH_S:
            return
        self._touched[notebook_id] = now

        await self.ctx.blocking(actions.used, self.ctx, notebook_id)

    def _proxies(self, where: jupyter.Where) -> _Proxies:
        """The proxies (HTTP, websockets) to the JupyterLab listening at `where`."""
        found = self._sessions.pop(where, None)
        if found is None:
            if len(self._sessions) >= SESSIONS:  # the least recently used: ended, likely
                oldest = next(iter(self._sessions))
                closing = asyncio.ensure_future(self._sessions.pop(oldest).close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
            found = _Proxies.to(where)
        self._sessions[where] = found  # (moved to the end: the most recently used)
        return found


@dataclasses.dataclass
class _Proxies:
    http: proxy_http.BaseHttpProxy
    ws: proxy_ws.BaseWebSocketProxy
    clients: tuple[httpx.AsyncClient, ...]

    @classmethod
    def to(cls, where: jupyter.Where) -> _Proxies:
        """On its socket here; or over TCP to a Ray node, every request with its token."""
        def client() -> httpx.AsyncClient:
            transport = httpx.AsyncHTTPTransport(uds=where.sock) if where.sock else None
            return proxying.client(transport=transport, timeout=TIMEOUT,
                                   headers=where.headers())

        http, ws = client(), client()
        return cls(proxy_http.BaseHttpProxy(http), proxy_ws.BaseWebSocketProxy(ws), (http, ws))

    async def close(self) -> None:
        for c in self.clients:
            await c.aclose()


def _has_cookie(headers: Headers, nb: kind_rows.Notebook) -> bool:
    morsel = proxying.cookies(headers).get(COOKIE)
    return bool(morsel is not None and nb.cookie_secret and hmac.compare_digest(
        morsel.value.encode(), nb.cookie_secret.encode()))


def _headers_for_jupyter(headers: Headers) -> list[tuple[bytes, bytes]]:
    """The request's headers less corral's credentials (and the Origin corral checked), and
    the cookies that are not corral's."""
    out = proxying.forwarded(headers)
    others = [f"{k}={m.coded_value}" for k, m in proxying.cookies(headers).items()
              if k != COOKIE]
    if others:
        out.append((b"cookie", "; ".join(others).encode("latin-1")))
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
