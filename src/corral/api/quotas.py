"""Quotas, pools and the queue: `training-quotas` (PUT is for platform admins: a
project's own admin must not raise its own share), and corral's views
of the pools and of the queue.

A quota caps what one project may hold in one pool, per resource; `borrowing` lets it go
beyond on idle capacity (such jobs are the first to be preempted to give it back), and
`weight` is its fair share against other projects in the pool.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corral.api import auth, jobs
from corral.api.deps import Ctx
from corral.domain import errors, resources, specs
from corral.services import pools
from corral.store import identity_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["scheduling"])


class QuotaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool_id: specs.PoolId
    #: cores; null: no limit
    cpu: specs.Amount | None = None
    memory_gb: specs.Amount | None = None
    gpu: specs.Count | None = None
    #: limits per accelerator by name ({"npu": 8}); one left out has no limit
    accelerators: dict[str, specs.Count] | None = None
    borrowing: bool = False
    weight: float = Field(default=1.0, gt=0, le=1000)

    @field_validator("accelerators")
    @classmethod
    def _names(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        for name in v or {}:
            try:
                resources.check_accel_name(name)
            except errors.BadParameter as exc:
                raise ValueError(exc.message) from None
        return v


class QuotasIn(BaseModel):
    """The body of `PUT /v2/{project_id}/training-quotas`: the project's quotas, one per
    pool; pools left out have no quota."""

    model_config = ConfigDict(extra="forbid")

    quotas: list[QuotaIn] = Field(max_length=100)

    @model_validator(mode="after")
    def _unique(self) -> QuotasIn:
        seen = [q.pool_id for q in self.quotas]
        dup = sorted({p for p in seen if seen.count(p) > 1})
        if dup:
            raise ValueError(f"pool given twice: {', '.join(dup)}")
        return self


@router.get("/training-quotas", responses=jobs.ERRORS)
def show_training_quotas(project_id: str, ctx: Ctx) -> dict[str, Any]:
    """The project's quota per pool, with what it uses now."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        return pools.project_quotas(conn, project_id)


@router.put("/training-quotas", responses=jobs.ERRORS,
            dependencies=[auth.require_platform_admin()])
def set_training_quotas(project_id: str, body: QuotasIn, ctx: Ctx) -> dict[str, Any]:
    """Replace the project's quotas (admin only). Running jobs are not stopped by a lower
    quota; new ones wait until the project is back under it."""
    rows = [{"pool_id": q.pool_id, "cpu": q.cpu, "gpu": q.gpu, "borrowing": q.borrowing,
             "weight": q.weight,
             "memory_mb": None if q.memory_gb is None else round(q.memory_gb * 1024),
             "accelerators": resources.accels_json(
                 resources.accels(q.accelerators or {}, keep_zero=True))}
            for q in body.quotas]
    out = pools.set_quotas(ctx, project_id, rows)  # BadParameter for an unknown pool
    ctx.wake()
    return out


@router.get("/training-pools", responses=jobs.ERRORS)
def list_training_pools(project_id: str, ctx: Ctx) -> dict[str, Any]:
    """corral: every pool's nodes, capacity, use, and use and quota per project."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        items = pools.pools(conn, ctx.catalog)
    return {"total": len(items), "pools": items}


@router.get("/training-queue", responses=jobs.ERRORS)
def show_training_queue(project_id: str, ctx: Ctx,
                        pool_id: specs.PoolId | None = None,
                        ) -> dict[str, Any]:
    """corral: the jobs waiting in each pool, in order, with why each waits."""
    if pool_id is not None:
        ctx.catalog.pool(pool_id)
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        return {"pools": pools.queue(conn, ctx.catalog, project_id, pool_id)}
