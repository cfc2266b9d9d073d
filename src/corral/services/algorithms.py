"""Saving algorithms, or refusing them with nothing changed.

An algorithm is checked as a job's code would be when it is saved (its engine exists, its
code folder and boot file are there, and lie where the project may read), so that a job
made of it fails at submit only for what the job itself gives. Making a job of one is
`submit.create_job`'s (with `domain.algorithms.apply`). Each write here opens its own
transaction (the API calls them with the server's Runtime).
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.domain import algorithms, errors, identity, specs
from corral.services import catalog as catalog_mod
from corral.services import runtime, submit
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


def may_change(caller: identity.Principal, project_id: str,
               row: algorithm_repo.Algorithm) -> None:
    """Members change their own algorithms; project admins everyone's."""
    role = caller.require(project_id, identity.Role.MEMBER)
    if role is not identity.Role.ADMIN and row.user_name != caller.user_name:
        raise errors.Forbidden(f"algorithm '{row.name}' belongs to {row.user_name or 'nobody'}"
                               ": only its owner or a project admin may change it")


def put(rt: runtime.Runtime, project_id: str, body: algorithms.AlgorithmBody,
        caller: identity.Principal, algorithm_id: str | None = None) -> algorithm_repo.Algorithm:
    """Save a new algorithm (`algorithm_id` None) or replace one the caller may change;
    the algorithm as stored."""
    with rt.store.begin() as conn:
        if algorithm_id is not None:
            may_change(caller, project_id, algorithm_repo.get(conn, project_id, algorithm_id))
        saved = save(conn, rt.catalog, body, project_id=project_id, user_name=caller.user_name,
                     now=rt.now(), policy=rt.path_policy(conn, project_id), places=rt.places,
                     algorithm_id=algorithm_id)
        return algorithm_repo.get(conn, project_id, saved)


def delete(rt: runtime.Runtime, project_id: str, algorithm_id: str,
           caller: identity.Principal) -> None:
    """Delete an algorithm the caller may change (jobs made of it keep what they took)."""
    with rt.store.begin() as conn:
        may_change(caller, project_id, algorithm_repo.get(conn, project_id, algorithm_id))
        algorithm_repo.delete(conn, project_id, algorithm_id)
