"""Flavors, engines and the server's own description."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

import corral
from corral.api import auth, deps, jobs, schemas, views
from corral.api.deps import Ctx
from corral.scheduler import leadership
from corral.store import identity_repo

router = APIRouter(tags=["catalog"])


@router.get("/v2/{project_id}/training-job-flavors", response_model=schemas.FlavorsOut,
            responses=jobs.ERRORS)
def list_training_job_flavors(project_id: str, ctx: Ctx,
                              flavor_type: Literal["CPU", "GPU", "Ascend"] | None = None
                              ) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    flavors = [views.flavor(f) for f in ctx.catalog.flavors
               if flavor_type is None or f.flavor_type == flavor_type]
    return {"total_count": len(flavors), "flavors": flavors}


@router.get("/v2/{project_id}/training-job-engines", response_model=schemas.EnginesOut,
            responses=jobs.ERRORS)
def list_training_job_engines(project_id: str, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    items = [{"engine_id": e.engine_id, "engine_name": e.engine_name,
              "engine_version": e.engine_version, "v1_compatible": False, "run_user": "",
              # No images here: corral's engines are interpreters. image_version is what
              # the SDK reads; `python` (corral's) is the interpreter the engine runs.
              "image_info": {"image_version": e.engine_version, "python": e.python}}
             for e in ctx.catalog.engines]
    return {"total": len(items), "items": items}


@router.get("/corral/info", response_model=schemas.InfoOut)
def info(ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """The server, and the caller's default project (the server's, if theirs)."""
    project = ctx.default_project_id
    if caller.role_in(project) is None:
        project = caller.key_project or min(caller.roles, default="")
    return {
        "version": corral.__version__, "default_project_id": project,
        "database": ctx.store.engine.dialect.name, "home": str(ctx.settings.home),
        "containment": ctx.containment,
        "nodes": [{"name": n.name, "cpu": n.cpu, "memory_mb": n.memory_mb,
                   "gpus": len(n.gpus), "accelerators": dict(n.capacity.accel)}
                  for n in ctx.catalog.nodes],
        "server": ctx.server_id, "leader": _leader(ctx),
    }


def _leader(ctx: deps.Context) -> dict[str, Any] | None:
    lease, now = leadership.current(ctx.store)
    if lease.holder is None or lease.expires_at <= now:
        return None
    return {"server": lease.holder, "name": lease.holder.rsplit(":", 2)[0], "url": lease.url,
            "epoch": lease.epoch, "since": lease.acquired_at,
            "this_server": lease.holder == ctx.server_id}


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}
