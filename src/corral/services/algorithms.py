"""Saving algorithms, or refusing them with nothing changed.

An algorithm is checked as a job's code would be when it is saved (its engine exists, its
code folder and boot file are there, and lie where the project may read), so that a job
made of it fails at submit only for what the job itself gives. Making a job of one is
`submit.create_job`'s (with `domain.algorithms.apply`).
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.domain import algorithms, errors, specs
from corral.services import catalog as catalog_mod
from corral.services import submit
from corral.storage import paths
from corral.store import algorithm_repo, identity_repo

#: the one workspace a corral project has
WORKSPACE = "0"


def check(body: algorithms.AlgorithmBody, cat: catalog_mod.Catalog, *, project_id: str,
          policy: paths.Policy | None, places: submit.Places | None) -> None:
    """What a job would find wrong with the algorithm's code and engine, found now."""
    if body.metadata.workspace_id != WORKSPACE:
        raise errors.BadParameter(f"metadata.workspace_id: a corral project has one "
                                  f"workspace, '{WORKSPACE}'")
    cfg = body.job_config
    cat.engine(cfg.engine)
    submit.check_image(cat, cfg.engine)
    code = specs.Algorithm(code_dir=cfg.code_dir, boot_file=cfg.boot_file, command=cfg.command)
    submit.check_paths(code, specs.Spec(), places=places, project_id=project_id, policy=policy)


def save(conn: sa.Connection, cat: catalog_mod.Catalog, body: algorithms.AlgorithmBody, *,
         project_id: str, user_name: str, now: int, policy: paths.Policy | None = None,
         places: submit.Places | None = None, algorithm_id: str | None = None) -> str:
    """Insert the algorithm, or replace algorithm `algorithm_id`; returns its id."""
    identity_repo.require_project(conn, project_id)
    check(body, cat, project_id=project_id, policy=policy, places=places)
    values = {"project_id": project_id, "name": body.metadata.name,
              "description": body.metadata.description,
              "body": body.model_dump_json(exclude_none=True), "update_time": now}
    if algorithm_id is None:
        return algorithm_repo.insert(conn, {**values, "user_name": user_name,
                                            "create_time": now})
    algorithm_repo.update(conn, algorithm_id, values)
    return algorithm_id
