"""The one place errors become HTTP answers, all in the ModelArts error body.

The HTTP status of an error is the API's business, not the layer that raised it: `STATUS`
gives it by error class, and an error not listed has its nearest listed ancestor's.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette import routing
from starlette.exceptions import HTTPException

from corral.domain import errors, identity, leadership, specs

log = logging.getLogger(__name__)


class TooLarge(errors.CorralError):
    """The request body is too large."""

    error_code = "ModelArts.0413"


class NotReady(errors.CorralError):
    """The notebook's JupyterLab is not running."""

    error_code = "ModelArts.6404"


#: error class -> the HTTP status it answers with (docs/api.md lists them)
STATUS: dict[type[errors.CorralError], int] = {
    errors.CorralError: 500,
    errors.BadParameter: 400,
    errors.BadJSON: 400,
    errors.NotFound: 404,
    errors.ProjectNotFound: 404,
    errors.DuplicateName: 400,  # a training job's name: ModelArts answers 400
    # Conflict, as the reference's status codes have it for a resource that exists
    # already
    identity.DuplicateName: 409,
    errors.BadFlavor: 400,
    errors.InvalidState: 409,
    errors.LaunchError: 500,
    errors.BadCredential: 401,
    errors.Forbidden: 403,
    leadership.LostLease: 503,
    TooLarge: 413,
    NotReady: 503,
}


def status_of(exc: errors.CorralError) -> int:
    """The HTTP status of `exc`: its class's in `STATUS`, or its nearest ancestor's."""
    return next(STATUS[c] for c in type(exc).__mro__ if c in STATUS)


def body(code: str, msg: str, status: int,
         headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error_code": code, "error_msg": msg}, status_code=status,
                        headers=headers)


def of(exc: errors.CorralError) -> JSONResponse:
    """The answer to a CorralError: its code, message and HTTP status."""
    return body(exc.error_code, exc.message, status_of(exc))


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
        is_json = "json" in req.headers.get("content-type", "")
        err: errors.CorralError
        if raw_body and not is_json:
            err = errors.BadJSON("the request body must be JSON, sent with "
                                 "Content-Type: application/json")
        elif any(e.get("type") == "json_invalid" for e in exc.errors()):
            err = errors.BadJSON()
        elif any(tuple(e.get("loc", ())) == ("body",)
                 and e.get("type") in ("model_attributes_type", "dict_type")
                 for e in exc.errors()):  # JSON, but a string or a number, say
            err = errors.BadParameter("the request body must be a JSON object")
        elif raw_body:
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
