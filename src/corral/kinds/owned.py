"""Training jobs owned by an object of a job kind: submitted once, watched, stopped.

A job records its owner (the kind and the object's id) and its role there, and the three
are unique together: a controller that submits the same role again (after a crash between
its submission and its next pass, say) gets the job it made, never a second one.
Submitting goes through the same service as the API's (`runtime.Runtime.submit_job`: flavor,
pool, paths under the project's storage roots), as the user who made the owning object.
"""

from __future__ import annotations

import dataclasses
import re
import uuid

import sqlalchemy as sa

from corral.domain import errors, jobs, specs
from corral.services import runtime
from corral.store import job_repo, rows


@dataclasses.dataclass(frozen=True)
class Owner:
    """The object of a job kind that owns jobs, and whose jobs they are."""

    kind: str
    id: str
    project_id: str
    user_name: str
    name: str  #: the object's name: its jobs' names start with it


def job_name(owner: Owner, role: str) -> str:
    """The name of the job playing `role` for `owner`: the owner's name and the role, in
    the letters a job name may have, at most 64 of them."""
    suffix = re.sub(r"[^A-Za-z0-9_-]+", "-", role).strip("-")
    return f"{owner.name[:63 - len(suffix)]}-{suffix}"[-64:]


def submit(conn: sa.Connection, services: runtime.Runtime, owner: Owner, role: str,
           body: specs.JobCreate, now: int) -> rows.Job:
    """The job playing `role` for `owner`: the one submitted before, or a new one made
    from `body` (named after the owner and the role), submitted as the API submits one
    (`runtime.Runtime.submit_job`). Call `services.wake` once committed."""
    existing = job_repo.owned_jobs(conn, owner.kind, owner.id).get(role)
    if existing is not None:
        return existing
    named = body.model_copy(update={"metadata": body.metadata.model_copy(
        update={"name": job_name(owner, role)})})
    job_id = services.submit_job(conn, named, project_id=owner.project_id,
                                 user_name=owner.user_name, now=now,
                                 owner=(owner.kind, owner.id, role))
    job = job_repo.job_by_id(conn, job_id)
    assert job is not None
    return job


def try_submit(conn: sa.Connection, services: runtime.Runtime, owner: Owner, role: str,
               body: specs.JobCreate, now: int) -> rows.Job | errors.CorralError:
    """`submit` in a savepoint of the caller's transaction: a refusal (a flavor gone, a
    path the project may no longer use) is returned, with nothing of it written, so that
    the caller's transaction goes on to record it."""
    try:
        with conn.begin_nested():
            return submit(conn, services, owner, role, body, now)
    except errors.CorralError as exc:
        return exc


def probe(conn: sa.Connection, services: runtime.Runtime, owner: Owner, role: str,
          body: specs.JobCreate, now: int) -> None:
    """Submit `body` as the job would be, and take it back: the checks any job gets (its
    flavor, pool and engine, that its code and inputs exist, paths the project may use),
    nothing kept; errors.CorralError for what it refuses. An object is probed when it is
    made, so that a template no job could be made of is refused then, not when its job
    is due."""
    named = body.model_copy(update={"metadata": body.metadata.model_copy(
        update={"name": f"probe-{uuid.uuid4().hex[:12]}"})})
    savepoint = conn.begin_nested()
    try:
        services.submit_job(conn, named, project_id=owner.project_id,
                            user_name=owner.user_name, now=now,
                            owner=(owner.kind, owner.id, f"probe/{role}"))
    finally:
        savepoint.rollback()


def stop(conn: sa.Connection, owner: Owner, now: int, why: str) -> int:
    """Ask every job of `owner` that may still run to stop; how many were asked."""
    asked = 0
    for job in job_repo.owned_jobs(conn, owner.kind, owner.id).values():
        if jobs.Phase(job.phase) in jobs.TERMINABLE:
            asked += job_repo.request_terminate(conn, job.id, now, why)
    return asked


def delete(conn: sa.Connection, owner: Owner, now: int) -> None:
    """Delete every job of `owner` (stopped first where they run); their outputs and the
    models they registered stay, as when a user deletes a job."""
    for job in job_repo.owned_jobs(conn, owner.kind, owner.id).values():
        if job.deleted_at is None:
            job_repo.mark_deleted(conn, job.id, now)
            if jobs.Phase(job.phase) in jobs.TERMINABLE:
                job_repo.request_terminate(conn, job.id, now, "Job deleted with its owner")


def ended(job: rows.Job) -> bool:
    return jobs.Phase(job.phase) in jobs.TERMINAL


def succeeded(job: rows.Job) -> bool:
    return job.phase == jobs.Phase.COMPLETED.value
