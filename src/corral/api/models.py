"""The model registry (a corral addition): models, versions, aliases, archives.

A training job that completes registers its model output channel as a new version of a
model (see `domain.models`); these endpoints list, show, alias, download and delete them,
and register a version from any ended job on request.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse
from pydantic import Field
from starlette.background import BackgroundTask

from corral.api import auth, schemas
from corral.api.deps import Ctx
from corral.domain import errors, jobs, models, specs, versions
from corral.services import finishing
from corral.services import models as model_service
from corral.storage import objects
from corral.store import identity_repo, job_repo, model_repo, rows

router = APIRouter(prefix="/v2/{project_id}", tags=["models"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}


#: a version of a model: its number (3, V0003), an alias, or `latest`
VersionRef = Annotated[str, specs.Pattern(
    r"^(?:[Vv]?[0-9]{1,9}|[A-Za-z][A-Za-z0-9_-]{0,63})$",
    "a model version is a number (3, V0003), an alias, or 'latest'")]


class AliasBody(specs.Model):
    version: specs.Ordinal


class RegisterBody(specs.Model):
    """Register an ended job's output channel as a new version of the model."""

    job_id: str = Field(min_length=1, max_length=64)
    #: the output channel (default: the job's model channel)
    channel: specs.ChannelName | None = None


@router.get("/models", response_model=schemas.ModelsOut, responses=ERRORS)
def list_models(project_id: str, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        items = [_model(conn, m, with_versions=False)
                 for m in model_repo.list_models(conn, project_id)]
    return {"total": len(items), "models": items}


@router.get("/models/{model_name}", response_model=schemas.ModelOut, responses=ERRORS)
def show_model(project_id: str, model_name: specs.ModelName, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        return _model(conn, model_repo.get(conn, project_id, model_name), with_versions=True)


@router.get("/models/{model_name}/versions/{version}", response_model=schemas.ModelVersionOut,
            responses=ERRORS)
def show_model_version(project_id: str, model_name: specs.ModelName, version: VersionRef,
                       ctx: Ctx) -> dict[str, Any]:
    """`version` is a number, an alias, or `latest`."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        row = model_service.resolve(conn, model, version)
        return _version(model, row, model_repo.aliases(conn, model.id))


@router.post("/models/{model_name}/versions", status_code=201,
             response_model=schemas.ModelVersionOut, responses=ERRORS)
def register_model_version(project_id: str, model_name: specs.ModelName, body: RegisterBody,
                           ctx: Ctx) -> JSONResponse:
    with ctx.store.read() as conn:
        job = job_repo.get_job(conn, project_id, body.job_id)
    if jobs.Phase(job.phase) not in jobs.TERMINAL:
        raise errors.InvalidState(f"training job '{body.job_id}' is {job.phase}: only an "
                                  "ended job's outputs can be registered")
    spec = job_repo.job_spec(job)
    channel = body.channel
    if channel is None:
        reg = models.registration(spec, ctx.settings.model_channel)
        outputs = [o.name for o in spec.algorithm.outputs]
        channel = reg.channel if reg else (outputs[0] if outputs else None)
    if channel is None:
        raise errors.BadParameter(f"training job '{body.job_id}' has no output channel")
    assert ctx.stores is not None
    row = finishing.register(ctx.store, ctx.stores, ctx.settings, job, model_name, channel,
                             ctx.now)
    with ctx.store.read() as conn:
        model = model_repo.get(conn, project_id, model_name)
        out = _version(model, row, model_repo.aliases(conn, model.id))
    return JSONResponse(out, status_code=201)


@router.put("/models/{model_name}/aliases/{alias}", response_model=schemas.ModelOut,
            responses=ERRORS)
def set_model_alias(project_id: str, model_name: specs.ModelName, alias: str, body: AliasBody,
                    ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """Point `alias` at a version (moving it from the one it named before)."""
    models.check_alias(alias)
    model = model_service.set_alias(ctx, project_id, model_name, alias, body.version, caller)
    with ctx.store.read() as conn:
        return _model(conn, model, with_versions=False)


@router.delete("/models/{model_name}/aliases/{alias}", response_model=schemas.ModelOut,
               responses=ERRORS)
def delete_model_alias(project_id: str, model_name: specs.ModelName, alias: str,
                       ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    model = model_service.drop_alias(ctx, project_id, model_name, alias, caller)
    with ctx.store.read() as conn:
        return _model(conn, model, with_versions=False)


@router.delete("/models/{model_name}/versions/{version}", responses=ERRORS)
def delete_model_version(project_id: str, model_name: specs.ModelName, version: VersionRef,
                         ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """Delete a version and its files; aliases naming it go too. Its number is not reused."""
    model_service.delete_version(ctx, project_id, model_name, version, caller)
    return {}


@router.delete("/models/{model_name}", responses=ERRORS)
def delete_model(project_id: str, model_name: specs.ModelName, ctx: Ctx) -> dict[str, Any]:
    """Delete the model, every version of it and their files."""
    model_service.delete_model(ctx, project_id, model_name)
    return {}


@router.get("/models/{model_name}/versions/{version}/archive",
            responses={200: {"content": {"application/gzip": {}}}, **ERRORS})
def download_model_version(project_id: str, model_name: specs.ModelName, version: VersionRef,
                           ctx: Ctx) -> FileResponse:
    """The version's files as one gzipped tar, under a folder `<model>-v<N>/`."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        model = model_repo.get(conn, project_id, model_name)
        row = model_service.resolve(conn, model, version)
    assert ctx.stores is not None
    top = f"{model.name}-v{row.version}"
    fd, tmp = tempfile.mkstemp(prefix="corral-model-", suffix=".tar.gz")
    try:
        with os.fdopen(fd, "wb") as out:
            objects.write_archive(ctx.stores.open(row.location, project_id), out, top)
    except FileNotFoundError:
        os.unlink(tmp)
        raise errors.NotFound(f"the files of model '{model_name}' version {row.version} "
                              f"are gone from {row.location}") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return FileResponse(tmp, media_type="application/gzip", filename=f"{top}.tar.gz",
                        background=BackgroundTask(os.unlink, tmp))


def _model(conn: sa.Connection, m: rows.Model, *, with_versions: bool) -> dict[str, Any]:
    found = model_repo.versions(conn, m.id)
    aliases = model_repo.aliases(conn, m.id)
    out: dict[str, Any] = {
        "id": m.id, "name": m.name, "create_time": m.created_at, "update_time": m.updated_at,
        "latest_version": found[-1].version if found else None, "version_count": len(found),
        "aliases": aliases,
    }
    if with_versions:
        out["versions"] = [_version(m, r, aliases) for r in found]
    return out


def _version(m: rows.Model, r: rows.ModelVersion, aliases: dict[str, int]) -> dict[str, Any]:
    return {
        "model_name": m.name, "version": r.version,
        "aliases": sorted(a for a, v in aliases.items() if v == r.version),
        "create_time": r.created_at, "location": r.location, "size_bytes": r.size_bytes,
        "file_count": r.file_count, "source_job_id": r.source_job_id,
        "source_job_name": r.source_job_name,
        "source_version": versions.name(r.source_version) if r.source_version else None,
        "source_channel": r.source_channel, "source_phase": r.source_phase,
        "metrics": json.loads(r.metrics), "parameters": json.loads(r.parameters),
        "inputs": json.loads(r.inputs), "code_hash": r.code_hash, "git_commit": r.git_commit,
        "datasets": json.loads(r.datasets),
    }


