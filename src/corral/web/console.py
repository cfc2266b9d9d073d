"""Serving the console's built files at `/console`, in front of the API application.

`wrap(api)` answers `/console` and everything under it, and sends every other request to
the API untouched. The files are public (they hold no data; the app asks for a token and
sends it with each API call), so they are served before the API's authentication. Any
path under `/console/` that is not a file is the app's own route (a job's page, say):
it gets `index.html`, and the app shows that page, so a deep link opens it.
"""

from __future__ import annotations

import pathlib

from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

PREFIX = "/console"
STATIC = pathlib.Path(__file__).parent / "static"
#: the console talks to its own server only; nothing is loaded from anywhere else
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
                               "style-src 'self' 'unsafe-inline'; connect-src 'self'; "
                               "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: built assets carry a hash of their content in their name: cached for good
IMMUTABLE = "public, max-age=31536000, immutable"


def wrap(api: ASGIApp, static: pathlib.Path = STATIC) -> ASGIApp:
    """`api`, with the console at /console (and `/` leading there)."""
    return _Front(api, GZipMiddleware(_Files(static), minimum_size=1024))


class _Front:
    def __init__(self, api: ASGIApp, console: ASGIApp) -> None:
        self.api = api
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == PREFIX or path.startswith(PREFIX + "/"):
            await self.console(scope, receive, send)
        elif path == "/" and scope.get("method") in ("GET", "HEAD"):
            await RedirectResponse(PREFIX + "/")(scope, receive, send)
        else:
            await self.api(scope, receive, send)


class _Files:
    def __init__(self, root: pathlib.Path) -> None:
        self.root = root.resolve()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.respond(scope)(scope, receive, send)

    def respond(self, scope: Scope) -> Response:
        if scope.get("method") not in ("GET", "HEAD"):
            return PlainTextResponse("Method Not Allowed", 405, headers={"Allow": "GET, HEAD"})
        rel = scope["path"][len(PREFIX):].lstrip("/")
        if not scope["path"].startswith(PREFIX + "/"):
            return RedirectResponse(PREFIX + "/")
        found = self.file(rel)
        if found is not None:
            cache = IMMUTABLE if rel.startswith("assets/") else "no-cache"
            return FileResponse(found, headers={"Cache-Control": cache, **SECURITY_HEADERS})
        if rel.startswith("assets/"):  # a file of an older build: no page to fall back on
            return PlainTextResponse("Not Found", 404)
        index = self.file("index.html")
        if index is None:
            return PlainTextResponse(
                "The console is not built: run `npm ci && npm run build` in web/", 404)
        return FileResponse(index, headers={"Cache-Control": "no-cache", **SECURITY_HEADERS})

    def file(self, rel: str) -> pathlib.Path | None:
        """The file `rel` names under the root, if it is one there."""
        if not rel or "\x00" in rel:
            return None
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            return None
        return path
