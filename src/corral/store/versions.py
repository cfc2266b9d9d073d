"""SQL for job versions, the training metrics jobs report, and ended jobs' finishing.

Like `repo`, functions here run on a connection the caller owns and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain import jobs as jobs_mod
from corral.store import fast, schema

J = schema.jobs
F = schema.job_families
V = schema.job_versions
TM = schema.training_metrics
MO = schema.metric_offsets
_ENDED = [p.value for p in jobs_mod.TERMINAL]
#: every submission runs these (see store/fast.py)
_RUN_FAMILY, _RUN_VERSION = fast.Prepared(F.insert().inline()), fast.Prepared(V.insert().inline())
# Finishing and metrics collection run these for every ended job, many jobs at a time.
_JOBS: sa.BindParameter[Any] = sa.bindparam("k_jobs", expanding=True)
_Q_VERSIONS = sa.select(V).where(V.c.job_id.in_(_JOBS))
_U_FINAL = V.update().where(V.c.job_id == sa.bindparam("k_job"))
_Q_OFFSETS = sa.select(MO).where(MO.c.job_id.in_(_JOBS))
_Q_TASK_NAMES = (sa.select(schema.tasks.c.job_id, schema.tasks.c.attempt, schema.tasks.c.name)
                 .where(schema.tasks.c.job_id.in_(_JOBS)))
_Q_COUNTS = (sa.select(TM.c.job_id, sa.func.count().label("n")).where(TM.c.job_id.in_(_JOBS))
             .group_by(TM.c.job_id))
_LAST_IDS = (sa.select(sa.func.max(TM.c.id)).where(TM.c.job_id.in_(_JOBS))
             .group_by(TM.c.job_id, TM.c.name).scalar_subquery())
_Q_FINALS = (sa.select(TM.c.job_id, TM.c.name, TM.c.value).where(TM.c.id.in_(_LAST_IDS))
             .order_by(TM.c.job_id, TM.c.name))


# --- families and versions ----------------------------------------------------------------


def start_family(conn: sa.Connection, *, job_id: str, project_id: str, name: str, now: int,
                 output_bases: Mapping[str, str]) -> None:
    """Make `job_id` version 1 of a new family named after it."""
    _RUN_FAMILY.run(conn, {"id": job_id, "project_id": project_id, "name": name,
                           "next_version": 2, "created_at": now})
    _RUN_VERSION.run(conn, {"job_id": job_id, "family_id": job_id, "number": 1,
                            "resume": False, "output_bases": json.dumps(dict(output_bases)),
                            "created_at": now})


def ensure_version(conn: sa.Connection, job: Any) -> sa.Row[Any]:
    """The version row of a job, made (as V0001 of its own family) for jobs from before
    versions existed."""
    row = conn.execute(sa.select(V).where(V.c.job_id == job.id)).first()
    if row is not None:
        return row
    spec = json.loads(job.spec)
    bases = {o["name"]: o["remote"]["obs"]["obs_url"]
             for o in spec.get("algorithm", {}).get("outputs", [])}
    start_family(conn, job_id=job.id, project_id=job.project_id, name=job.name,
                 now=job.create_time, output_bases=bases)
    conn.execute(J.update().where(J.c.id == job.id).values(family_id=job.id, version=1))
    return conn.execute(sa.select(V).where(V.c.job_id == job.id)).one()


def take_number(conn: sa.Connection, family_id: str) -> int:
    """The next version number of a family, never given before (the family row is locked
    by the UPDATE until the transaction ends)."""
    res = conn.execute(F.update().where(F.c.id == family_id)
                       .values(next_version=F.c.next_version + 1))
    if res.rowcount != 1:
        raise errors.NotFound(f"job family '{family_id}' does not exist")
    return int(conn.execute(sa.select(F.c.next_version).where(F.c.id == family_id))
               .scalar_one()) - 1


def add_version(conn: sa.Connection, *, job_id: str, family_id: str, number: int,
                parent: Any, resume: bool, output_bases: Mapping[str, str],
                now: int) -> None:
    conn.execute(V.insert().values(
        job_id=job_id, family_id=family_id, number=number, parent_job_id=parent.job_id,
        parent_number=parent.number, resume=resume, output_bases=json.dumps(dict(output_bases)),
        created_at=now))


def family_versions(conn: sa.Connection, family_id: str) -> list[tuple[Any, Any]]:
    """(version row, job row) of every live version of a family, oldest first."""
    versions = list(conn.execute(sa.select(V).where(V.c.family_id == family_id)
                                 .order_by(V.c.number)))
    if not versions:
        return []
    jobs = {j.id: j for j in conn.execute(
        sa.select(J).where(J.c.id.in_([v.job_id for v in versions]),
                           J.c.deleted_at.is_(None)))}
    return [(v, jobs[v.job_id]) for v in versions if v.job_id in jobs]


def version_of(conn: sa.Connection, job_id: str) -> sa.Row[Any] | None:
    return conn.execute(sa.select(V).where(V.c.job_id == job_id)).first()


def set_code(conn: sa.Connection, job_id: str, attempt: int, code_hash: str | None,
             git_commit: str | None) -> None:
    conn.execute(V.update().where(V.c.job_id == job_id).values(
        code_hash=code_hash, git_commit=git_commit, code_attempt=attempt))


def set_final_metrics(conn: sa.Connection, job_id: str, final: Mapping[str, float]) -> None:
    set_final_metrics_of(conn, {job_id: final})


def set_final_metrics_of(conn: sa.Connection, finals: Mapping[str, Mapping[str, float]]
                         ) -> None:
    """The final metrics of several jobs' versions (one statement)."""
    if finals:
        conn.execute(_U_FINAL, [{"k_job": job_id, "final_metrics": json.dumps(dict(final))}
                                for job_id, final in finals.items()])


