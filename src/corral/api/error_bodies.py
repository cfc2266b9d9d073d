"""The one place errors become HTTP answers, all in the ModelArts error body."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette import routing
from starlette.exceptions import HTTPException

from corral.domain import errors, specs

log = logging.getLogger(__name__)


def body(code: str, msg: str, status: int,
         headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error_code": code, "error_msg": msg}, status_code=status,
                        headers=headers)


def of(exc: errors.CorralError) -> JSONResponse:
    """The answer to a CorralError: its code, message and HTTP status."""
    return body(exc.error_code, exc.message, exc.http_status)


#: the methods a 405's Allow header may name
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(req: Request) -> list[str]:
    """The methods the request's path has, over all the routes that share it (Starlette's
    own 405 names only those of the first such route): each is asked whether it would
    take the request with that method."""
    routes = req.app.router.routes
    return [m for m in METHODS
            if any(route.matches({**req.scope, "method": m})[0] is routing.Match.FULL
                   for route in routes)]


def install(app: FastAPI) -> None:
    @app.exception_handler(errors.CorralError)
    async def _corral(_req: Request, exc: errors.CorralError) -> JSONResponse:
        return of(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(req: Request, exc: RequestValidationError) -> JSONResponse:
        raw_body = any(tuple(e.get("loc", ())) == ("body",)
                       and isinstance(e.get("input"), bytes | str) for e in exc.errors())
        err: errors.CorralError
        if raw_body and "json" not in req.headers.get("content-type", ""):
            err = errors.BadJSON("the request body must be JSON, sent with "
                                 "Content-Type: application/json")
        elif raw_body or any(e.get("type") == "json_invalid" for e in exc.errors()):
            err = errors.BadJSON()
        else:
            err = errors.BadParameter(specs.describe(exc))
        return of(err)

    @app.exception_handler(HTTPException)
    async def _http(req: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return body("APIGW.0101", "the API does not exist", 404)
        if exc.status_code == 400:  # FastAPI's own, for a body it could not parse
            return of(errors.BadJSON())
        if exc.status_code == 405:
            return body("APIGW.0101", "the API does not support this method", 405,
                        headers={"Allow": ", ".join(allowed_methods(req))})
        return body(f"ModelArts.{exc.status_code:04d}", str(exc.detail), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_req: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return of(errors.CorralError("internal error; see the server log"))
