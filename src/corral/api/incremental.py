"""Incremental-learning jobs (Sedna's IncrementalLearningJob, a corral addition).

A loop watches a dataset, retrains its model when enough new samples arrive, evaluates the
new model against the current one on the same held-back samples, and promotes and
hot-reloads it when a condition on the metrics holds (`kinds/incremental`). Bodies are
Sedna's, in JSON or YAML; answers carry every round's record and Sedna-style conditions.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from corral.api import auth, bodies, deps, incremental_views, schemas
from corral.api.deps import Ctx
from corral.domain import errors, specs
from corral.domain.incremental import loopspec, states
from corral.kinds.incremental import actions
from corral.store import identity_repo, kind_repo, loop_repo, model_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["incremental learning"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its `$defs` written in place (OpenAPI cannot reach them)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]]))
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return dict(walk(schema))


BODY = {"requestBody": {"required": True, "description": "Sedna's IncrementalLearningJob; "
                        "YAML too (Content-Type: application/yaml)",
                        "content": {"application/json": {
                            "schema": _inlined(loopspec.LoopCreate.model_json_schema())}}}}


class ActionIn(specs.Model):
    action: actions.Action
    #: why (a forced promotion needs one; a rollback may have one)
    reason: str = Field(default="", max_length=1024)
    #: promote: the version of the loop's model (default: the latest round's)
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)


class EventsOut(schemas.Out):
    total: int
    events: list[schemas.EventOut]


class AliasMoveOut(schemas.Out):
    from_version: int | None
    to_version: int | None
    time: int
    user_name: str
    reason: str


class AliasHistoryOut(schemas.Out):
    model_name: str
    alias: str
    version: int | None = Field(description="what the alias names now (or at `at`)")
    history: list[AliasMoveOut]


def _body(raw: bytes, content_type: str) -> loopspec.LoopCreate:
    data = bodies.read(raw, content_type)
    if not isinstance(data, dict):
        raise errors.BadParameter("the body must be an IncrementalLearningJob (a mapping)")
    if _holds_nul(data):  # (YAML can write one in a quoted string; no database stores it)
        raise errors.BadParameter("body: text must not hold NUL characters")
    return loopspec.parse(data)


def _holds_nul(data: Any) -> bool:
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            todo += [*item, *item.values()]
        elif isinstance(item, list):
            todo += item
    return False


@router.post("/incremental-learning-jobs", status_code=201,
             response_model=incremental_views.LoopOut, responses=ERRORS, openapi_extra=BODY)
async def create_incremental_learning_job(project_id: str, request: Request, ctx: Ctx,
                                          caller: auth.Caller) -> JSONResponse:
    # Parsed on a thread, as the rest: a large YAML body takes seconds of pure Python
    body = await ctx.blocking(_body, await request.body(),
                              request.headers.get("content-type", ""))
    out = await ctx.blocking(_create, ctx, project_id, body, caller.user_name)
    return JSONResponse(out, status_code=201)


def _create(ctx: deps.Context, project_id: str, body: loopspec.LoopCreate,
            user_name: str) -> dict[str, Any]:
    now = ctx.now()
    loop_id = actions.make(ctx, body, project_id=project_id, user_name=user_name, now=now)
    out = _view(ctx, project_id, loop_id, now)
    ctx.wake_kinds()
    return out


def _view(ctx: deps.Context, project_id: str, loop_id: str, now: int) -> dict[str, Any]:
    """The loop as answered, read before the controllers are woken: as the action left
    it."""
    with ctx.store.read() as conn:
        return incremental_views.loop(conn, loop_repo.get_loop(conn, project_id, loop_id), now)


@router.get("/incremental-learning-jobs", response_model=incremental_views.LoopsOut,
            responses=ERRORS)
def list_incremental_learning_jobs(project_id: str, ctx: Ctx) -> dict[str, Any]:
    """Every loop of the project, oldest first (without their rounds)."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        items = [incremental_views.loop(conn, row, ctx.now(), full=False)
                 for row in loop_repo.list_loops(conn, project_id)]
    return {"total": len(items), "items": items}


@router.get("/incremental-learning-jobs/{job}", response_model=incremental_views.LoopOut,
            responses=ERRORS)
def show_incremental_learning_job(project_id: str, job: str, ctx: Ctx) -> dict[str, Any]:
    """A loop by id or name, with every round and deploy."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        return incremental_views.loop(conn, loop_repo.get_loop(conn, project_id, job),
                                      ctx.now())


@router.post("/incremental-learning-jobs/{job}/actions", status_code=202,
             response_model=incremental_views.LoopOut, responses=ERRORS)
def act_on_incremental_learning_job(project_id: str, job: str, body: ActionIn, ctx: Ctx,
                                    caller: auth.Caller) -> dict[str, Any]:
    """trigger (a round now), stop, resume, promote (a version, with a reason), rollback."""
    now = ctx.now()
    loop_id = actions.act(ctx, project_id, job, body.action, caller, reason=body.reason,
                          version=body.version, now=now)
    out = _view(ctx, project_id, loop_id, now)
    ctx.wake_kinds()
    ctx.wake()
    return out


@router.delete("/incremental-learning-jobs/{job}", status_code=202, responses=ERRORS)
def delete_incremental_learning_job(project_id: str, job: str, ctx: Ctx,
                                    caller: auth.Caller) -> dict[str, Any]:
    """Delete the loop and its jobs (stopped first); its models and files stay."""
    actions.remove(ctx, project_id, job, caller, ctx.now())
    ctx.wake()
    return {}


@router.get("/incremental-learning-jobs/{job}/events", response_model=EventsOut,
            responses=ERRORS)
def list_incremental_learning_job_events(
    project_id: str, job: str, ctx: Ctx,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    order: Literal["asc", "desc"] = "asc",
) -> dict[str, Any]:
    with ctx.store.read() as conn:
        loop = loop_repo.get_loop(conn, project_id, job)
        total, found = kind_repo.list_events(conn, states.KIND, loop.id, offset=offset,
                                             limit=limit, order=order)
    return {"total": total, "events": [
        {"message": e.message, "level": e.level, "time": str(e.time), "source": "controller"}
        for e in found]}


# A loop's promotions and rollbacks move a model alias; its history answers what an alias
# named at any time (the model registry's other calls are api/models.py's).
@router.get("/models/{model_name}/aliases/{alias}/history", response_model=AliasHistoryOut,
            responses=ERRORS)
def show_model_alias_history(
    project_id: str, model_name: str, alias: str, ctx: Ctx,
    at: Annotated[int | None, Query(ge=0, le=2**63 - 1, description=(
        "a time (ms): `version` is then what the alias named at that time"))] = None,
) -> dict[str, Any]:
    """Every move of the alias: from which version to which, when, by whom, why."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        moves = model_repo.alias_history(conn, model.id, alias)
        version = (model_repo.aliases(conn, model.id).get(alias) if at is None
                   else model_repo.alias_at(conn, model.id, alias, at))
    return {"model_name": model.name, "alias": alias, "version": version, "history": [
        {"from_version": m.from_version, "to_version": m.to_version, "time": m.time,
         "user_name": m.user_name, "reason": m.reason} for m in moves]}
