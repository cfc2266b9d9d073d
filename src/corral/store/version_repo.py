"""SQL for job versions, the training metrics jobs report, and ended jobs' finishing.

Like job_repo's, functions here run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, jobs
from corral.domain.search import spec as search_spec
from corral.store import rows, schema

JOBS = schema.jobs
FAMILIES = schema.job_families
VERSIONS = schema.job_versions
POINTS = schema.training_metrics
OFFSETS = schema.metric_offsets
_ENDED = [p.value for p in jobs.TERMINAL]
# Finishing and metrics collection run these for every ended job, many jobs at a time.
_JOBS: sa.BindParameter[Any] = sa.bindparam("k_jobs", expanding=True)
_Q_VERSIONS = sa.select(VERSIONS).where(VERSIONS.c.job_id.in_(_JOBS))
_U_FINAL = VERSIONS.update().where(VERSIONS.c.job_id == sa.bindparam("k_job"))
_Q_OFFSETS = sa.select(OFFSETS).where(OFFSETS.c.job_id.in_(_JOBS))
_Q_TASK_NAMES = (sa.select(schema.tasks.c.job_id, schema.tasks.c.attempt, schema.tasks.c.name)
                 .where(schema.tasks.c.job_id.in_(_JOBS)))
_Q_COUNTS = (sa.select(POINTS.c.job_id, sa.func.count().label("n"))
             .where(POINTS.c.job_id.in_(_JOBS)).group_by(POINTS.c.job_id))
_LAST_IDS = (sa.select(sa.func.max(POINTS.c.id)).where(POINTS.c.job_id.in_(_JOBS))
             .group_by(POINTS.c.job_id, POINTS.c.name).scalar_subquery())
_Q_FINALS = (sa.select(POINTS.c.job_id, POINTS.c.name, POINTS.c.value)
             .where(POINTS.c.id.in_(_LAST_IDS)).order_by(POINTS.c.job_id, POINTS.c.name))
# Every submission runs these.
_ADD_FAMILY = FAMILIES.insert()
_ADD_VERSION = VERSIONS.insert()


# --- families and versions ----------------------------------------------------------------


def start_family(conn: sa.Connection, *, job_id: str, project_id: str, name: str, now: int,
                 output_bases: Mapping[str, str]) -> None:
    """Make `job_id` version 1 of a new family named after it."""
    conn.execute(_ADD_FAMILY, {"id": job_id, "project_id": project_id, "name": name,
                               "next_version": 2, "created_at": now})
    conn.execute(_ADD_VERSION, {"job_id": job_id, "family_id": job_id, "number": 1,
                                "resume": False,
                                "output_bases": json.dumps(dict(output_bases)),
                                "created_at": now})


def ensure_version(conn: sa.Connection, job: rows.Job) -> rows.Version:
    """The version row of a job, made (as V0001 of its own family) for jobs from before
    versions existed."""
    found = version_of(conn, job.id)
    if found is not None:
        return found
    spec = json.loads(job.spec)
    bases = {o["name"]: o["remote"]["obs"]["obs_url"]
             for o in spec.get("algorithm", {}).get("outputs", [])}
    start_family(conn, job_id=job.id, project_id=job.project_id, name=job.name,
                 now=job.create_time, output_bases=bases)
    conn.execute(JOBS.update().where(JOBS.c.id == job.id).values(family_id=job.id, version=1))
    return rows.Version.of(
        conn.execute(sa.select(VERSIONS).where(VERSIONS.c.job_id == job.id)).one())


def take_number(conn: sa.Connection, family_id: str) -> int:
    """The next version number of a family, never given before (the family row is locked
    by the UPDATE until the transaction ends)."""
    res = conn.execute(FAMILIES.update().where(FAMILIES.c.id == family_id)
                       .values(next_version=FAMILIES.c.next_version + 1))
    if res.rowcount != 1:
        raise errors.NotFound(f"job family '{family_id}' does not exist")
    return int(conn.execute(sa.select(FAMILIES.c.next_version)
                            .where(FAMILIES.c.id == family_id)).scalar_one()) - 1


def add_version(conn: sa.Connection, *, job_id: str, family_id: str, number: int,
                parent: rows.Version, resume: bool, output_bases: Mapping[str, str],
                now: int) -> None:
    conn.execute(VERSIONS.insert().values(
        job_id=job_id, family_id=family_id, number=number, parent_job_id=parent.job_id,
        parent_number=parent.number, resume=resume, output_bases=json.dumps(dict(output_bases)),
        created_at=now))


def family_versions(conn: sa.Connection,
                    family_id: str) -> list[tuple[rows.Version, rows.Job]]:
    """(version row, job row) of every live version of a family, oldest first."""
    versions = rows.Version.all(conn.execute(
        sa.select(VERSIONS).where(VERSIONS.c.family_id == family_id)
        .order_by(VERSIONS.c.number)))
    if not versions:
        return []
    found = {j.id: j for j in rows.Job.all(conn.execute(
        sa.select(JOBS).where(JOBS.c.id.in_([v.job_id for v in versions]),
                              JOBS.c.deleted_at.is_(None))))}
    return [(v, found[v.job_id]) for v in versions if v.job_id in found]


def version_of(conn: sa.Connection, job_id: str) -> rows.Version | None:
    row = conn.execute(sa.select(VERSIONS).where(VERSIONS.c.job_id == job_id)).first()
    return None if row is None else rows.Version.of(row)


def set_code(conn: sa.Connection, job_id: str, attempt: int, code_hash: str | None,
             git_commit: str | None) -> None:
    conn.execute(VERSIONS.update().where(VERSIONS.c.job_id == job_id).values(
        code_hash=code_hash, git_commit=git_commit, code_attempt=attempt))


def set_final_metrics_of(conn: sa.Connection, finals: Mapping[str, Mapping[str, float]]
                         ) -> None:
    """The final metrics of several jobs' versions (one statement)."""
    if finals:
        conn.execute(_U_FINAL, [{"k_job": job_id, "final_metrics": json.dumps(dict(final))}
                                for job_id, final in finals.items()])