def versions_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, sa.Row[Any]]:
    return {r.job_id: r for r in conn.execute(_Q_VERSIONS, {"k_jobs": list(job_ids)})}


# --- staging and finishing -----------------------------------------------------------------


def staging_jobs(conn: sa.Connection) -> list[sa.Row[Any]]:
    """Jobs whose inputs (code, model, resumed outputs) are still to be fetched."""
    q = (sa.select(J).where(J.c.staging.is_not(None), J.c.deleted_at.is_(None),
                            J.c.phase == jobs_mod.Phase.CREATING.value).order_by(J.c.seq))
    return list(conn.execute(q))


def unfinished_ended(conn: sa.Connection, limit: int = 50) -> list[sa.Row[Any]]:
    """Ended jobs the storage component has not finished with yet."""
    q = (sa.select(J).where(J.c.phase.in_(_ENDED), J.c.finalized_at.is_(None))
         .order_by(J.c.seq).limit(limit))
    return list(conn.execute(q))


def running_jobs(conn: sa.Connection) -> list[sa.Row[Any]]:
    q = sa.select(J).where(J.c.phase.in_([jobs_mod.Phase.RUNNING.value,
                                          jobs_mod.Phase.TERMINATING.value]))
    return list(conn.execute(q))


# --- training metrics ---------------------------------------------------------------------


def offsets(conn: sa.Connection, job_id: str) -> dict[tuple[int, str, str], int]:
    return offsets_of(conn, [job_id]).get(job_id, {})


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
                position: int, rows: Sequence[Mapping[str, Any]], first: bool) -> None:
    """Metrics read from a file and how far it was read, together (so none is stored twice)."""
    if rows:
        conn.execute(TM.insert(), [dict(r) for r in rows])
    key = (MO.c.job_id == job_id, MO.c.attempt == attempt, MO.c.task == task,
           MO.c.source == source)
    if first:
        conn.execute(MO.insert().values(job_id=job_id, attempt=attempt, task=task,
                                        source=source, position=position))
    else:
        conn.execute(MO.update().where(*key).values(position=position))


def count_points(conn: sa.Connection, job_id: str) -> int:
    return count_points_of(conn, [job_id]).get(job_id, 0)


def count_points_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, int]:
    return {r.job_id: int(r.n) for r in conn.execute(_Q_COUNTS, {"k_jobs": list(job_ids)})}


def points_of(conn: sa.Connection, job_id: str, task: str | None = None,
              limit: int = 100_000) -> list[sa.Row[Any]]:
    conds = [TM.c.job_id == job_id]
    if task is not None:
        conds.append(TM.c.task == task)
    q = sa.select(TM).where(*conds).order_by(TM.c.id).limit(limit)
    return list(conn.execute(q))


def final_of(conn: sa.Connection, job_id: str) -> dict[str, float]:
    """The last value reported of each metric, by any task of any attempt."""
    return finals_of(conn, [job_id]).get(job_id, {})


def finals_of(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, dict[str, float]]:
    """final_of for several jobs (one query); jobs that reported nothing are left out."""
    out: dict[str, dict[str, float]] = {}
    for r in conn.execute(_Q_FINALS, {"k_jobs": list(job_ids)}):
        out.setdefault(r.job_id, {})[r.name] = r.value
    return out
