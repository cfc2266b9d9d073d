"""The one place errors become HTTP answers, all in the ModelArts error body."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from corral.domain import errors, specs

log = logging.getLogger(__name__)


def body(code: str, msg: str, status: int) -> JSONResponse:
    return JSONResponse({"error_code": code, "error_msg": msg}, status_code=status)


def install(app: FastAPI) -> None:
    @app.exception_handler(errors.CorralError)
    async def _corral(_req: Request, exc: errors.CorralError) -> JSONResponse:
        return body(exc.error_code, exc.message, exc.http_status)

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
        return body(err.error_code, err.message, err.http_status)

    @app.exception_handler(HTTPException)
    async def _http(_req: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return body("APIGW.0101", "the API does not exist", 404)
        if exc.status_code == 405:
            return body("APIGW.0101", "the API does not support this method", 405)
        return body(f"ModelArts.{exc.status_code:04d}", str(exc.detail), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_req: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        err = errors.CorralError("internal error; see the server log")
        return body(err.error_code, err.message, err.http_status)
