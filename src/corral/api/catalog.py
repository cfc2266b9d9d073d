"""Flavors, engines and the server's own description."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

import corral
from corral.api import auth, deps, jobs, schemas, views
from corral.api.deps import Ctx
from corral.domain import downsample
from corral.services import leasing
from corral.store import identity_repo, node_repo, rows

router = APIRouter(tags=["catalog"])


@router.get("/v2/{project_id}/training-job-flavors", response_model=schemas.FlavorsOut,
            responses=jobs.ERRORS)
def list_training_job_flavors(project_id: str, ctx: Ctx,
                              flavor_type: Literal["CPU", "GPU", "Ascend"] | None = None
                              ) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    flavors = [views.flavor(f, ctx.catalog.disk_gb) for f in ctx.catalog.flavors
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


@router.get("/corral/node-usage", response_model=schemas.NodeUsagesOut, responses=jobs.ERRORS)
def node_usage(ctx: Ctx, _caller: auth.Caller,
               minutes: Annotated[int, Query(ge=1, le=1440)] = 60,
               points: views.Points = 300) -> dict[str, Any]:
    """corral: each node's use over the last `minutes`, machine-wide (whoever uses it),
    sampled every `metrics_interval` by the scheduling server (the Nodes page)."""
    with ctx.store.read() as conn:
        found = node_repo.since(conn, ctx.now() - minutes * 60_000)
    by_node: dict[str, list[rows.NodeSample]] = {}
    for r in found:
        by_node.setdefault(r.node, []).append(r)
    return {"minutes": minutes,
            "nodes": [_usage(n, by_node.get(n.name, []), points) for n in ctx.catalog.nodes]}


def _usage(node: Any, samples: list[rows.NodeSample], points: int | None) -> dict[str, Any]:
    with_gpu = bool(samples) and all(s.gpu_util is not None for s in samples)
    series = [[s.cpu_percent for s in samples], [s.mem_mb for s in samples]]
    if with_gpu:
        series += [[s.gpu_util or 0.0 for s in samples], [s.gpu_mem_mb or 0.0 for s in samples]]
    times, values = downsample.means([s.time for s in samples], series, points or 300)
    return {"name": node.name, "cpu": node.cpu, "memory_mb": node.memory_mb,
            "gpus": len(node.gpus), "gpu_memory_mb": sum(g.memory_mb for g in node.gpus),
            "times": times, "cpu_percent": values[0], "mem_mb": values[1],
            "gpu_util": values[2] if with_gpu else None,
            "gpu_mem_mb": values[3] if with_gpu else None}


def _leader(ctx: deps.Context) -> dict[str, Any] | None:
    lease, now = leasing.current(ctx.store)
    if lease.holder is None or lease.expires_at <= now:
        return None
    return {"server": lease.holder, "name": lease.holder.rsplit(":", 2)[0], "url": lease.url,
            "epoch": lease.epoch, "since": lease.acquired_at,
            "this_server": lease.holder == ctx.server_id}


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}
