"""A pool's head, the first of its jobs that cannot start: whom to preempt for it, where to
reserve its room, and what it is short of.

The head reserves the nodes it will start on, so that later jobs may start in the gaps
(backfill) without ever delaying it.
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.domain import resources
from corral.domain.scheduling import inputs, outcomes, placement, pool


def victims(p: pool.Pool, q: inputs.Queued, stopping: list[inputs.Running],
            within_quota: bool) -> list[inputs.Running] | None:
    """The fewest running jobs to stop so that `q` fits once they and the `stopping` ones
    have ended; None if none can do it. Lower-priority preemptible jobs may go, and when
    `q` is within its project's quota, what other projects borrowed (that first)."""
    candidates = sorted(
        (r for r in p.running if not r.stopping and (
            (r.preemptible and r.priority < q.priority)
            or (within_quota and r.borrowed and r.project != q.project))),
        key=lambda r: (not r.borrowed, r.priority, -r.started_at, -r.seq, r.job_id))
    if not stopping and not candidates:
        return None
    chosen: list[inputs.Running] = []
    while placement.fit(p, q, room_with(p, stopping + chosen)) is None:
        if not candidates:
            return None
        chosen.append(candidates.pop(0))
    for v in reversed(list(chosen)):  # drop any the others make unneeded
        rest = [c for c in chosen if c is not v]
        if placement.fit(p, q, room_with(p, stopping + rest)) is not None:
            chosen = rest
    if not chosen and not stopping:
        return None
    return chosen


def room_with(p: pool.Pool, freed: Sequence[inputs.Running]) -> pool.Room:
    """What is free and not reserved once `freed` have ended."""
    room = pool.available(p)
    for r in freed:
        for slot in r.slots:
            i = p.index.get(slot.node)
            if i is not None:
                room.cpu[i] += r.per_task.cpu
                room.mem[i] += r.per_task.memory_mb
                room.gpu[i] += len(slot.gpu_ids)
                if room.acc is not None:
                    for k, ids in slot.accel_ids:
                        room.acc[i][k] = room.acc[i].get(k, 0) + len(ids)
    return room


def promised(p: pool.Pool, q: inputs.Queued) -> list[int] | None:
    """Where `q` will start once enough running jobs end, when preempting cannot make room
    now: the freest nodes (devices first), on their whole capacity not already reserved;
    None if the pool's nodes could never hold it."""
    wanted = [k for k, _ in q.per_task.accel]
    order = sorted(range(len(p.names)), key=lambda i: (
        -p.cpu[i] - 1000 * (len(p.gpus[i]) + sum(len(p.acc[i].get(k, ())) for k in wanted)),
        i))
    return placement.fit(p, q, pool.unreserved(p), order)


def reserve(p: pool.Pool, q: inputs.Queued, placed: list[int]) -> None:
    d = q.per_task
    for i in placed:
        p.res_cpu[i] += d.cpu
        p.res_mem[i] += d.memory_mb
        p.res_gpu[i] += d.gpu
        res = p.res_acc[i]
        for k, v in d.accel:
            res[k] = res.get(k, 0) + v


def short_of(p: pool.Pool, q: inputs.Queued) -> tuple[outcomes.WaitCode, str]:
    """Why the head waits for running jobs to end: too little free capacity, or enough of
    it spread over too few nodes for its gang."""
    d = q.per_task
    gang = f"{q.count} tasks of " if q.count > 1 else ""
    each = [resources.Resources(c, m, len(g), resources.accels((k, len(v)) for k, v in a.items()))
            for c, m, g, a in zip(p.cpu, p.mem, p.gpus, p.acc, strict=True)]
    free = sum(each, resources.ZERO)
    if len(p.names) <= 4:
        now = "; ".join(f"{n}: {resources.describe(r)}"
                        for n, r in zip(p.names, each, strict=True))
    else:
        now = f"{resources.describe(free)} over {len(p.names)} nodes"
    if q.count > 1 and d.times(q.count).fits_in(free):
        return outcomes.WaitCode.GANG, (
            f"waiting for resources: gang does not fit: needs {gang}"
            f"{resources.describe(d)} at once in pool {p.name}, and the free capacity "
            f"is spread over too few nodes; free now {now}")
    return outcomes.WaitCode.NO_CAPACITY, (
        f"waiting for resources: not enough free capacity in pool {p.name}: needs "
        f"{gang}{resources.describe(d)}; free now {now}")


def jobs_seen_by(jobs: Sequence[inputs.Running], seen_by: inputs.Queued) -> str:
    """Jobs as `seen_by`'s project may see them: its own by id, others only counted."""
    own = [r.job_id for r in jobs if r.project == seen_by.project]
    others = len(jobs) - len(own)
    return ", ".join([*own, *([f"{others} job(s) of other projects"] if others else [])])
