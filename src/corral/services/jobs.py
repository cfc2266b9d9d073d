"""What users do to training jobs once they are submitted, and the submission itself, each
in a transaction of its own.

The rules are the job's state machine (domain/jobs.py): a stop is asked of a job that can
still be terminated, and a job being terminated is left to end; the scheduler does the
rest on its next pass (the caller wakes it once it has answered). Who may change a job is
checked here, in the same transaction as the change.
"""

from __future__ import annotations

from corral.domain import errors, identity, jobs, specs
from corral.services import runtime
from corral.store import job_repo, rows


def create(rt: runtime.Runtime, body: specs.JobCreate, *, project_id: str, user_name: str,
           now: int) -> rows.Job:
    """Submit a job with every check a job gets (`Runtime.submit_job`); the job as stored."""
    with rt.store.begin() as conn:
        job_id = rt.submit_job(conn, body, project_id=project_id, user_name=user_name, now=now)
        return job_repo.get_job(conn, project_id, job_id)


def describe(rt: runtime.Runtime, project_id: str, job_id: str, description: str,
             caller: identity.Principal, now: int) -> None:
    """Change the job's description."""
    with rt.store.begin() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        caller.may_change_job(project_id, row.user_name)
        job_repo.set_description(conn, job_id, now, description)


def delete(rt: runtime.Runtime, project_id: str, job_id: str, caller: identity.Principal,
           now: int) -> None:
    """Delete the job and its logs; a job that can still be terminated is stopped first.
    Its outputs are kept."""
    with rt.store.begin() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        caller.may_change_job(project_id, row.user_name)
        job_repo.mark_deleted(conn, job_id, now)
        if jobs.Phase(row.phase) in jobs.TERMINABLE:
            job_repo.request_terminate(conn, job_id, now, "Job deleted: stopping it")


def stop(rt: runtime.Runtime, project_id: str, job_id: str, caller: identity.Principal,
         now: int) -> None:
    """Ask for the job to be terminated: Creating, Pending or Running jobs are, a job
    already Terminating is left as it is, any other is refused (errors.InvalidState)."""
    with rt.store.begin() as conn:
        row = job_repo.get_job(conn, project_id, job_id)
        caller.may_change_job(project_id, row.user_name)
        phase = jobs.Phase(row.phase)
        if phase in jobs.TERMINABLE:
            job_repo.request_terminate(conn, job_id, now, "Termination requested")
        elif phase is not jobs.Phase.TERMINATING:
            raise errors.InvalidState(
                f"training job is {phase.value}: only Creating, Pending or Running jobs "
                "can be terminated")