def versions_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, rows.Version]:
    """The version rows of those of these jobs that have one, by job id."""
    return {v.job_id: v for v in rows.Version.all(
        conn.execute(_Q_VERSIONS, {"k_jobs": list(job_ids)}))}


# --- staging and finishing -----------------------------------------------------------------


def staging_jobs(conn: sa.Connection) -> list[rows.Job]:
    """Jobs whose inputs (code, model, resumed outputs) are still to be fetched (a
    search's own job fetches none: its trials do)."""
    q = (sa.select(JOBS).where(JOBS.c.staging.is_not(None), JOBS.c.deleted_at.is_(None),
                            JOBS.c.staging != search_spec.JOB_STAGING,
                            JOBS.c.phase == jobs.Phase.CREATING.value).order_by(JOBS.c.seq))
    return rows.Job.all(conn.execute(q))


def unended_with_requirements(conn: sa.Connection) -> list[rows.Job]:
    """Jobs not ended (deleted ones too, until they have) that ask for Python packages:
    the environments they use are kept."""
    q = sa.select(JOBS).where(JOBS.c.phase.not_in(_ENDED),
                              JOBS.c.spec.contains('"requirements"'))
    return rows.Job.all(conn.execute(q))


def unfinished_ended(conn: sa.Connection, limit: int = 50) -> list[rows.Job]:
    """Ended jobs the storage component has not finished with yet."""
    q = (sa.select(JOBS).where(JOBS.c.phase.in_(_ENDED), JOBS.c.finalized_at.is_(None))
         .order_by(JOBS.c.seq).limit(limit))
    return rows.Job.all(conn.execute(q))


def running_jobs(conn: sa.Connection) -> list[rows.Job]:
    q = sa.select(JOBS).where(JOBS.c.phase.in_([jobs.Phase.RUNNING.value,
                                          jobs.Phase.TERMINATING.value]))
    return rows.Job.all(conn.execute(q))


# --- training metrics ---------------------------------------------------------------------


def offsets_of(conn: sa.Connection, job_ids: Sequence[str]
               ) -> dict[str, dict[tuple[int, str, str], int]]:
    """How far each job's files were read: (attempt, task, source) -> byte position."""
    out: dict[str, dict[tuple[int, str, str], int]] = {}
    for r in conn.execute(_Q_OFFSETS, {"k_jobs": list(job_ids)}):
        out.setdefault(r.job_id, {})[(r.attempt, r.task, r.source)] = int(r.position)
    return out


def tasks_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, list[tuple[int, str]]]:
    """(attempt, task) of every task each job ever had."""
    out: dict[str, list[tuple[int, str]]] = {}
    for r in conn.execute(_Q_TASK_NAMES, {"k_jobs": list(job_ids)}):
        out.setdefault(r.job_id, []).append((r.attempt, r.name))
    return out


def save_points(conn: sa.Connection, job_id: str, attempt: int, task: str, source: str,
                position: int, points: Sequence[Mapping[str, Any]], first: bool) -> None:
    """Metrics read from a file and how far it was read, together (so none is stored twice)."""
    if points:
        conn.execute(POINTS.insert(), [dict(r) for r in points])
    key = (OFFSETS.c.job_id == job_id, OFFSETS.c.attempt == attempt, OFFSETS.c.task == task,
           OFFSETS.c.source == source)
    if first:
        conn.execute(OFFSETS.insert().values(job_id=job_id, attempt=attempt, task=task,
                                             source=source, position=position))
    else:
        conn.execute(OFFSETS.update().where(*key).values(position=position))


def count_points_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, int]:
    """How many metric points each job has stored; jobs with none are left out."""
    return {r.job_id: int(r.n) for r in conn.execute(_Q_COUNTS, {"k_jobs": list(job_ids)})}


def points_of(conn: sa.Connection, job_id: str, task: str | None = None,
              limit: int = 100_000) -> list[rows.MetricPoint]:
    """The job's metric points (of one task, or all), in the order they were stored."""
    conds = [POINTS.c.job_id == job_id]
    if task is not None:
        conds.append(POINTS.c.task == task)
    q = sa.select(POINTS).where(*conds).order_by(POINTS.c.id).limit(limit)
    return rows.MetricPoint.all(conn.execute(q))


def final_of(conn: sa.Connection, job_id: str) -> dict[str, float]:
    """The last value reported of each metric, by any task of any attempt."""
    return finals_of(conn, [job_id]).get(job_id, {})


def finals_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, dict[str, float]]:
    """final_of for several jobs (one query); jobs that reported nothing are left out."""
    out: dict[str, dict[str, float]] = {}
    for r in conn.execute(_Q_FINALS, {"k_jobs": list(job_ids)}):
        out.setdefault(r.job_id, {})[r.name] = r.value
    return out
