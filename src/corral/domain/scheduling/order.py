"""The order a pool's waiting jobs are served in, and fair share between projects.

Priority first (3 before 1); inside a priority, the pool's last head keeps its place, then
projects take turns by fair share (lowest key first), and a project's own jobs go in
submission order. `queue_order` is that order as users are shown it; the store sorts a
long queue the same way in SQL (`store.repo.queue_order`), which a test checks against
this one.
"""

from __future__ import annotations

import bisect
import functools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from corral.domain import resources
from corral.domain.scheduling import inputs, pool

#: pool -> priority -> project -> its waiting jobs
Levels = dict[str, dict[int, dict[str, list[inputs.Queued]]]]

BY_SEQ = operator.attrgetter("seq")


def fair_share(usage: float, held: float, weight: float) -> float:
    """A project's fair-share key in a pool: its recent mean dominant share plus the
    dominant share it holds now, over its quota's weight. Lower goes first."""
    return (usage + held) / (weight if weight > 0 else 1.0)


def group(queue: Iterable[inputs.Queued],
          ) -> tuple[Levels, dict[tuple[str, int], inputs.Queued]]:
    """The queue by pool, priority and project, in one pass; and each (pool, priority)'s
    last head (the oldest, should there be several)."""
    streams: dict[tuple[str, int, str], list[inputs.Queued]] = {}
    heads: dict[tuple[str, int], inputs.Queued] = {}
    for q in queue:
        key = (q.pool, q.priority, q.project)
        js = streams.get(key)
        if js is None:
            streams[key] = [q]
        else:
            js.append(q)
        if q.was_head:
            h = heads.get(key[:2])
            if h is None or (q.seq, q.job_id) < (h.seq, h.job_id):
                heads[key[:2]] = q
    by_pool: Levels = {}
    for (pool_id, prio, project), js in streams.items():
        by_pool.setdefault(pool_id, {}).setdefault(prio, {})[project] = js
    return by_pool, heads


def considered(levels: dict[int, dict[str, list[inputs.Queued]]],
               heads: Mapping[tuple[str, int], inputs.Queued], pool_name: str,
               key: Callable[[str], float]) -> Iterator[inputs.Queued]:
    """One pool's jobs in the order a pass considers them when none of them starts (the
    projects' fair-share `key`s then stay as they are)."""
    for prio in sorted(levels, reverse=True):
        first = heads.get((pool_name, prio))
        if first is not None:
            yield first
        keys = {project: key(project) for project in levels[prio]}
        yield from sorted((q for js in levels[prio].values() for q in js if q is not first),
                          key=lambda q: (keys[q.project], q.seq, q.project))


def turn_ends(key: float, project: str, js: list[inputs.Queued], i: int,
              heap: list[tuple[float, int, str, int]]) -> int:
    """The first index of `js[i:]` (a project's jobs by submission) at which the project
    on top of `heap` comes first (the order is key, then submission, then project name)."""
    if not heap:
        return len(js)
    other, seq, name, _ = heap[0]
    if key != other:
        return len(js) if key < other else i
    if project < name:
        return bisect.bisect_right(js, seq, i, key=BY_SEQ)
    return bisect.bisect_left(js, seq, i, key=BY_SEQ)


def queue_order(queue: Sequence[inputs.Queued], nodes: Sequence[inputs.Node],
                held: Mapping[tuple[str, str], resources.Resources] | None = None,
                quotas: Sequence[inputs.Quota] = (),
                usage: Mapping[tuple[str, str], float] | None = None,
                ) -> dict[str, list[inputs.Queued]]:
    """Each pool's waiting jobs in the order `decide` considers them while none of them
    starts: priority, then the pool's last head at its priority, then fair share between
    projects (`fair_share`, lowest first), then submission. `held` is what each
    (project, pool) holds now. This is the place in the queue users are shown."""
    pools = pool.build(nodes, ())
    by_pool, heads = group(queue)
    weight = {(q.project, q.pool): q.weight for q in quotas}
    out = {}
    for name in sorted(by_pool):
        key = functools.partial(_key, pools.get(name) or pool.Pool(name), held or {},
                                usage or {}, weight)
        out[name] = list(considered(by_pool[name], heads, name, key))
    return out


def _key(p: pool.Pool, held: Mapping[tuple[str, str], resources.Resources],
         usage: Mapping[tuple[str, str], float], weight: Mapping[tuple[str, str], float],
         project: str) -> float:
    where = (project, p.name)
    return fair_share(usage.get(where, 0.0), p.share(held.get(where, resources.ZERO)),
                      weight.get(where, 1.0))
