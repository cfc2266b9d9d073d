"""The FastAPI application: routers, the error handler, and the context they share."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

import corral
from corral.api import catalog, deps, errors, jobs, models, versions


def create_app(ctx: deps.Context) -> FastAPI:
    app = FastAPI(
        title="corral", version=corral.__version__,
        description="Self-hosted training platform with a ModelArts-v2-compatible API.",
    )
    app.state.context = ctx
    errors.install(app)
    app.include_router(jobs.router)
    app.include_router(catalog.router)
    app.include_router(versions.router)
    app.include_router(models.router)
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
    for name in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(name, None)
    app.openapi_schema = schema
    return schema
