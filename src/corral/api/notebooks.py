"""The ModelArts notebook endpoints (`/v1/{project_id}/notebooks`), as the official SDK's
notebook requests call them.

A notebook's session is reached through the proxy at `/notebooks/{id}/`
(`api/notebook_proxy.py`); `url` here is its one-time address, with `token`, shown only to
whoever may use the notebook (its owner, a project admin).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Body, Query, Request
from starlette.datastructures import URL

from corral.api import auth, deps, jobs
from corral.api.deps import Ctx
from corral.domain import identity, notebooks, resources, specs
from corral.kinds.notebooks import actions, session
from corral.store import job_repo, kind_repo, kind_rows, notebook_repo

router = APIRouter(prefix="/v1/{project_id}/notebooks", tags=["notebooks"])
ERRORS = jobs.ERRORS
#: ModelArts statuses a list may filter on, by the state they come from
_STATES = {notebooks.Status.CREATING: notebooks.State.STARTING,
           notebooks.Status.STARTING: notebooks.State.STARTING,
           notebooks.Status.RUNNING: notebooks.State.RUNNING,
           notebooks.Status.STOPPING: notebooks.State.STOPPING,
           notebooks.Status.STOPPED: notebooks.State.STOPPED,
           notebooks.Status.DELETING: notebooks.State.DELETING,
           notebooks.Status.ERROR: notebooks.State.FAILED,
           notebooks.Status.CREATE_FAILED: notebooks.State.FAILED,
           notebooks.Status.START_FAILED: notebooks.State.FAILED}
_SORT = {"name": "name", "created_at": "created_at", "create_at": "created_at",
         "status": "state", "flavor": "flavor_id", "updated_at": "updated_at"}
LeaseType = Annotated[notebooks.LeaseType | None, Query(
    description="the lease's type: timing (stop at a time) or idle (stop when unused)")]
DurationMs = Annotated[int | None, Query(
    ge=notebooks.MIN_LEASE_MS, le=notebooks.MAX_LEASE_MS,
    description="the lease's duration in ms (a timing lease, unless type says idle)")]


@router.post("", status_code=201, responses=ERRORS)
async def create_notebook(project_id: str, body: notebooks.NotebookCreate, ctx: Ctx,
                          caller: auth.Caller, request: Request) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        return _answer(ctx, actions.make(ctx, body, project_id=project_id,
                                         user_name=caller.user_name, now=ctx.now()),
                       caller, request)

    return await ctx.blocking(run)


@router.get("", responses=ERRORS)
async def list_notebooks(
    project_id: str, ctx: Ctx, caller: auth.Caller, request: Request,
    name: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[notebooks.Status | None, Query()] = None,
    flavor: Annotated[str | None, Query(max_length=128)] = None,
    image_id: Annotated[str | None, Query(max_length=128)] = None,
    owner: Annotated[str | None, Query(max_length=128, description="its user's name")] = None,
    offset: Annotated[int, Query(ge=0, le=specs.MAX_COUNT // 100,
                                 description="a page index: rows skipped are offset * limit")
                      ] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    sort_key: Annotated[Literal["name", "created_at", "create_at", "status", "flavor",
                                "updated_at"], Query()] = "created_at",
    sort_dir: Annotated[Literal["ASC", "DESC", "asc", "desc"], Query()] = "DESC",
) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        with ctx.store.read() as conn:
            total, found = notebook_repo.search(
                conn, project_id, name=name, states={_STATES[status]} if status else (),
                flavor=flavor, image_id=image_id, owner=owner, offset=offset * limit,
                limit=limit, sort_key=_SORT[sort_key], descending=sort_dir.upper() == "DESC")
            data = [_view(conn, ctx, nb, caller, request) for nb in found]
        return {"current": offset, "data": data, "pages": math.ceil(total / limit),
                "size": limit, "total": total}

    return await ctx.blocking(run)


@router.get("/flavors", responses=ERRORS)
def list_notebook_flavors(
    project_id: str, ctx: Ctx,
    category: Annotated[Literal["CPU", "GPU", "ASCEND"] | None, Query()] = None,
) -> dict[str, Any]:
    flavors = [_flavor(f) for f in ctx.catalog.flavors
               if category is None or _flavor(f)["category"] == category]
    return {"current": 0, "data": flavors, "flavors": flavors, "pages": 1,
            "size": len(flavors), "total": len(flavors)}


@router.get("/{notebook_id}", responses=ERRORS)
async def show_notebook(project_id: str, notebook_id: str, ctx: Ctx, caller: auth.Caller,
                        request: Request) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        with ctx.store.read() as conn:
            return _view(conn, ctx, notebook_repo.get(conn, project_id, notebook_id), caller,
                         request)

    return await ctx.blocking(run)


@router.put("/{notebook_id}", responses=ERRORS)
async def update_notebook(project_id: str, notebook_id: str,
                          body: notebooks.NotebookUpdate, ctx: Ctx, caller: auth.Caller,
                          request: Request) -> dict[str, Any]:
    return await _act(ctx, caller, request, lambda: actions.change(
        ctx, project_id, notebook_id, caller, body))


@router.delete("/{notebook_id}", responses=ERRORS)
async def delete_notebook(project_id: str, notebook_id: str, ctx: Ctx, caller: auth.Caller,
                          request: Request) -> dict[str, Any]:
    return await _act(ctx, caller, request, lambda: actions.delete_by(
        ctx, project_id, notebook_id, caller))


@router.post("/{notebook_id}/start", responses=ERRORS)
async def start_notebook(project_id: str, notebook_id: str, ctx: Ctx, caller: auth.Caller,
                         request: Request, duration: DurationMs = None,
                         type: LeaseType = None) -> dict[str, Any]:
    lease = notebooks.LeaseReq(duration=duration, type=type) if type is not None else None
    return await _act(ctx, caller, request, lambda: actions.start_by(
        ctx, project_id, notebook_id, caller, lease=lease,
        duration=duration if lease is None else None))


@router.post("/{notebook_id}/stop", responses=ERRORS)
async def stop_notebook(project_id: str, notebook_id: str, ctx: Ctx, caller: auth.Caller,
                        request: Request) -> dict[str, Any]:
    return await _act(ctx, caller, request, lambda: actions.stop_by(
        ctx, project_id, notebook_id, caller))


@router.get("/{notebook_id}/lease", responses=ERRORS)
def show_lease(project_id: str, notebook_id: str, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        return lease(notebook_repo.get(conn, project_id, notebook_id))


@router.patch("/{notebook_id}/lease", responses=ERRORS)
async def renew_lease(project_id: str, notebook_id: str, ctx: Ctx, caller: auth.Caller,
                      request: Request, duration: DurationMs = None,
                      body: Annotated[notebooks.LeaseReq | None, Body()] = None,
                      ) -> dict[str, Any]:
    """A new lease from now (`duration` in the query is a timing lease, over the body)."""
    await _act(ctx, caller, request, lambda: actions.renew_by(
        ctx, project_id, notebook_id, caller, lease=body, duration=duration))
    return await ctx.blocking(show_lease, project_id, notebook_id, ctx)


@router.get("/{notebook_id}/events", responses=ERRORS)
def notebook_events(project_id: str, notebook_id: str, ctx: Ctx,
                    offset: Annotated[int, Query(ge=0, le=specs.MAX_COUNT)] = 0,
                    limit: Annotated[int, Query(ge=1, le=500)] = 100) -> dict[str, Any]:
    """corral: what happened to the notebook, oldest first (why it stopped, among others)."""
    with ctx.store.read() as conn:
        notebook_repo.get(conn, project_id, notebook_id)
        total, found = kind_repo.list_events(conn, notebooks.KIND, notebook_id,
                                             offset=offset, limit=limit)
    return {"total": total, "events": [{"time": e.time, "level": e.level,
                                        "message": e.message} for e in found]}


async def _act(ctx: deps.Context, caller: identity.Principal, request: Request,
               action: Callable[[], kind_rows.Notebook]) -> dict[str, Any]:
    """`action()` (one of kinds.notebooks.actions', on a thread), then the notebook as it
    left it."""
    def run() -> dict[str, Any]:
        return _answer(ctx, action(), caller, request)

    return await ctx.blocking(run)


def _answer(ctx: deps.Context, nb: kind_rows.Notebook, caller: identity.Principal,
            request: Request) -> dict[str, Any]:
    """The notebook as changed, read before its controller is woken."""
    with ctx.store.read() as conn:
        out = _view(conn, ctx, nb, caller, request)
    ctx.wake_kinds()
    return out


# --- views ---------------------------------------------------------------------------------


def origin(ctx: deps.Context, url: URL) -> str:
    """Where browsers reach the notebooks (api/notebook_proxy.py)."""
    return ctx.notebook_origin(url)


def may_use(caller: identity.Principal, nb: kind_rows.Notebook) -> bool:
    """Whether the caller may reach the notebook's JupyterLab: its owner, a project admin."""
    role = caller.role_in(nb.project_id)
    return role is identity.Role.ADMIN or (
        role is identity.Role.MEMBER and caller.user_name == nb.user_name)


def _view(conn: sa.Connection, ctx: deps.Context, nb: kind_rows.Notebook,
          caller: identity.Principal, request: Request) -> dict[str, Any]:
    job = job_repo.owned_jobs(conn, notebooks.KIND, nb.id).get(session.role(nb.session))
    status = notebooks.status(nb.state, session=nb.session, ready=nb.ready_at is not None)
    url = f"{origin(ctx, request.url)}{session.base_url(nb.id)}lab"
    token = nb.access_token if nb.access_token and may_use(caller, nb) else ""
    engine = next((e for e in ctx.catalog.engines if e.engine_id == nb.image_id), None)
    failed = nb.state == notebooks.State.FAILED
    return {
        "id": nb.id, "name": nb.name, "description": nb.description,
        "status": status.value,
        "action_progress": notebooks.progress(nb.state, job.phase if job else None,
                                              job.wait_reason if job else None),
        "fail_reason": nb.stop_reason if failed else "",
        "flavor": nb.flavor_id,
        "image": {"id": nb.image_id, "name": engine.engine_name if engine else nb.image_id,
                  "tag": engine.engine_version if engine else "", "type": "BUILD_IN",
                  "dev_services": ["NOTEBOOK"]},
        "lease": lease(nb),
        "pool": {"id": nb.pool_id or "", "name": nb.pool_id or ""},
        "token": token,
        "url": f"{url}?token={token}" if token else url,
        "volume": actions.volume(nb),
        "workspace_id": "0", "feature": "NOTEBOOK",
        "user": {"id": "", "name": nb.user_name},
        "endpoints": [{"service": "NOTEBOOK", "dev_service": "NOTEBOOK", "uri": url}],
        # corral: when it stops by itself, why it stopped, its session job
        "stops_at": _stops_at(nb), "stop_reason": nb.stop_reason or "",
        "job_id": job.id if job else "", "created_at": nb.created_at,
    }


def _stops_at(nb: kind_rows.Notebook) -> int | None:
    if nb.state != notebooks.State.RUNNING:
        return None
    if nb.lease_type == notebooks.LeaseType.TIMING:
        return nb.stops_at
    return (nb.last_active_at or nb.ready_at or nb.created_at) + nb.lease_ms


def lease(nb: kind_rows.Notebook) -> dict[str, Any]:
    """ModelArts' Lease: `create_at` + `duration` is when a timing lease ends (corral:
    `stops_at`, also when an idle one would end if nothing happens)."""
    start = nb.ready_at or nb.started_at or nb.created_at
    duration = (nb.stops_at - start if nb.stops_at is not None
                and nb.lease_type == notebooks.LeaseType.TIMING else nb.lease_ms)
    return {"create_at": start, "duration": duration, "enable": True, "type": nb.lease_type,
            "update_at": nb.lease_updated_at or nb.created_at, "stops_at": _stops_at(nb)}


def _flavor(f: resources.Flavor) -> dict[str, Any]:
    category = "ASCEND" if f.flavor_type == "Ascend" else f.flavor_type
    out = {"id": f.flavor_id, "name": f.flavor_name, "arch": f.arch.upper(),
           "category": category, "description": f.flavor_name, "feature": "NOTEBOOK",
           "free": True, "sold_out": False, "storages": ["EFS"], "vcpus": math.ceil(f.cpu),
           "memory": f.memory_gb * 1024}
    if f.gpu:
        out["gpu"] = {"gpu": f.gpu, "gpu_memory": "", "type": f.gpu_product}
    return out

