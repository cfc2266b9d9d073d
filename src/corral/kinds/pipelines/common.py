"""What the controller and the pipeline actions share: the platform's pieces, a
pipeline's owner and shape, its jobs' roles, and the rows of new runs."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain.pipelines import shape, spec, status
from corral.kinds import owned
from corral.services import runtime
from corral.storage import objects, paths
from corral.store import db, identity_repo, job_repo, kind_rows, pipeline_repo

KIND = pipeline_repo.KIND


@dataclasses.dataclass(frozen=True)
class Platform:
    """What pipelines need of the server: the store, the services (that submit their
    jobs), the settings (runs and storage roots), the object stores (model
    registration)."""

    store: db.Store
    services: runtime.Runtime
    settings: settings_mod.Settings
    stores: objects.Stores


def owner(p: kind_rows.Pipeline) -> owned.Owner:
    return owned.Owner(kind=KIND, id=p.id, project_id=p.project_id, user_name=p.user_name,
                       name=p.name)


def role(attempt: int, task: str, item: int | None) -> str:
    """A run's job's role in its pipeline: `a2/train`, `a2/train/3`."""
    return f"a{attempt}/{task}" + ("" if item is None else f"/{item}")


def shape_of(p: kind_rows.Pipeline) -> shape.Shape:
    return _shape(p.id, p.spec)


@functools.lru_cache(maxsize=256)
def _shape(_pipeline_id: str, text: str) -> shape.Shape:
    # Accepted once, so checked again only for its shape (not its templates' paths).
    return shape.check(spec.PipelineCreate.model_validate_json(text))


def new_run(p: kind_rows.Pipeline, attempt: int, key: str, task: str, item: int | None,
            now: int, **values: Any) -> dict[str, Any]:
    """The row of a run of `p`'s attempt, waiting unless `values` say otherwise (every
    column given: rows are inserted together)."""
    unset = dict.fromkeys(("job_id", "source", "cache_key", "parameters", "inputs", "outputs",
                           "metrics", "message", "submitted_at", "ended_at",
                           "outputs_removed_at"))
    return {**unset, "pipeline_id": p.id, "attempt": attempt, "key": key,
            "project_id": p.project_id, "task": task, "item": item,
            "state": status.TaskState.WAITING.value, "origin": "run", "updated_at": now,
            **values}


def dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), separators=(",", ":"))


def policy(conn: sa.Connection, settings: settings_mod.Settings,
           project_id: str) -> paths.Policy:
    """Where the project's jobs may read and write (what a pipeline may remove)."""
    return paths.policy_for(settings, project_id=project_id,
                            project_name=identity_repo.find_project(conn, project_id).name,
                            is_default=project_id == identity_repo.default_project(conn))


def jobs_finished(conn: sa.Connection, pipeline_id: str) -> bool:
    """Whether the storage component has finished with every job of the pipeline: until
    then a job's last files may still be written (a stopped job's too), and removing its
    outputs before would leave them behind."""
    return all(j.finalized_at is not None
               for j in job_repo.owned_jobs(conn, KIND, pipeline_id).values())


def source(run: kind_rows.PipelineRun) -> str:
    """How a later run names `run` as the one it reuses or was cached from."""
    return run.source or f"{run.pipeline_id}/{run.attempt}/{run.key}"
