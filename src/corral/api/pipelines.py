"""Pipelines (a corral addition): DAGs of training jobs, created from JSON or YAML.

Each task of a pipeline is an ordinary training job, which the answers name by its id:
its logs, metrics and events are read as any job's. What users do here is written and
answered at once; the pipelines' controller (kinds/pipelines) carries it on, woken as
soon as the answer is sent.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from corral.api import auth, bodies, deps, schemas
from corral.api.deps import Ctx
from corral.domain import errors, specs
from corral.domain.pipelines import status
from corral.kinds.pipelines import actions, cleaning, common
from corral.store import job_repo, kind_repo, kind_rows, pipeline_repo, rows

router = APIRouter(prefix="/v2/{project_id}", tags=["pipelines"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}
#: the largest pipeline body read
MAX_BODY = 1024 * 1024
_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object"}},
    "application/yaml": {"schema": {"type": "string"}}}}}


class Action(specs.Model):
    """`stop`, or `rerun` with its options."""

    action: Literal["stop", "rerun"]
    #: rerun: from_failed (the default), from_task (with `from_task`), or all
    mode: actions.Rerun = actions.Rerun.FROM_FAILED
    from_task: str | None = Field(default=None, max_length=32)
    #: rerun: NAME (a pipeline parameter) or TASK.NAME (a task's own) -> value
    parameters: dict[str, str] = Field(default_factory=dict, max_length=100)


@router.post("/pipelines", status_code=201, responses=ERRORS, openapi_extra=_BODY)
async def create_pipeline(project_id: str, request: Request, ctx: Ctx,
                          caller: auth.Caller) -> JSONResponse:
    """Create a pipeline from its body, JSON or YAML (docs/pipelines.md)."""
    # Parsed on a thread, as the rest: a large YAML body takes seconds of pure Python
    data = await ctx.blocking(_read, await request.body(),
                              request.headers.get("content-type", ""))
    out = await ctx.blocking(_create, ctx, project_id, data, caller.user_name)
    return JSONResponse(out, status_code=201)


def _read(raw: bytes, content_type: str) -> Any:
    if len(raw) > MAX_BODY:
        raise errors.BadParameter(f"a pipeline body is at most {MAX_BODY} bytes")
    return bodies.read(raw, content_type)


def _create(ctx: deps.Context, project_id: str, data: Any, user_name: str) -> dict[str, Any]:
    now = ctx.now()
    if not isinstance(data, dict):
        raise errors.BadParameter("a pipeline body is a mapping (metadata, tasks, ...)")
    p = actions.make(ctx, project_id=project_id, user_name=user_name, data=data, now=now)
    with ctx.store.read() as conn:  # before the controller is woken: as it was made
        out = _view(conn, p, now)
    ctx.wake_kinds()
    return out


@router.get("/pipelines", responses=ERRORS)
def list_pipelines(
    project_id: str, ctx: Ctx,
    state: Annotated[list[status.Status] | None, Query(
        description="only pipelines in these states (repeat it)")] = None,
    name: Annotated[str | None, Query(max_length=64, description="only this name")] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """The project's pipelines, newest first; `offset` counts pipelines."""
    now = ctx.now()
    with ctx.store.read() as conn:
        total, found = pipeline_repo.search(conn, project_id, states=state or (), name=name,
                                            offset=offset, limit=limit)
        items = [_summary(conn, p, a, now) for p, a in found]
    return {"total": total, "count": len(items), "items": items}


@router.get("/pipelines/{pipeline_id}", responses=ERRORS)
def show_pipeline(project_id: str, pipeline_id: str, ctx: Ctx) -> dict[str, Any]:
    """The pipeline: its status and progress, its graph, each task's run with its job."""
    now = ctx.now()
    with ctx.store.read() as conn:
        return _view(conn, pipeline_repo.get(conn, project_id, pipeline_id), now)


@router.post("/pipelines/{pipeline_id}/actions", status_code=202, responses=ERRORS)
def act_on_pipeline(project_id: str, pipeline_id: str, body: Action, ctx: Ctx,
                    caller: auth.Caller) -> dict[str, Any]:
    """`{"action": "stop"}`, or `{"action": "rerun", "mode", "from_task", "parameters"}`
    (by its owner or a project admin)."""
    now = ctx.now()
    done = actions.act(ctx, project_id, pipeline_id, body.action, caller, mode=body.mode,
                       from_task=body.from_task, parameters=body.parameters, now=now)
    with ctx.store.read() as conn:  # before the controller is woken: as the action left it
        out = _view(conn, pipeline_repo.get(conn, project_id, done), now)
    ctx.wake_kinds()
    return out


@router.post("/pipelines/{pipeline_id}/clean", responses=ERRORS)
def clean_pipeline(project_id: str, pipeline_id: str, ctx: Ctx,
                   caller: auth.Caller) -> dict[str, Any]:
    """Remove an ended pipeline's intermediate outputs (by its owner or a project admin);
    say what was removed and kept."""
    return _cleaned(actions.clean(ctx.store, ctx.settings, project_id, pipeline_id, caller,
                                  ctx.now()))


