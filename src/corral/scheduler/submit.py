"""Turning a create body into a stored job, or refusing it with nothing changed.

Everything that can be known to fail at submit is checked here (flavor, engine, whether
it could ever fit, that its code and inputs exist), so a job that is accepted only waits
for resources.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, resources, specs
from corral.domain import jobs as jobs_mod
from corral.scheduler import catalog as catalog_mod
from corral.storage import local as storage
from corral.storage import paths
from corral.store import repo


def create_job(conn: sa.Connection, cat: catalog_mod.Catalog, body: specs.JobCreate, *,
               project_id: str, now: int, user_name: str = "",
               policy: paths.Policy | None = None) -> str:
    """Validate and insert a job in phase Creating; returns its id.

    With a `policy`, every local path must be one the project may use.
    """
    repo.require_project(conn, project_id)
    flavor = cat.flavor(body.spec.resource.flavor_id)
    node_count = body.spec.resource.node_count
    pool = cat.pool(body.spec.resource.pool_id)
    gpu_type = flavor.gpu_product if flavor.gpu else ""
    nodes = [n for n in cat.pool_nodes(pool)
             if not gpu_type or any(g.name == gpu_type for g in n.gpus)]
    if not nodes and cat.pool_nodes(pool):
        raise errors.NeverFits(f"no node of pool '{pool}' has {gpu_type} GPUs")
    resources.check_fits_somewhere(flavor.resources, node_count, nodes, where=f"pool '{pool}'")
    sched = body.spec.schedule_policy or specs.SchedulePolicy()
    engine = cat.engine(body.algorithm.engine)
    check_paths(body.algorithm, body.spec, policy)
    normalized = normalize(body, flavor, engine)
    job_id = repo.new_job_id()
    demand = flavor.resources
    repo.insert_job(conn, {
        "id": job_id, "project_id": project_id, "name": body.metadata.name,
        "description": body.metadata.description, "kind": body.kind,
        "user_name": user_name, "phase": jobs_mod.Phase.CREATING.value,
        "secondary_phase": jobs_mod.SecondaryPhase.CREATING.value,
        "spec": normalized.model_dump_json(exclude_none=True),
        "flavor_id": flavor.flavor_id, "node_count": node_count, "cpu": demand.cpu,
        "memory_mb": demand.memory_mb, "gpu": demand.gpu,
        "retry_limit": body.metadata.retry_limit, "create_time": now, "updated_at": now,
        "pool_id": pool, "priority": sched.priority or 1,
        "preemptible": bool(sched.preemptible), "spread": sched.placement == "spread",
        "gpu_type": gpu_type,
    })
    repo.add_event(conn, job_id, now, f"Job created: flavor {flavor.flavor_id}, "
                   f"{node_count} node(s), engine {engine.engine_id}")
    return job_id


def check_paths(algorithm: specs.Algorithm, spec: specs.Spec,
                policy: paths.Policy | None = None) -> None:
    def local(url: str, what: str) -> pathlib.Path:
        path = storage.local_path(url, what)
        if policy is not None:
            paths.confine(policy, path, what)
        return path

    if algorithm.code_dir:
        code = local(algorithm.code_dir, "algorithm.code_dir")
        if not code.is_dir():
            raise errors.BadParameter(f"algorithm.code_dir '{code}' is not a directory")
        assert algorithm.boot_file is not None
        boot = storage.resolve_boot_file(code, algorithm.boot_file)
        if not boot.is_file():
            raise errors.BadParameter(f"algorithm.boot_file '{boot}' does not exist")
    if algorithm.working_dir and (not algorithm.code_dir
                                  or os.path.isabs(algorithm.working_dir)):
        local(algorithm.working_dir, "algorithm.working_dir")
    for ch in algorithm.inputs:
        path = local(ch.url, f"input '{ch.name}'")
        if not path.exists():
            raise errors.BadParameter(f"input '{ch.name}': '{path}' does not exist")
    for out in algorithm.outputs:
        path = local(out.url, f"output '{out.name}'")
        if path.exists() and not path.is_dir():
            raise errors.BadParameter(f"output '{out.name}': '{path}' is not a directory")
    if spec.log_export_path:
        for field in ("obs_url", "host_path"):
            url = getattr(spec.log_export_path, field)
            if url:
                local(url, f"spec.log_export_path.{field}")


def normalize(body: specs.JobCreate, flavor: resources.Flavor,
              engine: Any) -> specs.JobCreate:
    """The spec as it will run: defaults filled, channels' local_dir set."""
    data = body.model_copy(deep=True)
    data.spec.resource.flavor_id = flavor.flavor_id
    data.spec.resource.flavor_name = flavor.flavor_name
    data.algorithm.engine = specs.Engine(engine_id=engine.engine_id,
                                         engine_name=engine.engine_name,
                                         engine_version=engine.engine_version)
    for ch in data.algorithm.inputs:
        ch.local_dir = str(storage.local_path(ch.url, ch.name))
    for out in data.algorithm.outputs:
        out.local_dir = str(storage.local_path(out.url, out.name))
        out.mode = out.mode or "upload_periodically"
        out.period = out.period or "30"
    return data


def spec_dict(row: Any) -> dict[str, Any]:
    return dict(json.loads(row.spec))
