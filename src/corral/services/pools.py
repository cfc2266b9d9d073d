"""What the pools hold right now: capacity, use and quota per project, and their queues.

Read-only views over the store and the catalog, for the API (`training-quotas`,
`training-pools`, `training-queue`) and so for `corral pools` and `corral queue`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import jobs, resources, scheduling
from corral.services import catalog as catalog_mod
from corral.services import runtime
from corral.store import identity_repo, queue_repo, rows

R = resources.Resources


def amounts(r: resources.Resources, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """Resources as the API shows them: cores, GB of memory, GPUs, and accelerators by
    name when there are any (those in `kinds` even at 0: a pool's free NPUs, say)."""
    out: dict[str, Any] = {"cpu": round(r.cpu, 3), "memory_gb": round(r.memory_mb / 1024, 3),
                           "gpu": r.gpu}
    names = sorted({*kinds, *(k for k, _ in r.accel)})
    if names:
        out["accelerators"] = {k: r.count(k) for k in names}
    return out


def quota_view(q: rows.Quota, used: resources.Resources | None = None) -> dict[str, Any]:
    limits: dict[str, Any] = {
        k: v for k, v in (("cpu", q.cpu), ("memory_gb", None if q.memory_mb is None
                                           else round(q.memory_mb / 1024, 3)),
                          ("gpu", q.gpu)) if v is not None}
    accel = resources.parse_accels(q.accelerators, keep_zero=True)
    if accel:
        limits["accelerators"] = dict(accel)
    out = {"pool_id": q.pool_id, "limits": limits, "borrowing": bool(q.borrowing),
           "weight": q.weight}
    if used is not None:
        out["used"] = amounts(used)
    return out


def held(conn: sa.Connection) -> dict[tuple[str, str], resources.Resources]:
    """What each (project, pool) holds now: the tasks of its active jobs."""
    out: dict[tuple[str, str], resources.Resources] = {}
    for h in queue_repo.held_totals(conn):
        key = (h.project_id, h.pool_id)
        accel = R(accel=resources.parse_accels(h.accelerators)).times(int(h.tasks)).accel
        out[key] = out.get(key, resources.ZERO) + R(float(h.cpu), int(h.memory_mb),
                                                    int(h.gpu), accel)
    return out


def project_quotas(conn: sa.Connection, project_id: str) -> dict[str, Any]:
    use = held(conn)
    return {"project_id": project_id,
            "quotas": [quota_view(q, use.get((project_id, q.pool_id), resources.ZERO))
                       for q in queue_repo.quotas(conn, project_id)]}


def set_quotas(rt: runtime.Runtime, project_id: str,
               quotas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Replace the project's quotas (one row a pool: pool_id, cpu, gpu, memory_mb,
    accelerators, borrowing, weight), each of a pool the catalog has (BadParameter else);
    the project's quotas as `project_quotas` shows them after."""
    for q in quotas:
        rt.catalog.pool(q["pool_id"])
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        queue_repo.set_quotas(conn, project_id, list(quotas), rt.now())
        return project_quotas(conn, project_id)


def pools(conn: sa.Connection, cat: catalog_mod.Catalog) -> list[dict[str, Any]]:
    use = held(conn)
    quotas = {(q.project_id, q.pool_id): q for q in queue_repo.quotas(conn)}
    shares = {(u.project_id, u.pool_id): u.share for u in queue_repo.usage(conn)}
    names = {p.id: p.name for p in identity_repo.list_projects(conn)}
    waiting = queue_repo.pending_counts(conn)
    out = []
    for pool_id in cat.pool_ids:
        nodes = cat.pool_nodes(pool_id)
        capacity = sum((n.capacity for n in nodes), resources.ZERO)
        kinds = [k for k, _ in capacity.accel]
        used = sum((r for (_p, pool), r in use.items() if pool == pool_id), resources.ZERO)
        projects = sorted({p for p, pool in (*use, *quotas) if pool == pool_id})
        out.append({
            "pool_id": pool_id, **cat.executor_of(pool_id),
            "nodes": [{"name": n.name, **amounts(n.capacity),
                       "gpu_type": n.gpus[0].name if n.gpus else ""} for n in nodes],
            "capacity": amounts(capacity), "used": amounts(used, kinds),
            "free": amounts(capacity - used, kinds), "pending_jobs": waiting.get(pool_id, 0),
            "projects": [_project_row(p, names, use.get((p, pool_id), resources.ZERO),
                                      quotas.get((p, pool_id)), shares.get((p, pool_id)))
                         for p in projects],
        })
    return out


def _project_row(project_id: str, names: Mapping[str, str], used: resources.Resources,
                 quota: rows.Quota | None, share: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {"project_id": project_id, "name": names.get(project_id, ""),
                           "used": amounts(used), "recent_share": round(share or 0.0, 4)}
    if quota is not None:
        q = quota_view(quota)
        row.update(limits=q["limits"], borrowing=q["borrowing"], weight=q["weight"])
    return row


def fair_share_keys(conn: sa.Connection, cat: catalog_mod.Catalog,
                    ) -> dict[tuple[str, str], float]:
    """Each (project, pool)'s fair-share key as the scheduler's next pass will see it
    (projects missing here have 0)."""
    usage = {(u.project_id, u.pool_id): u.share for u in queue_repo.usage(conn)}
    weights = {(q.project_id, q.pool_id): q.weight for q in queue_repo.quotas(conn)}
    use = held(conn)
    totals = {pool: sum((n.capacity for n in cat.pool_nodes(pool)), resources.ZERO)
              for pool in cat.pool_ids}
    return {key: scheduling.fair_share(
                usage.get(key, 0.0),
                resources.dominant_share(use.get(key, resources.ZERO),
                                         totals.get(key[1], resources.ZERO)),
                weights.get(key, 1.0))
            for key in set(usage) | set(use)}


def queue_order(conn: sa.Connection, cat: catalog_mod.Catalog) -> list[Any]:
    """ORDER BY terms for the queue in the order the scheduler considers it."""
    return queue_repo.queue_order(fair_share_keys(conn, cat),
                            queue_repo.queue_heads(conn, [c.value for c in scheduling.HEAD_CODES]))


def jobs_ahead(conn: sa.Connection, cat: catalog_mod.Catalog,
               job_ids: Sequence[str]) -> dict[str, int]:
    """How many queued jobs each of these has ahead of it in its pool, in the order the
    scheduler considers them (priority, fair share, submission)."""
    if not job_ids:
        return {}
    return queue_repo.queue_positions(conn, job_ids, queue_order(conn, cat))


#: wait codes that say no more than the job's place in the queue
PLAIN_WAIT = (None, scheduling.WaitCode.QUEUED.value)


def queued_reason(ahead: int) -> str:
    """Why a job waits when it only waits for its turn: the same words in a job's status,
    the job list and the queue."""
    return f"queued: {ahead} job(s) ahead" if ahead else "queued: next to start"


#: how a waiting job of another project is described when its own reason may name jobs
#: of its project (a project never sees another's job ids or names)
PUBLIC_REASONS = {
    scheduling.WaitCode.QUEUED.value: "queued",
    scheduling.WaitCode.PRIORITY.value: "waiting behind higher priority",
    scheduling.WaitCode.PREEMPTING.value:
        "waiting for resources: preempted jobs are stopping to make room",
}


def queue(conn: sa.Connection, cat: catalog_mod.Catalog, project_id: str,
          pool_id: str | None = None) -> list[dict[str, Any]]:
    """Every pending job per pool, in the order the scheduler considers them, with why it
    waits. Jobs of other projects show only their project, size and reason, never their
    id or name, nor those of other jobs."""
    by_pool: dict[str, list[dict[str, Any]]] = {p: [] for p in cat.pool_ids
                                                 if pool_id in (None, p)}
    for j in queue_repo.pending_jobs(conn, pool_id, queue_order(conn, cat)):
        own = j.project_id == project_id
        code = j.wait_code or "queued"
        reason = j.wait_reason or "queued"
        position = len(by_pool.get(j.pool_id, [])) + 1
        if j.phase == jobs.Phase.PENDING.value and j.wait_code in PLAIN_WAIT:
            # Jobs still fetching inputs come last, so the jobs listed before this one are
            # the jobs ahead of it that a job's own status counts.
            reason = queued_reason(position - 1)
        by_pool.setdefault(j.pool_id, []).append({
            "position": position,
            "id": j.id if own else None, "name": j.name if own else None,
            "project_id": j.project_id, "priority": j.priority,
            "node_count": j.node_count, "flavor_id": j.flavor_id,
            "create_time": j.create_time, "phase": j.phase, "wait_code": code,
            "reason": reason if own else PUBLIC_REASONS.get(code, reason),
        })
    return [{"pool_id": p, "jobs": listed} for p, listed in by_pool.items()]
