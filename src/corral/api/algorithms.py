"""ModelArts' algorithm management: `/v2/{project_id}/algorithms`.

An algorithm is a saved job configuration that a training job names by `algorithm.id`
(services/submit.py makes the job of it). A job copies what it takes at submit, so
changing or deleting an algorithm never changes a job made from it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import Field

from corral.api import auth, deps, schemas
from corral.api.deps import Ctx
from corral.domain import algorithms, errors, identity, specs
from corral.services import algorithms as algorithm_service
from corral.store import algorithm_repo, identity_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["algorithms"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 500)}


class AlgorithmOut(schemas.Out):
    metadata: dict[str, Any] = Field(description="id, name, description, workspace_id, "
                                     "user_name, source, api_version, is_valid, create_time, "
                                     "update_time, ...")
    job_config: dict[str, Any]
    resource_requirements: list[dict[str, Any]] = Field(default_factory=list)
    advanced_config: dict[str, Any] | None = None


class AlgorithmsOut(schemas.Out):
    total: int = Field(description="the project's algorithms")
    count: int = Field(description="those that match `searches`")
    limit: int
    offset: int
    sort_by: str
    order: str
    group_by: str | None = None
    items: list[AlgorithmOut]


def view(row: algorithm_repo.Algorithm) -> dict[str, Any]:
    """The reference's AlgorithmResponse of a stored algorithm."""
    body = json.loads(row.body)
    meta = body.get("metadata", {})
    return {
        "metadata": {
            "id": row.id, "name": row.name, "description": row.description,
            "workspace_id": meta.get("workspace_id", algorithm_service.WORKSPACE),
            "ai_project": meta.get("ai_project", "default-ai-project"),
            "user_name": row.user_name, "source": "custom", "api_version": "v2",
            "is_valid": True, "tags": [], "attr_list": [], "version_num": 0,
            "create_time": row.create_time, "update_time": row.update_time,
        },
        "job_config": body.get("job_config", {}),
        # The response names a requirement's values `value` (the request `values`).
        "resource_requirements": [
            {"key": r["key"], "value": r.get("values", []), "operator": r.get("operator", "in")}
            for r in body.get("resource_requirements", [])],
        "advanced_config": body.get("advanced_config"),
    }


def _save(ctx: deps.Context, project_id: str, body: algorithms.AlgorithmBody,
          caller: identity.Principal, algorithm_id: str | None = None) -> dict[str, Any]:
    return view(algorithm_service.put(ctx, project_id, body, caller, algorithm_id))


@router.post("/algorithms", status_code=201, response_model=AlgorithmOut, responses=ERRORS)
def create_algorithm(project_id: str, body: algorithms.AlgorithmBody, ctx: Ctx,
                     caller: auth.Caller) -> JSONResponse:
    """Save an algorithm: its code (code_dir + boot_file, or command), engine, parameters
    with defaults and constraints, and input and output channels."""
    return JSONResponse(_save(ctx, project_id, body, caller), status_code=201)


@router.get("/algorithms", response_model=AlgorithmsOut, responses=ERRORS)
def list_algorithms(
    project_id: str, ctx: Ctx,
    offset: Annotated[int, Query(ge=0, le=specs.MAX_COUNT,
                                 description="algorithms skipped (1: from the second)")] = 0,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
    sort_by: Annotated[Literal["create_time", "update_time", "name"], Query()] = "create_time",
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
    group_by: Annotated[str | None, Query(
        max_length=64, description="not supported: only empty")] = None,
    searches: Annotated[str | None, Query(
        max_length=128, description="`name:TEXT` (or TEXT): names holding TEXT, any case")
    ] = None,
    workspace_id: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    """The project's algorithms, newest first."""
    if group_by:
        raise errors.BadParameter("group_by: corral does not group algorithms; leave it out")
    name_like = (searches or "").removeprefix("name:").strip() or None
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        total, count, found = algorithm_repo.page(
            conn, project_id, offset=offset, limit=limit, sort_by=sort_by, order=order,
            name_like=name_like)
    if workspace_id not in (None, "", algorithm_service.WORKSPACE):
        count, found = 0, []  # a project has the one workspace
    return {"total": total, "count": count, "limit": limit, "offset": offset,
            "sort_by": sort_by, "order": order, "group_by": group_by,
            "items": [view(a) for a in found]}


@router.get("/algorithms/{algorithm_id}", response_model=AlgorithmOut, responses=ERRORS)
def show_algorithm(project_id: str, algorithm_id: str, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        return view(algorithm_repo.get(conn, project_id, algorithm_id))


@router.put("/algorithms/{algorithm_id}", response_model=AlgorithmOut, responses=ERRORS)
def change_algorithm(project_id: str, algorithm_id: str, body: algorithms.AlgorithmBody,
                     ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """Replace the algorithm with the body (a rename included). Jobs made from it keep
    what they took."""
    return _save(ctx, project_id, body, caller, algorithm_id)


@router.delete("/algorithms/{algorithm_id}", responses=ERRORS)
def delete_algorithm(project_id: str, algorithm_id: str, ctx: Ctx,
                     caller: auth.Caller) -> dict[str, Any]:
    """Delete the algorithm. Jobs made from it, running or not, keep what they took."""
    algorithm_service.delete(ctx, project_id, algorithm_id, caller)
    return {}
