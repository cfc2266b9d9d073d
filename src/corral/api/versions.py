"""Versions of a training job and the training metrics jobs report (corral additions).

Versions follow ModelArts' older versions API in spirit (`version_name`, `pre_version_id`,
`version_count`); each version is also an ordinary training job, with its own id.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from corral.api import auth, schemas, views
from corral.api.deps import Ctx
from corral.domain import errors, jobs, versions
from corral.services import versions as version_service
from corral.storage import runs
from corral.store import job_repo, rows, version_repo

router = APIRouter(prefix="/v2/{project_id}", tags=["versions and training metrics"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}


@router.post("/training-jobs/{training_job_id}/versions", status_code=201,
             response_model=schemas.JobOut, responses=ERRORS)
def create_training_job_version(project_id: str, training_job_id: str,
                                body: versions.VersionCreate, ctx: Ctx,
                                caller: auth.Caller) -> JSONResponse:
    """A new version of the job, from the version in the URL (or `from_version`), with the
    changes given. Its outputs go to `<first version's output>/V000N` unless named."""
    now = ctx.now()
    job_id = version_service.create(ctx, project_id, training_job_id, body, caller, now)
    # read before the scheduler is woken: the new version as submitted
    with ctx.store.read() as conn:
        out = views.job(conn, job_repo.get_job(conn, project_id, job_id), ctx.catalog, now)
    ctx.wake()
    return JSONResponse(out, status_code=201)


@router.get("/training-jobs/{training_job_id}/versions", response_model=schemas.VersionsOut,
            responses=ERRORS)
def list_training_job_versions(project_id: str, training_job_id: str,
                               ctx: Ctx) -> dict[str, Any]:
    now = ctx.now()
    row, me = version_service.version_of(ctx, project_id, training_job_id)
    with ctx.store.read() as conn:
        found = version_repo.family_versions(conn, me.family_id)
        items = [_version(conn, ctx, v, job, now) for v, job in found]
    return {"job_id": me.family_id, "job_name": row.name, "job_desc": row.description,
            "version_count": len(items), "versions": items}


@router.get("/training-jobs/{training_job_id}/versions/{version}",
            response_model=schemas.VersionOut, responses=ERRORS)
def show_training_job_version(project_id: str, training_job_id: str,
                              version: versions.VersionRef, ctx: Ctx) -> dict[str, Any]:
    now = ctx.now()
    row, me = version_service.version_of(ctx, project_id, training_job_id)
    with ctx.store.read() as conn:
        v, job = version_service.pick(conn, me, row, version)
        return _version(conn, ctx, v, job, now)


def _version(conn: sa.Connection, ctx: Ctx, v: rows.Version, job: rows.Job,
             now: int) -> dict[str, Any]:
    spec = json.loads(job.spec)
    alg = spec.get("algorithm", {})
    start, end = job.start_time or 0, job.end_time or now
    code_hash, git = v.code_hash, v.git_commit
    if code_hash is None:  # not finished yet: what its latest attempt runs
        attempt = job_repo.latest_attempt(conn, job.id)
        manifest = runs.read_code_manifest(
            runs.RunPaths(ctx.settings.runs_dir, job.id).attempt_dir(attempt)) or {}
        code_hash, git = manifest.get("code_hash"), manifest.get("git_commit")
    final = (json.loads(v.final_metrics) if v.final_metrics is not None
             else version_repo.final_of(conn, job.id))
    return {
        "version_id": job.id, "version_name": versions.name(v.number),
        "pre_version_id": v.parent_job_id,
        "pre_version_name": versions.name(v.parent_number) if v.parent_number else None,
        "resume": bool(v.resume), "create_time": job.create_time,
        "phase": job.phase, "secondary_phase": job.secondary_phase,
        "duration": max(0, end - start) if start else 0,
        "final_metrics": final, "code_hash": code_hash, "git_commit": git,
        "parameters": {p["name"]: p.get("value", "") for p in alg.get("parameters", [])},
        "inputs": {c["name"]: (c["remote"].get("obs") or c["remote"].get("dataset") or {})
                   .get("obs_url", "") for c in alg.get("inputs", [])},
        "outputs": {c["name"]: c["remote"]["obs"]["obs_url"] for c in alg.get("outputs", [])},
        "code_dir": alg.get("code_dir"), "boot_file": alg.get("boot_file"),
        "command": alg.get("command"), "flavor_id": job.flavor_id,
        "node_count": job.node_count, "reason": views.reason(job, None),
    }


@router.get("/training-jobs/{training_job_id}/training-metrics",
            response_model=schemas.TrainingMetricsOut, responses=ERRORS)
def show_training_metrics(project_id: str, training_job_id: str, ctx: Ctx,
                          task: Annotated[str | None, Query(max_length=64)] = None,
                          points: views.Points = None) -> dict[str, Any]:
    """The metrics the job reported (`corral.job.log_metrics`, `corral:metrics` lines,
    CORRAL_METRICS_FILE), one series per metric, and their last values."""
    with ctx.store.read() as conn:
        row = job_repo.get_job(conn, project_id, training_job_id)
        if task is not None and task not in jobs.task_names(row.node_count):
            raise errors.NotFound(f"task '{task}' does not exist in training job "
                                  f"'{training_job_id}'")
        found = version_repo.points_of(conn, training_job_id, task)
        final = version_repo.final_of(conn, training_job_id) if task is None else None
    return {"metrics": views.metric_series(found, points),
            "final_metrics": final if final is not None else {p.name: p.value for p in found}}