@router.delete("/pipelines/{pipeline_id}", status_code=202, responses=ERRORS)
def delete_pipeline(project_id: str, pipeline_id: str, ctx: Ctx,
                    caller: auth.Caller) -> dict[str, Any]:
    """Delete the pipeline, its jobs and its intermediate outputs (by its owner or a project
    admin; a running one is stopped first, and its outputs removed once its jobs have
    ended)."""
    done = actions.delete(ctx.store, ctx.settings, project_id, pipeline_id, caller,
                          ctx.now())
    ctx.wake()
    ctx.wake_kinds()
    if done is None:
        return {"deferred": True, "removed": [], "kept": []}
    return {"deferred": False, **_cleaned(done)}


def _cleaned(done: cleaning.Done) -> dict[str, Any]:
    return {"removed": done.removed,
            "kept": [{"path": path, "why": why} for path, why in done.kept]}


@router.get("/pipelines/{pipeline_id}/events", responses=ERRORS)
def list_pipeline_events(
    project_id: str, pipeline_id: str, ctx: Ctx,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    order: Literal["asc", "desc"] = "asc",
) -> dict[str, Any]:
    with ctx.store.read() as conn:
        p = pipeline_repo.get(conn, project_id, pipeline_id)
        total, found = kind_repo.list_events(conn, common.KIND, p.id, offset=offset,
                                             limit=limit, order=order)
    return {"total": total, "events": [
        {"time": e.time, "level": e.level, "message": e.message} for e in found]}


# --- views ----------------------------------------------------------------------------------


def _summary(conn: sa.Connection, p: kind_rows.Pipeline, a: kind_rows.PipelineAttempt,
             now: int) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in pipeline_repo.runs_of(conn, p.id, a.number):
        counts[r.state] = counts.get(r.state, 0) + 1
    return {"id": p.id, "name": p.name, "description": p.description,
            "user_name": p.user_name, "create_time": p.created_at,
            "status": _status(a, now), "runs": counts,
            "model": ({"name": p.model_name, "version": p.model_version}
                      if p.model_name else None)}


def _status(a: kind_rows.PipelineAttempt, now: int) -> dict[str, Any]:
    start = a.started_at or 0
    return {"state": a.state, "progress": a.progress, "attempt": a.number,
            "start_time": start, "end_time": a.ended_at,
            "duration": max(0, (a.ended_at or now) - start) if start else 0,
            "message": a.message, "stopping": a.stop_requested_at is not None
            and a.state == status.Status.RUNNING, "timed_out": a.timed_out_at is not None}


def _view(conn: sa.Connection, p: kind_rows.Pipeline, now: int) -> dict[str, Any]:
    attempts = pipeline_repo.attempts_of(conn, p.id)
    current = attempts[-1]
    spec = json.loads(p.spec)
    order = {key: i for i, (key, _, _) in enumerate(common.shape_of(p).runs())}
    runs = sorted(pipeline_repo.runs_of(conn, p.id, current.number),
                  key=lambda r: order.get(r.key, len(order)))
    owned = {j.id: j for j in job_repo.owned_jobs(conn, common.KIND, p.id).values()}
    return {
        **_summary(conn, p, current, now),
        "parameters": json.loads(current.parameters),
        "output_base": p.output_base,
        "dag": [{"name": t["name"], "depends_on": t.get("depends_on", []),
                 "trigger": t.get("trigger") or (status.Rule.ALL_DONE.value if t.get("finally")
                                                 else status.Rule.ALL_SUCCESS.value),
                 "when": t.get("when"), "finally": bool(t.get("finally")),
                 "items": len(t["for_each"]) if t.get("for_each") else None,
                 "parallelism": t.get("parallelism"), "cache": t.get("cache") is not None}
                for t in spec["tasks"]],
        "tasks": [_run(r, owned.get(r.job_id or ""), now) for r in runs],
        "attempts": [{"number": a.number, "mode": a.mode, "from_task": a.from_task,
                      **_status(a, now)} for a in attempts],
        "spec": spec,
    }


def _run(r: kind_rows.PipelineRun, job: rows.Job | None, now: int) -> dict[str, Any]:
    if job is not None and job.start_time:
        start, end = job.start_time, job.end_time
    else:
        start, end = r.submitted_at or 0, r.ended_at
    return {"key": r.key, "task": r.task, "item": r.item, "state": r.state,
            "origin": r.origin, "source": r.source, "job_id": r.job_id,
            "job_phase": job.phase if job is not None else None,
            "start_time": start, "end_time": end,
            "duration": max(0, (end or now) - start) if start else 0,
            "message": r.message,
            **{field: pipeline_repo.loads(getattr(r, field))
               for field in ("parameters", "inputs", "outputs", "metrics")}}
