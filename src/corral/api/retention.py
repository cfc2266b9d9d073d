"""corral: retention of ended jobs, shown (`GET`, what would go now) and applied at once
(`POST`, a project admin). The server applies it by itself every `retention_interval`."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter

from corral.api import auth, jobs
from corral.api.deps import Ctx
from corral.services import retention
from corral.store import identity_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["retention"])


def _body(todo: retention.Plan, *, applied: bool) -> dict[str, Any]:
    return {"applied": applied,
            "logs": [dataclasses.asdict(r) for r in todo.logs],
            "records": [dataclasses.asdict(r) for r in todo.records]}


@router.get("/retention", responses=jobs.ERRORS)
def show_retention(project_id: str, ctx: Ctx) -> dict[str, Any]:
    """What retention would remove in the project now: the ended jobs whose logs go and
    those whose records go, each with why."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        return _body(retention.plan(conn, ctx.settings, ctx.now(), project_id), applied=False)


@router.post("/retention", responses=jobs.ERRORS, dependencies=[auth.require_role("admin")])
def apply_retention(project_id: str, ctx: Ctx) -> dict[str, Any]:
    """Apply the project's retention now (project admin); answers what was removed."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        todo = retention.plan(conn, ctx.settings, ctx.now(), project_id)
    retention.apply(ctx.store, ctx.settings, todo, ctx.now())
    if todo.records:
        ctx.wake()  # the scheduler purges them
    return _body(todo, applied=True)
