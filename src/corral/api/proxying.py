"""What corral's two proxies (api/notebook_proxy.py to JupyterLab, api/tensorboard_proxy.py
to TensorBoard) do alike: read the request's cookies, keep corral's credentials from the
server behind, ask it only for the encodings the caller accepts, and pass its answer back
with corral's own Date and Server headers alone."""

from __future__ import annotations

import http.cookies
from typing import Any

import httpx
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Scope

from corral.api import auth

#: request headers never forwarded: corral's credentials, its cookies (each proxy adds back
#: those that are not corral's) and the Origin corral checked
DROPPED = frozenset({"authorization", auth.TOKEN_HEADER, "origin", "cookie"})
#: answer headers of the server behind that corral's server sets itself (two of each would
#: be sent otherwise, and the second Server names the software behind and its version)
OWN = (b"date", b"server")


def cookies(headers: Headers) -> http.cookies.SimpleCookie:
    """Every cookie the request carries; a malformed Cookie header adds none."""
    jar: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
    for value in headers.getlist("cookie"):
        try:
            jar.load(value)
        except http.cookies.CookieError:
            continue
    return jar


def forwarded(headers: Headers) -> list[tuple[bytes, bytes]]:
    """The request's headers less those in DROPPED."""
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
            if k not in DROPPED]


def path_and_query(scope: Scope) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    return scope["path"] + (f"?{query}" if query else "")


def client(**options: Any) -> httpx.AsyncClient:
    """A client to the server behind that asks for the encodings the caller asked for and
    no others: httpx would ask for gzip on every request, and a server that compresses
    would then send a compressed body to a caller that cannot read it."""
    made = httpx.AsyncClient(**options)
    del made.headers["accept-encoding"]
    return made


def passed_back(response: Response) -> Response:
    """The answer of the server behind, without the headers corral's server sets itself."""
    response.raw_headers = [(k, v) for k, v in response.raw_headers if k.lower() not in OWN]
    return response
