"""The ModelArts v2 training-jobs endpoints (and corral's log-streaming extension)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from corral.api import auth, deps, schemas, tensorboard_proxy, views, watch
from corral.api.deps import Ctx
from corral.domain import downsample, errors, jobs, specs
from corral.services import jobs as job_service
from corral.storage import runs
from corral.store import identity_repo, job_repo, rows, version_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["training jobs"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}
CHUNK_BYTES = 1024 * 1024


@router.post("/training-jobs", status_code=201, response_model=schemas.JobOut,
             responses=ERRORS)
async def create_training_job(project_id: str, body: specs.JobCreate, ctx: Ctx,
                              caller: auth.Caller) -> JSONResponse:
    out = await ctx.blocking(_create, ctx, project_id, body, caller.user_name)
    return JSONResponse(out, status_code=201)


def _create(ctx: deps.Context, project_id: str, body: specs.JobCreate,
            user_name: str) -> dict[str, Any]:
    now = ctx.now()
    row = job_service.create(ctx, body, project_id=project_id, user_name=user_name, now=now)
    ctx.wake()
    return views.job(None, row, ctx.catalog, now, fresh=True)


@router.get("/training-jobs/{training_job_id}", response_model=schemas.JobOut,
            responses=ERRORS)
async def show_training_job(
    project_id: str, training_job_id: str, ctx: Ctx, request: Request, caller: auth.Caller,
    watched: Annotated[list[jobs.Phase] | None, Query(
        alias="watch",
        description="corral extension: answer once the job's phase is none of these (at "
                    "once if it already is not), or when `timeout` has passed; repeat it "
                    "for several phases")] = None,
    timeout: Annotated[float, Query(
        gt=0, le=watch.MAX_TIMEOUT_S,
        description="seconds a `watch` waits at most")] = watch.DEFAULT_TIMEOUT_S,
) -> JSONResponse:
    # Job bodies go out as built (the schema documents them; views.job builds them from
    # stored, already validated data), which saves validating them again on every poll.
    if not watched:
        out = await ctx.blocking(_job_body, ctx, project_id, training_job_id)
        return JSONResponse(tensorboard_proxy.endpoints(ctx, request, caller, out))
    waiting = {phase.value for phase in watched}
    # Watching: registered before each read, so that a change committed after the read
    # ends the wait at once (see api/watch.py).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    with ctx.changes.watching(training_job_id, waiting) as watcher:
        while True:
            watcher.arm()
            left = deadline - loop.time()
            found = await ctx.blocking(_body_unless, ctx, project_id, training_job_id,
                                       waiting if left > 0 else ())
            if found is not None:
                return JSONResponse(tensorboard_proxy.endpoints(ctx, request, caller, found))
            # Nobody to answer: stop reading the job (asked when nothing changed, since a
            # change is read at once whoever waits for it).
            if not await watcher.wait(left) and await request.is_disconnected():
                return JSONResponse(await ctx.blocking(_job_body, ctx, project_id,
                                                       training_job_id))


def _job_body(ctx: deps.Context, project_id: str, job_id: str) -> dict[str, Any]:
    body = _body_unless(ctx, project_id, job_id, ())
    assert body is not None
    return body


def _body_unless(ctx: deps.Context, project_id: str, job_id: str,
                 phases: Collection[str]) -> dict[str, Any] | None:
    """The job's body; None, without building it, while its phase is one of `phases` (a
    watch reads the job on every change, and answers only once its phase is none of them)."""
    with ctx.store.read() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        if row.phase in phases:
            return None
        return views.job(conn, row, ctx.catalog, ctx.now())


@router.put("/training-jobs/{training_job_id}", responses=ERRORS)
def update_training_job(project_id: str, training_job_id: str, body: specs.JobUpdate,
                        ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    job_service.describe(ctx, project_id, training_job_id, body.description, caller,
                         ctx.now())
    return {}


@router.delete("/training-jobs/{training_job_id}", status_code=202, responses=ERRORS)
def delete_training_job(project_id: str, training_job_id: str, ctx: Ctx,
                        caller: auth.Caller) -> dict[str, Any]:
    """Delete the job and its logs; a running job is stopped first. Outputs are kept."""
    job_service.delete(ctx, project_id, training_job_id, caller, ctx.now())
    ctx.changes.changed([training_job_id])
    ctx.wake()
    return {}


@router.post("/training-jobs/{training_job_id}/actions", status_code=202,
             response_model=schemas.JobOut, responses=ERRORS)
def act_on_training_job(project_id: str, training_job_id: str, body: specs.JobAction,
                        ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    now = ctx.now()
    job_service.stop(ctx, project_id, training_job_id, caller, now)
    # read before the scheduler is woken: the job as the stop left it
    with ctx.store.read() as conn:
        out = views.job(conn, job_repo.get_job(conn, project_id, training_job_id), ctx.catalog,
                        now)
    ctx.changes.changed([training_job_id])
    ctx.wake()
    return out


@router.post("/training-job-searches", response_model=schemas.SearchOut, responses=ERRORS,
             dependencies=[auth.require_role("viewer")])  # a POST that only reads
def search_training_jobs(project_id: str, body: specs.Search, ctx: Ctx) -> dict[str, Any]:
    now = ctx.now()
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        total, count, found = job_repo.search_jobs(conn, project_id, body)
        items = views.jobs_list(conn, found, ctx.catalog, now)
    return {"total": total, "count": count, "limit": body.limit, "offset": body.offset,
            "sort_by": body.sort_by, "order": body.order, "group_by": body.group_by,
            "items": items, "next_cursor": job_repo.next_cursor(body, found)}


_PAIRED = ("events from start_time to end_time (ms since the epoch); give both or "
           "neither")


@router.get("/training-jobs/{training_job_id}/events", response_model=schemas.EventsOut,
            responses=ERRORS)
def list_training_job_events(
    project_id: str, training_job_id: str, ctx: Ctx,
    offset: specs.Count = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    order: Literal["asc", "desc"] = "asc",
    level: Literal["Info", "Warning", "Error"] | None = None,
    pattern: Annotated[str | None, Query(max_length=256)] = None,
    start_time: Annotated[specs.TimeMs | None, Query(description=_PAIRED)] = None,
    end_time: Annotated[specs.TimeMs | None, Query(description=_PAIRED)] = None,
    source: Annotated[Literal["K8S", "Job", "Task"] | None, Query(
        description="what the events are of: the job (created, queued, started, "
        "restarted, ended), its tasks (exits, failures to start), or K8S (none: corral "
        "runs no Kubernetes)")] = None,
) -> dict[str, Any]:
    if (start_time is None) != (end_time is None):
        raise errors.BadParameter("start_time and end_time go together")
    with ctx.store.read() as conn:
        job_repo.get_job(conn, project_id, training_job_id)
        total, events = job_repo.list_events(conn, training_job_id, offset=offset,
                                             limit=limit, order=order, level=level,
                                             pattern=pattern, start_time=start_time,
                                             end_time=end_time, source=source)
    return {"total": total, "limit": limit, "offset": offset, "order": order,
            "start_time": None if start_time is None else str(start_time),
            "end_time": None if end_time is None else str(end_time),
            "events": [views.event(e) for e in events]}


def _task_attempt(conn: sa.Connection, project_id: str, job_id: str, task: str,
                  attempt: int | None) -> tuple[rows.Job, int, int]:
    """(job row, the attempt asked for or else the latest, the latest attempt)."""
    row = job_repo.get_job(conn, project_id, job_id)
    if task not in jobs.task_names(row.node_count):
        raise errors.NotFound(f"task '{task}' does not exist in training job '{job_id}'")
    latest = job_repo.latest_attempt(conn, job_id)
    if attempt is not None and not 1 <= attempt <= max(latest, 1):
        raise errors.NotFound(f"attempt {attempt} does not exist (latest is {latest})")
    return row, attempt or latest, latest


@router.get("/training-jobs/{training_job_id}/tasks/{task_id}/logs/preview",
            response_model=schemas.LogPreviewOut, responses=ERRORS)
def show_training_job_logs_preview(project_id: str, training_job_id: str, task_id: str,
                                   ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        _row, attempt, _latest = _task_attempt(conn, project_id, training_job_id, task_id,
                                               None)
    if not attempt:
        return {"content": "", "current_size": 0, "full_size": 0}
    paths = runs.RunPaths(ctx.settings.runs_dir, training_job_id)
    data, size = runs.tail(paths.log_path(attempt, task_id), ctx.settings.log_preview_bytes)
    return {"content": data.decode("utf-8", "replace"), "current_size": len(data),
            "full_size": size}


@router.get("/training-jobs/{training_job_id}/tasks/{task_id}/logs",
            response_model=schemas.LogChunkOut, responses=ERRORS)
def read_training_job_log(
    project_id: str, training_job_id: str, task_id: str, ctx: Ctx,
    offset: specs.ByteOffset = 0,
    attempt: specs.Ordinal | None = None,
) -> dict[str, Any]:
    """corral extension: a task's log from a byte offset, for following it as it grows."""
    with ctx.store.read() as conn:
        row, att, latest = _task_attempt(conn, project_id, training_job_id, task_id, attempt)
        tasks = {t.name: t for t in job_repo.tasks_of(conn, training_job_id, att)} if att else {}
    task = tasks.get(task_id)
    finished = (jobs.Phase(row.phase) in jobs.TERMINAL or att < latest
                or (task is not None and jobs.TaskState(task.state) in jobs.TASK_DONE))
    if not att:
        return {"content": "", "offset": 0, "next_offset": 0, "full_size": 0, "attempt": 0,
                "finished": finished}
    path = runs.RunPaths(ctx.settings.runs_dir, training_job_id).log_path(att, task_id)
    data, nxt, size = runs.read_from(path, offset, CHUNK_BYTES)
    return {"content": data.decode("utf-8", "replace"), "offset": offset, "next_offset": nxt,
            "full_size": size, "attempt": att, "finished": finished and nxt >= size}


