"""Retention: ended jobs' logs and records removed by age and by count, per project.

A job's logs (its run folder: logs, code snapshot, metric files) and its record (the job,
its events, metrics and running records) are kept apart: logs may go after days while the
record stays for months. A record goes the way a user's delete goes (the job is marked
deleted; the scheduler purges its rows and its folder), so nothing here removes rows of
its own. Registered models are never touched, and a job that registered one keeps its
record (the model's lineage points at it). `plan` says what would go (`corral gc
--dry-run`); `apply` does it.
"""

from __future__ import annotations

import dataclasses
import logging

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.storage import runs
from corral.store import db, identity_repo, job_repo, rows

log = logging.getLogger(__name__)
DAY_MS = 86_400_000


@dataclasses.dataclass(frozen=True)
class Removal:
    """An ended job whose logs or record go, and why."""

    job_id: str
    name: str
    project_id: str
    end_time: int
    why: str


@dataclasses.dataclass(frozen=True)
class Plan:
    logs: list[Removal] = dataclasses.field(default_factory=list)
    records: list[Removal] = dataclasses.field(default_factory=list)

    def __add__(self, other: Plan) -> Plan:
        return Plan(self.logs + other.logs, self.records + other.records)


def policy_of(settings: settings_mod.Settings, project: rows.Project,
              ) -> settings_mod.RetentionConfig:
    """The project's own retention (by id, then name), else the platform's."""
    own = settings.project_retention
    return own.get(project.id) or own.get(project.name) or settings.retention


def plan(conn: sa.Connection, settings: settings_mod.Settings, now: int,
         project_id: str | None = None) -> Plan:
    """What retention removes now, in one project or in all."""
    projects = identity_repo.list_projects(conn, None if project_id is None else {project_id})
    out = Plan()
    for project in projects:
        policy = policy_of(settings, project)
        if policy.logs_days or policy.records_days or policy.records_keep:
            out += _plan_project(conn, settings, policy, project.id, now)
    return out


def _plan_project(conn: sa.Connection, settings: settings_mod.Settings,
                  policy: settings_mod.RetentionConfig, project_id: str, now: int) -> Plan:
    ended = job_repo.ended_jobs(conn, project_id)
    records: dict[str, Removal] = {}
    if policy.records_keep:
        for job in ended[policy.records_keep:]:
            records[job.id] = _removal(job, f"beyond the {policy.records_keep} newest ended "
                                            "jobs its project keeps")
    if policy.records_days:
        for job in ended:
            if job.id not in records and now - job.end_time > policy.records_days * DAY_MS:
                records[job.id] = _removal(job, f"ended over {policy.records_days:g} days ago")
    logs = []
    if policy.logs_days:
        for job in ended:
            if (job.id not in records and now - job.end_time > policy.logs_days * DAY_MS
                    and runs.RunPaths(settings.runs_dir, job.id).job_dir.exists()):
                logs.append(_removal(job, f"ended over {policy.logs_days:g} days ago"))
    return Plan(logs=logs, records=list(records.values()))


def _removal(job: rows.EndedJob, why: str) -> Removal:
    return Removal(job_id=job.id, name=job.name, project_id=job.project_id,
                   end_time=job.end_time, why=why)


def apply(store: db.Store, settings: settings_mod.Settings, todo: Plan, now: int) -> None:
    """Remove what `todo` says. Records are deleted as a user deletes a job (the scheduler
    purges them); logs are removed here, each job's in a transaction that says so in its
    events first."""
    for r in todo.records:
        with store.begin() as conn:
            job_repo.add_event(conn, r.job_id, now, f"Deleted by retention: {r.why}")
            job_repo.mark_deleted(conn, r.job_id, now)
    for r in todo.logs:
        with store.begin() as conn:
            job_repo.add_event(conn, r.job_id, now, f"Logs removed by retention: {r.why}")
        runs.remove_job_dir(runs.RunPaths(settings.runs_dir, r.job_id))
    if todo.records or todo.logs:
        log.info("retention: %d ended job(s) deleted, the logs of %d more removed",
                 len(todo.records), len(todo.logs))
