"""The queue as the scheduler and the queue views read it, and the quotas and recent usage
that fair share weighs it by (functions over a connection the caller owns)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import jobs
from corral.store import rows, schema

JOBS = schema.jobs
QUOTAS = schema.quotas
USAGE = schema.project_usage
WAITING = [jobs.Phase.CREATING.value, jobs.Phase.PENDING.value]
#: the queue the scheduler decides on (the condition of `ix_jobs_queue`, written out)
IN_QUEUE = schema.IN_QUEUE
#: the columns of rows.QueuedJob
_QUEUE_COLUMNS = [JOBS.c[f.name] for f in dataclasses.fields(rows.QueuedJob)]
#: the queue's streams: (pool, priority, project) of the jobs in it
_STREAMS = (sa.select(JOBS.c.pool_id, JOBS.c.priority, JOBS.c.project_id)
            .where(IN_QUEUE).distinct())
#: the same on SQLite, whose planner (without statistics) would go through every queued
#: job's row by `ix_jobs_phase_seq` rather than through the index that holds all it needs
_STREAMS_SQLITE = sa.text("SELECT DISTINCT pool_id, priority, project_id FROM jobs "
                          f"INDEXED BY ix_jobs_queue WHERE {schema.IN_QUEUE_SQL}")
#: streams read in one statement at most
STREAMS_PER_READ = 50


def queued(conn: sa.Connection, limit: int) -> list[rows.QueuedJob]:
    """Jobs waiting to start (new ones too), in submission order: the first `limit` of
    each pool, priority and project. Each stream is read through `ix_jobs_queue` up to its
    limit, so that a long queue costs little more than a short one."""
    streams = conn.execute(_STREAMS_SQLITE if conn.dialect.name == "sqlite" else _STREAMS
                           ).all()
    found: list[rows.QueuedJob] = []
    for i in range(0, len(streams), STREAMS_PER_READ):
        some = streams[i:i + STREAMS_PER_READ]
        params: dict[str, Any] = {"k_limit": limit}
        for n, (pool_id, priority, project_id) in enumerate(some):
            params.update({f"k_pool{n}": pool_id, f"k_priority{n}": priority,
                           f"k_project{n}": project_id})
        found += rows.QueuedJob.all(conn.execute(_heads(len(some)), params))
    found.sort(key=lambda j: j.seq)
    return found


@functools.cache
def _heads(streams: int) -> sa.Select[Any] | sa.CompoundSelect:
    """The statement that reads the first jobs of `streams` streams (built once for each
    number of streams)."""
    heads = [sa.select(*_QUEUE_COLUMNS).where(
                 IN_QUEUE, JOBS.c.pool_id == sa.bindparam(f"k_pool{n}"),
                 JOBS.c.priority == sa.bindparam(f"k_priority{n}"),
                 JOBS.c.project_id == sa.bindparam(f"k_project{n}"))
             .order_by(JOBS.c.seq).limit(sa.bindparam("k_limit", type_=sa.Integer))
             for n in range(streams)]
    if streams == 1:
        return heads[0]
    # (SQLite takes a LIMIT in a compound statement's parts only inside a subquery.)
    return sa.union_all(*[sa.select(h.subquery()) for h in heads])


def queue_order(keys: Mapping[tuple[str, str], float], heads: Sequence[str]) -> list[Any]:
    """ORDER BY terms for the queue in the order the scheduler considers it (see
    domain.scheduling.queue_order): priority, each priority's last head, the projects'
    fair-share `keys` per (project, pool) (0 for one without any), submission."""
    key: Any = sa.literal(0.0, sa.Float)
    if keys:
        key = sa.case(*[(sa.and_(JOBS.c.project_id == project, JOBS.c.pool_id == pool),
                         sa.literal(value, sa.Float))
                        for (project, pool), value in sorted(keys.items())], else_=key)
    first = sa.case((JOBS.c.id.in_(list(heads)), 0), else_=1) if heads else sa.literal(1)
    return [JOBS.c.priority.desc(), first, key, JOBS.c.seq]


def queue_heads(conn: sa.Connection, head_codes: Iterable[str]) -> list[str]:
    """The last head of each pool and priority: its oldest queued job waiting with one of
    `head_codes` (it keeps its place against fair share)."""
    oldest = (sa.select(JOBS.c.pool_id, JOBS.c.priority, sa.func.min(JOBS.c.seq).label("seq"))
              .where(IN_QUEUE, JOBS.c.wait_code.in_(list(head_codes)))
              .group_by(JOBS.c.pool_id, JOBS.c.priority).subquery())
    q = sa.select(JOBS.c.id).join(oldest, sa.and_(JOBS.c.pool_id == oldest.c.pool_id,
                                                  JOBS.c.priority == oldest.c.priority,
                                                  JOBS.c.seq == oldest.c.seq))
    return [r.id for r in conn.execute(q)]


def queue_positions(conn: sa.Connection, job_ids: Sequence[str],
                    order: Sequence[Any]) -> dict[str, int]:
    """How many queued jobs are ahead of each of these in its pool, in `order`
    (`queue_order`). A few jobs are counted one by one (no sort of the whole queue); a
    page of them is ranked in one query."""
    if not job_ids:
        return {}
    if len(job_ids) <= 4:
        return {job_id: n for job_id in job_ids
                if (n := _jobs_before(conn, job_id, order)) is not None}
    ranked = (sa.select(JOBS.c.id, (sa.func.row_number().over(
                  partition_by=JOBS.c.pool_id, order_by=list(order)) - 1).label("ahead"))
              .where(IN_QUEUE).subquery())
    q = sa.select(ranked.c.id, ranked.c.ahead).where(ranked.c.id.in_(list(job_ids)))
    return {r.id: int(r.ahead) for r in conn.execute(q)}


def _jobs_before(conn: sa.Connection, job_id: str, order: Sequence[Any]) -> int | None:
    """Queued jobs of its pool that come before `job_id` in `order` (None if it is not
    queued): lexicographic on the order's terms, each compared with the job's own."""
    desc = [getattr(t, "modifier", None) is sa.sql.operators.desc_op for t in order]
    terms = [t.element if down else t for t, down in zip(order, desc, strict=True)]
    mine = conn.execute(sa.select(JOBS.c.pool_id,
                                  *[t.label(f"t{i}") for i, t in enumerate(terms)])
                        .where(JOBS.c.id == job_id, IN_QUEUE)).first()
    if mine is None:
        return None
    before: Any = sa.false()
    for t, down, value in reversed(list(zip(terms, desc, mine[1:], strict=True))):
        ahead = t > value if down else t < value
        before = sa.or_(ahead, sa.and_(t == value, before))
    q = (sa.select(sa.func.count()).select_from(JOBS)
         .where(IN_QUEUE, JOBS.c.pool_id == mine.pool_id, before))
    return int(conn.execute(q).scalar_one())


def held_totals(conn: sa.Connection) -> list[rows.Held]:
    """What the jobs holding resources hold, per project, pool and accelerators per task:
    cpu, memory_mb and gpu summed over their tasks, and the tasks (a job holding resources
    has node_count tasks)."""
    n = JOBS.c.node_count
    q = (sa.select(JOBS.c.project_id, JOBS.c.pool_id, JOBS.c.accelerators,
                   sa.func.sum(JOBS.c.cpu * n).label("cpu"),
                   sa.func.sum(JOBS.c.memory_mb * n).label("memory_mb"),
                   sa.func.sum(JOBS.c.gpu * n).label("gpu"), sa.func.sum(n).label("tasks"))
         .where(JOBS.c.phase.in_([p.value for p in jobs.ACTIVE]), JOBS.c.staging.is_(None))
         .group_by(JOBS.c.project_id, JOBS.c.pool_id, JOBS.c.accelerators))
    return rows.Held.all(conn.execute(q))


def pending_jobs(conn: sa.Connection, pool_id: str | None = None,
                 order: Sequence[Any] = ()) -> list[rows.PendingJob]:
    """Every job waiting to start, by pool, without its spec: in `order` (`queue_order`;
    else highest priority first, then in submission order), jobs still fetching inputs
    last."""
    q = sa.select(*[JOBS.c[f.name] for f in dataclasses.fields(rows.PendingJob)]).where(
        JOBS.c.phase.in_(WAITING))
    if pool_id is not None:
        q = q.where(JOBS.c.pool_id == pool_id)
    terms = list(order) or [JOBS.c.priority.desc(), JOBS.c.seq]
    staging = sa.case((JOBS.c.staging.is_(None), 0), else_=1)
    return rows.PendingJob.all(conn.execute(q.order_by(JOBS.c.pool_id, staging, *terms)))


def pending_counts(conn: sa.Connection) -> dict[str, int]:
    """How many jobs wait to start in each pool."""
    q = (sa.select(JOBS.c.pool_id, sa.func.count()).where(JOBS.c.phase.in_(WAITING))
         .group_by(JOBS.c.pool_id))
    return {pool: int(n) for pool, n in conn.execute(q)}


# --- quotas and usage ---------------------------------------------------------------------


_QUOTAS = sa.select(QUOTAS).order_by(QUOTAS.c.project_id, QUOTAS.c.pool_id)
_PROJECT_QUOTAS = _QUOTAS.where(QUOTAS.c.project_id == sa.bindparam("k_project"))
_USAGE = sa.select(USAGE)


def quotas(conn: sa.Connection, project_id: str | None = None) -> list[rows.Quota]:
    if project_id is None:
        return rows.Quota.all(conn.execute(_QUOTAS))
    return rows.Quota.all(conn.execute(_PROJECT_QUOTAS, {"k_project": project_id}))


def set_quotas(conn: sa.Connection, project_id: str, quotas: Sequence[Mapping[str, Any]],
               now: int) -> None:
    """Replace the project's quotas with `quotas` (one per pool)."""
    conn.execute(QUOTAS.delete().where(QUOTAS.c.project_id == project_id))
    if quotas:
        conn.execute(QUOTAS.insert(), [{**q, "project_id": project_id, "updated_at": now}
                                       for q in quotas])


def usage(conn: sa.Connection) -> list[rows.Usage]:
    return rows.Usage.all(conn.execute(_USAGE))


def save_usage(conn: sa.Connection, usage: Sequence[rows.Usage]) -> None:
    """Replace the recorded usage (a handful of rows: one per project and pool)."""
    conn.execute(USAGE.delete())
    if usage:
        conn.execute(USAGE.insert(), [
            {"project_id": u.project_id, "pool_id": u.pool_id, "share": u.share,
             "updated_at": u.updated_at} for u in usage])