@router.get("/training-jobs/{training_job_id}/metrics/{task_id}",
            response_model=schemas.MetricsOut, responses=ERRORS)
def show_training_job_metrics(project_id: str, training_job_id: str, task_id: str,
                              ctx: Ctx, points: views.Points = None) -> dict[str, Any]:
    with ctx.store.read() as conn:
        _row, att, _latest = _task_attempt(conn, project_id, training_job_id, task_id, None)
        samples = job_repo.samples_of(conn, training_job_id, att, task_id) if att else []
        reported = version_repo.points_of(conn, training_job_id, task_id)
    series = {"cpuUsage": "cpu_usage", "memUsage": "mem_usage", "gpuUtil": "gpu_util",
              "gpuMemUsage": "gpu_mem_usage", "memUsedMB": "mem_mb"}
    times = [r.time for r in samples]
    values = [[round(getattr(r, col), 2) for r in samples] for col in series.values()]
    if points is not None:
        times, values = downsample.means(times, values, points)
    out = [{"metric": name, "value": v} for name, v in zip(series, values, strict=True)]
    # The metrics the job reported follow, one series per name, so that the SDK's metrics
    # call shows them too (a reported name that is also a resource metric is left out).
    out += [{"metric": s["metric"], "value": s["value"]}
            for s in views.metric_series(reported, points) if s["metric"] not in series]
    return {"metrics": out, "times": times}
