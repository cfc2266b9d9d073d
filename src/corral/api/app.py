"""The FastAPI application: routers, the error handler, and the context they share."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi

import corral
from corral.api import (
    algorithms,
    auth,
    catalog,
    datasets,
    deps,
    error_bodies,
    identity,
    incremental,
    jobs,
    loglinks,
    logs,
    models,
    notebook_proxy,
    notebooks,
    pipelines,
    quotas,
    retention,
    search,
    streams,
    tensorboard_proxy,
    versions,
)
from corral.domain import errors

#: every operation but the public ones may answer these (api/auth.py)
AUTH_ERRORS = {"401": "No valid credential (ModelArts.2784)",
               "403": "The caller's role does not allow this (ModelArts.0403)"}


def create_app(ctx: deps.Context) -> FastAPI:
    app = FastAPI(
        title="corral", version=corral.__version__,
        description="Self-hosted training platform with a ModelArts-v2-compatible API.",
        # Every API route, whichever router brings it, checks project and role (auth.py),
        # then that its text can be stored.
        dependencies=[Depends(auth.authorize), Depends(refuse_nul)],
    )
    app.state.context = ctx
    error_bodies.install(app)
    app.include_router(search.router)  # before jobs: its /training-jobs/autosearch/...
    app.include_router(jobs.router)
    app.include_router(catalog.router)
    app.include_router(algorithms.router)
    app.include_router(quotas.router)
    app.include_router(versions.router)
    app.include_router(models.router)
    app.include_router(identity.router)
    app.include_router(retention.router)
    app.include_router(datasets.router)
    app.include_router(incremental.router)
    app.include_router(pipelines.router)
    app.include_router(notebooks.router)
    app.include_router(logs.router)
    app.include_router(loglinks.router)
    app.include_router(streams.router)
    # Outermost but for Starlette's own error handler: nothing runs before it.
    app.add_middleware(auth.AuthMiddleware, context=ctx)
    # Outside it: /notebooks/{id}/ streams, and takes a cookie too (api/notebook_proxy.py).
    app.add_middleware(notebook_proxy.Proxy, context=ctx)
    # Outside that: /training-jobs/{id}/tensorboard/ is served on the notebooks' port too.
    app.add_middleware(tensorboard_proxy.Proxy, context=ctx)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


async def refuse_nul(request: Request) -> None:
    """No text a request carries (path, query, JSON body) may hold a NUL character:
    PostgreSQL can neither store one nor compare with one, so it would fail deep in a
    query, a 500; refused here for every route and on either database alike."""
    found = [name for name, value in request.path_params.items() if "\x00" in value]
    found += [name for name, value in request.query_params.multi_items()
              if "\x00" in name + value]
    body = await request.body()
    if not found and b"\\u0000" in body and _holds_nul(body):  # how JSON writes a NUL
        found.append("body")
    if found:
        raise errors.BadParameter(f"{found[0]}: text must not hold NUL characters")


def _holds_nul(body: bytes) -> bool:
    """Whether a string (or a key) of the JSON `body` holds a NUL; False when it is not
    JSON (the route's own validation says so)."""
    try:
        todo = [json.loads(body)]
    except (ValueError, RecursionError):
        return False
    while todo:  # no recursion: the body decides how deep it goes
        item = todo.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            todo += [*item, *item.values()]
        elif isinstance(item, list):
            todo += item
    return False


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
        if auth.is_public(path):
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
