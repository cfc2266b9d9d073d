"""The FastAPI application: routers, the error handler, and the context they share."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi

import corral
from corral.api import auth, catalog, deps, errors, identity, jobs, models, quotas, versions

#: every operation but the public ones may answer these (api/auth.py)
AUTH_ERRORS = {"401": "No valid credential (ModelArts.2784)",
               "403": "The caller's role does not allow this (ModelArts.0403)"}


def create_app(ctx: deps.Context) -> FastAPI:
    app = FastAPI(
        title="corral", version=corral.__version__,
        description="Self-hosted training platform with a ModelArts-v2-compatible API.",
        # Every API route, whichever router brings it, checks project and role (auth.py).
        dependencies=[Depends(auth.authorize)],
    )
    app.state.context = ctx
    errors.install(app)
    app.include_router(jobs.router)
    app.include_router(catalog.router)
    app.include_router(quotas.router)
    app.include_router(versions.router)
    app.include_router(models.router)
    app.include_router(identity.router)
    # Outermost but for Starlette's own error handler: nothing runs before it.
    app.add_middleware(auth.AuthMiddleware, context=ctx)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema without its 422 answers: corral refuses bad input with a 400."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    for path in schema.get("paths", {}).values():
        for op in path.values():
            if op.get("responses", {}).pop("422", None) is not None:
                op["responses"].setdefault("400", {
                    "description": "Bad Request",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/ErrorBody"}}}})
    error_ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, ops in schema.get("paths", {}).items():
        if path in auth.PUBLIC:
            continue
        for op in ops.values():
            for code, text in AUTH_ERRORS.items():
                op.setdefault("responses", {}).setdefault(
                    code, {"description": text, "content": error_ref})
            op["security"] = [{"token": []}, {"signature": []}]
    schema.setdefault("components", {})["securitySchemes"] = {
        "token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token",
                  "description": "a bearer token (`corral token`)"},
        "signature": {"type": "apiKey", "in": "header", "name": "Authorization",
                      "description": "SDK-HMAC-SHA256 Access=..., SignedHeaders=..., "
                                     "Signature=... (with X-Sdk-Date), as the Huawei "
                                     "Cloud SDKs sign with an access key pair"}}
    for name in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(name, None)
    app.openapi_schema = schema
    return schema
