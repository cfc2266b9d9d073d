"""Datasets (a corral addition, Sedna's Dataset): index files of samples, with their count.

A dataset names an index file, one sample a line (txt or csv; a csv's header is no
sample), local or s3://. Its `number_of_samples` is counted when it is made, on each
append, and whenever it is shown and its file changed since. Incremental-learning jobs
watch datasets for new samples. Its versions freeze its samples as they were, for training
jobs to read (`inputs[].remote.dataset{id, version_id}`).
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import Field, model_validator

from corral.api import auth, deps, schemas
from corral.api.deps import Ctx
from corral.domain import errors, specs, versions
from corral.services import dataset_versions, datasets
from corral.storage import paths
from corral.store import dataset_repo, identity_repo, kind_rows

router = APIRouter(prefix="/v2/{project_id}", tags=["datasets"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorBody} for code in (400, 404, 409, 500)}


class DatasetCreate(specs.Model):
    """`{name, url, format?, description?}`, or Sedna's `{metadata: {name}, spec: {url,
    format}}`."""

    name: str = Field(min_length=1, max_length=64)
    url: str = Field(min_length=1, max_length=4096)
    format: str | None = Field(default=None, max_length=8)
    description: str = Field(default="", max_length=256)

    @model_validator(mode="before")
    @classmethod
    def _sedna(cls, v: Any) -> Any:
        if isinstance(v, dict) and isinstance(v.get("spec"), dict):
            meta = v.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            return {**v["spec"], "name": meta.get("name"),
                    "description": meta.get("description", "")}
        return v


class SamplesIn(specs.Model):
    #: lines to append, one sample each
    samples: list[str] = Field(min_length=1, max_length=datasets.MAX_APPEND)


class DatasetOut(schemas.Out):
    id: str
    name: str
    description: str = ""
    url: str
    format: str
    number_of_samples: int
    create_time: int
    update_time: int
    checked_time: int | None = None
    user_name: str = ""
    message: str | None = Field(default=None, description="why its file could not be read")


class DatasetsOut(schemas.Out):
    total: int
    datasets: list[DatasetOut]


class AppendedOut(schemas.Out):
    appended: int
    number_of_samples: int


class VersionCreate(specs.Model):
    description: str = Field(default="", max_length=256)


class VersionFileOut(schemas.Out):
    path: str
    size: int
    sha256: str


class VersionOut(schemas.Out):
    version_id: str
    version_name: str = Field(description="V0001, V0002, ... in its dataset")
    dataset_id: str
    dataset_name: str
    description: str = ""
    format: str
    number_of_samples: int
    size_bytes: int
    content_hash: str = Field(description="sha256 of its files' paths, sizes and sha256s")
    files: list[VersionFileOut]
    location: str = Field(description="the folder of its frozen files (local, or s3://)")
    create_time: int
    user_name: str = ""


class VersionsOut(schemas.Out):
    total: int
    versions: list[VersionOut]


def view(d: kind_rows.Dataset, message: str | None = None) -> dict[str, Any]:
    return {"id": d.id, "name": d.name, "description": d.description, "url": d.url,
            "format": d.format, "number_of_samples": d.number_of_samples,
            "create_time": d.created_at, "update_time": d.updated_at,
            "checked_time": d.checked_at, "user_name": d.user_name, "message": message}


def version_view(d: kind_rows.Dataset, v: kind_rows.DatasetVersion) -> dict[str, Any]:
    return {"version_id": v.id, "version_name": versions.name(v.number), "dataset_id": d.id,
            "dataset_name": d.name, "description": v.description, "format": v.format,
            "number_of_samples": v.number_of_samples, "size_bytes": v.size_bytes,
            "content_hash": v.content_hash, "files": json.loads(v.files),
            "location": v.location, "create_time": v.created_at, "user_name": v.user_name}


def _confine(ctx: deps.Context, project_id: str) -> datasets.Confine:
    with ctx.store.read() as conn:
        policy = ctx.path_policy(conn, project_id)
    return functools.partial(paths.confine, policy)


@router.post("/datasets", status_code=201, response_model=DatasetOut, responses=ERRORS)
def create_dataset(project_id: str, body: DatasetCreate, ctx: Ctx,
                   caller: auth.Caller) -> JSONResponse:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    # The file is read before the transaction: it may be remote, and slow.
    new = datasets.examine(project_id=project_id, name=body.name, url=body.url,
                           fmt=body.format, stores=ctx.stores,
                           confine=_confine(ctx, project_id))
    found = datasets.add(ctx.store, new, user_name=caller.user_name,
                         description=body.description, now=ctx.now())
    return JSONResponse(view(found), status_code=201)


@router.get("/datasets", response_model=DatasetsOut, responses=ERRORS)
def list_datasets(project_id: str, ctx: Ctx) -> dict[str, Any]:
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        found = dataset_repo.list_datasets(conn, project_id)
    return {"total": len(found), "datasets": [view(d) for d in found]}


@router.get("/datasets/{dataset}", response_model=DatasetOut, responses=ERRORS)
def show_dataset(project_id: str, dataset: str, ctx: Ctx) -> dict[str, Any]:
    """A dataset by id or name, its samples counted again if its file changed."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        found = dataset_repo.get(conn, project_id, dataset)
    try:
        snap = datasets.changed(found, ctx.stores, _confine(ctx, project_id))
    except errors.CorralError as exc:
        return view(found, exc.message)
    if snap is not None:
        found = datasets.recount(ctx.store, found, snap, ctx.now())
    return view(found)


@router.post("/datasets/{dataset}/samples", response_model=AppendedOut, responses=ERRORS)
def append_samples(project_id: str, dataset: str, body: SamplesIn, ctx: Ctx) -> dict[str, Any]:
    """Append lines to the dataset's index file; each is a sample."""
    lines = datasets.check_lines(body.samples)
    confine = _confine(ctx, project_id)
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        found = dataset_repo.get(conn, project_id, dataset)
    number = datasets.append(ctx.store, found.id, lines, ctx.stores, confine, ctx.now())
    ctx.wake_kinds()
    return {"appended": len(lines), "number_of_samples": number}


@router.delete("/datasets/{dataset}", responses=ERRORS)
def delete_dataset(project_id: str, dataset: str, ctx: Ctx,
                   caller: auth.Caller) -> dict[str, Any]:
    """Forget the dataset (its index file stays); refused while a loop uses it."""
    dataset_versions.delete(ctx.store, ctx.stores, ctx.settings.home, project_id, dataset,
                            caller)
    return {}


@router.post("/datasets/{dataset}/versions", status_code=201, response_model=VersionOut,
             responses=ERRORS)
def create_version(project_id: str, dataset: str, ctx: Ctx, caller: auth.Caller,
                   body: VersionCreate | None = None) -> JSONResponse:
    """Freeze the samples the dataset holds now as its next version (the body is
    optional)."""
    body = body or VersionCreate()
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    made = dataset_versions.create(
        ctx.store, ctx.stores, ctx.settings.home, project_id=project_id, ref=dataset,
        description=body.description, user_name=caller.user_name,
        confine=_confine(ctx, project_id), now=ctx.now)
    return JSONResponse(version_view(made.dataset, made.version), status_code=201)


@router.get("/datasets/{dataset}/versions", response_model=VersionsOut, responses=ERRORS)
def list_versions(project_id: str, dataset: str, ctx: Ctx) -> dict[str, Any]:
    """The dataset's versions, oldest first."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        found = dataset_repo.get(conn, project_id, dataset)
        made = dataset_repo.versions_of(conn, found.id)
    return {"total": len(made), "versions": [version_view(found, v) for v in made]}


@router.delete("/datasets/{dataset}/versions/{version}", responses=ERRORS)
def delete_version(project_id: str, dataset: str,
                   version: Annotated[str, Path(min_length=1, max_length=64)],
                   ctx: Ctx, caller: auth.Caller) -> dict[str, Any]:
    """Delete a version (by its id, name or number) and its files; refused while a job
    that has not ended reads it. Its number is not given to a later version."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
    dataset_versions.delete_version(ctx.store, ctx.stores, project_id, dataset, version,
                                    caller, ctx.now)
    return {}


@router.get("/datasets/{dataset}/versions/{version}", response_model=VersionOut,
            responses=ERRORS)
def show_version(project_id: str, dataset: str,
                 version: Annotated[str, Path(min_length=1, max_length=64)],
                 ctx: Ctx) -> dict[str, Any]:
    """A version by its id, name (V0002) or number."""
    with ctx.store.read() as conn:
        identity_repo.require_project(conn, project_id)
        found = dataset_repo.get(conn, project_id, dataset)
        return version_view(found, dataset_repo.get_version(conn, found, version))
