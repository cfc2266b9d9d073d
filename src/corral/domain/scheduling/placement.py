"""Where a job's tasks go: nodes that hold its whole gang at once, or none at all.

A packed job fills the fullest nodes first (best fit), so that small jobs fill gaps and
whole nodes stay free for big gangs; a spread job puts its tasks on as many nodes as it
can, one per node while nodes are left. A job never goes to a node it is kept off
(`Queued.excluded`), unless the rest of its pool could never hold it (`keep_off`); a job
pinned to a node (`Queued.node`) goes there or nowhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from corral.domain import resources
from corral.domain.scheduling import inputs, pool


def best_fit(room: pool.Room) -> list[int]:
    """Nodes with the fewest free GPUs and accelerators, then the fewest free cores,
    first: small jobs fill gaps and whole nodes stay free for big gangs (and CPU-only jobs
    do not strand the devices of an idle GPU or NPU node)."""
    if room.acc is None:
        return sorted(range(len(room.cpu)), key=lambda i: (room.gpu[i], room.cpu[i], i))
    devices = [g + sum(a.values()) for g, a in zip(room.gpu, room.acc, strict=True)]
    return sorted(range(len(room.cpu)), key=lambda i: (devices[i], room.cpu[i], i))


def fit(p: pool.Pool, q: inputs.Queued, room: pool.Room, order: Iterable[int] | None = None,
        ) -> list[int] | None:
    """Node index per task if the whole gang fits in `room` (which it then uses up).
    `order` is the nodes to try, in order (default: by best fit, or all for spread)."""
    d = q.per_task
    if order is not None:
        idx: Iterable[int] = order
    elif q.spread:
        idx = range(len(p.names))
    else:
        idx = best_fit(room)
    if d.accel and not room.acc:
        return None  # no node of the pool has any accelerator
    ok = [i for i in idx if not (d.gpu and q.gpu_type and p.gpu_type[i] != q.gpu_type)]
    if q.excluded:
        ok = [i for i in ok if p.names[i] not in q.excluded]
    if q.node:
        ok = [i for i in ok if p.names[i] == q.node]
    return (_spread if q.spread else _pack)(room, ok, d, q.count)


def keep_off(q: inputs.Queued, nodes: Sequence[inputs.Node]) -> inputs.Queued:
    """`q` kept off its excluded nodes while the rest of its pool could hold it once free;
    else `q` without them: a job waits for another node, never for ever."""
    if not q.excluded:
        return q
    rest = pool.build([n for n in nodes if n.pool == q.pool and n.name not in q.excluded],
                      []).get(q.pool)
    if rest is not None and fit(rest, q, pool.unreserved(rest)) is not None:
        return q
    return dataclasses.replace(q, excluded=frozenset())


def _pack(room: pool.Room, ok: list[int], d: resources.Resources, count: int,
          ) -> list[int] | None:
    """As many tasks on each node as it holds, in the order of `ok`."""
    acc, racc, eps = d.accel, room.acc or [], pool.EPS
    out: list[int] = []
    for i in ok:
        while (len(out) < count and d.cpu <= room.cpu[i] + eps
               and d.memory_mb <= room.mem[i] and d.gpu <= room.gpu[i]
               and (not acc or _has(racc[i], acc))):
            _use(room, i, d)
            out.append(i)
        if len(out) == count:
            return out
    return None


def _spread(room: pool.Room, ok: list[int], d: resources.Resources, count: int,
            ) -> list[int] | None:
    """Each task on the node of `ok` with room that has the fewest of the gang so far."""
    acc, racc, eps = d.accel, room.acc or [], pool.EPS
    out: list[int] = []
    taken: dict[int, int] = {}
    for _ in range(count):
        best = None
        for i in ok:
            if (d.cpu <= room.cpu[i] + eps and d.memory_mb <= room.mem[i]
                    and d.gpu <= room.gpu[i] and (not acc or _has(racc[i], acc))
                    ) and (best is None or taken.get(i, 0) < taken.get(best, 0)):
                best = i
        if best is None:
            return None
        _use(room, best, d)
        taken[best] = taken.get(best, 0) + 1
        out.append(best)
    return out


def _has(free: dict[str, int], acc: resources.Accels) -> bool:
    return all(v <= free.get(k, 0) for k, v in acc)


def _use(room: pool.Room, i: int, d: resources.Resources) -> None:
    room.cpu[i] -= d.cpu
    room.mem[i] -= d.memory_mb
    room.gpu[i] -= d.gpu
    if d.accel and room.acc is not None:
        free = room.acc[i]
        for k, v in d.accel:
            free[k] = free.get(k, 0) - v
