"""Who starts where, who waits and why, and whom to preempt: one pure function, `decide`.

    decide(queue, nodes, running, quotas, usage) -> Decisions

Pools are independent. Inside a pool, jobs are served by priority (3 before 1); inside a
priority, projects take turns by weighted fair share (recent usage plus what they hold
now, over their weight), and a project's own jobs go in submission order. A job starts
when its whole gang fits at once on the pool's free capacity and its project's quota
allows it (or the quota allows borrowing idle capacity: such a job is marked borrowed and
is the first to be reclaimed).

The first job of a pool that cannot start becomes its *head*: it may preempt (lower
priority preemptible jobs; borrowed capacity of other projects when it is within its own
quota), and it reserves the nodes it will start on. Later jobs still start in the gaps
(backfill) but only with what exceeds the reservation, so backfill never delays the head.
A head stays head on the next pass (`Queued.was_head`) unless a higher priority arrives,
so reservations do not wander and the oldest job is never starved.

Nothing here does I/O or reads a clock; equal inputs give equal decisions.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import heapq
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from corral.domain import resources

R = resources.Resources
EPS = 1e-9


class WaitCode(enum.StrEnum):
    QUEUED = "queued"  #: behind an older job of its priority that is next to start
    NO_CAPACITY = "no_capacity"  #: next to start; the pool lacks free capacity for now
    GANG = "gang_does_not_fit"  #: next to start; capacity is free but not on enough nodes
    PREEMPTING = "preempting"  #: next to start; preempted jobs are stopping to make room
    PRIORITY = "behind_priority"  #: a higher-priority job is next to start in the pool
    QUOTA = "quota_exceeded"  #: its project's quota in the pool would be exceeded
    NO_NODE = "no_node"  #: no node of its pool could hold it (nodes went away since submit)


#: codes of a pool's head: the job that holds the reservation
HEAD_CODES = frozenset({WaitCode.NO_CAPACITY, WaitCode.GANG, WaitCode.PREEMPTING})


@dataclasses.dataclass(frozen=True)
class Node:
    """A node of a pool, with its whole capacity; what is free follows from `running`."""

    name: str
    pool: str
    capacity: resources.Resources
    gpu_ids: tuple[int, ...] = ()
    gpu_type: str = ""


@dataclasses.dataclass(frozen=True)
class Queued:
    """A job waiting to start."""

    job_id: str
    project: str
    pool: str
    per_task: resources.Resources
    count: int = 1
    priority: int = 1
    seq: int = 0  #: submission order; a requeued job keeps its own
    spread: bool = False  #: one task per node where it can (else packed onto few nodes)
    gpu_type: str = ""  #: only nodes with this GPU product (empty: any)
    was_head: bool = False  #: it was its pool's head on the last pass
    #: what placement depends on, as plain values (cheap to hash: a long queue is mostly
    #: the same few shapes, and each is tried once per pass)
    shape: tuple[float, int, int, int, bool, str] = dataclasses.field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = self.per_task
        object.__setattr__(self, "shape", (d.cpu, d.memory_mb, d.gpu, self.count, self.spread,
                                           self.gpu_type))


class TaskSlot(NamedTuple):
    node: str
    gpu_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Running:
    """A job holding resources: one slot per task."""

    job_id: str
    project: str
    pool: str
    per_task: resources.Resources
    slots: tuple[TaskSlot, ...]
    priority: int = 1
    seq: int = 0
    preemptible: bool = False
    borrowed: bool = False  #: started beyond its project's quota
    started_at: int = 0
    stopping: bool = False  #: being stopped or preempted: its resources free up soon


@dataclasses.dataclass(frozen=True)
class Quota:
    """What one project may hold in one pool (None: no limit on that resource)."""

    project: str
    pool: str
    cpu: float | None = None
    memory_mb: int | None = None
    gpu: int | None = None
    borrowing: bool = False  #: may go beyond, on idle capacity, until reclaimed
    weight: float = 1.0  #: its fair share against other projects


class Start(NamedTuple):
    job_id: str
    slots: tuple[TaskSlot, ...]
    borrowed: bool
    backfill: bool = False  #: started in a gap while an earlier job of its pool waits


class Preempt(NamedTuple):
    job_id: str  #: the victim
    for_job: str  #: the job that needs its room
    reclaim: bool  #: taking back borrowed capacity (else: for a higher priority)


class Wait(NamedTuple):
    job_id: str
    code: WaitCode
    message: str
    pool: str
    ahead: int  #: waiting jobs before it in its pool's order


#: builds a Wait without NamedTuple's Python-level __new__ (a long queue makes thousands)
_new_wait = functools.partial(tuple.__new__, Wait)


@dataclasses.dataclass
class Decisions:
    starts: list[Start] = dataclasses.field(default_factory=list)
    preempts: list[Preempt] = dataclasses.field(default_factory=list)
    waits: list[Wait] = dataclasses.field(default_factory=list)


def decide(queue: Sequence[Queued], nodes: Sequence[Node], running: Sequence[Running] = (),
           quotas: Sequence[Quota] = (), usage: Mapping[tuple[str, str], float] | None = None,
           ) -> Decisions:
    """What to do now. `usage` is each (project, pool)'s recent mean dominant share."""
    out = Decisions()
    pools: dict[str, _Pool] = {}
    for n in nodes:
        pools.setdefault(n.pool, _Pool(n.pool)).add(n)
    for r in sorted(running, key=lambda r: (r.seq, r.job_id)):  # input order must not count
        pool = pools.get(r.pool)
        if pool is not None:
            pool.hold(r)
    # One pass of grouping: pool -> priority -> project -> jobs.
    streams: dict[tuple[str, int, str], list[Queued]] = {}
    for q in queue:
        key = (q.pool, q.priority, q.project)
        js = streams.get(key)
        if js is None:
            streams[key] = [q]
        else:
            js.append(q)
    by_pool: dict[str, dict[int, dict[str, list[Queued]]]] = {}
    for (pool_id, prio, project), js in streams.items():
        by_pool.setdefault(pool_id, {}).setdefault(prio, {})[project] = js
    quota_of = {(q.project, q.pool): q for q in quotas}
    for name in sorted(by_pool):
        pool = pools.get(name)
        if pool is None:
            pool = _Pool(name)
        _Pass(pool, quota_of, usage or {}, out).run(by_pool[name])
    return out


# --- one pool's state ---------------------------------------------------------------------


class _Pool:
    """Free and reserved capacity per node, as plain lists for speed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.names: list[str] = []
        self.gpu_type: list[str] = []
        self.cap: list[resources.Resources] = []
        self.cpu: list[float] = []
        self.mem: list[int] = []
        self.gpus: list[list[int]] = []  #: free GPU ids
        self.res_cpu: list[float] = []  #: reserved for the head
        self.res_mem: list[int] = []
        self.res_gpu: list[int] = []
        self.total = resources.ZERO
        self.running: list[Running] = []
        self.index: dict[str, int] = {}

    def add(self, n: Node) -> None:
        self.index[n.name] = len(self.names)
        self.names.append(n.name)
        self.gpu_type.append(n.gpu_type)
        self.cap.append(n.capacity)
        self.cpu.append(n.capacity.cpu)
        self.mem.append(n.capacity.memory_mb)
        self.gpus.append(list(n.gpu_ids)[: n.capacity.gpu])
        self.res_cpu.append(0.0)
        self.res_mem.append(0)
        self.res_gpu.append(0)
        self.total = self.total + n.capacity

    def hold(self, r: Running) -> None:
        self.running.append(r)
        for slot in r.slots:
            i = self.index.get(slot.node)
            if i is None:
                continue
            self.cpu[i] -= r.per_task.cpu
            self.mem[i] -= r.per_task.memory_mb
            busy = set(slot.gpu_ids)
            self.gpus[i] = [g for g in self.gpus[i] if g not in busy]

    def share(self, r: resources.Resources) -> float:
        """Dominant share of `r` in this pool (0 for a pool without capacity)."""
        t = self.total
        return max(r.cpu / t.cpu if t.cpu else 0.0, r.memory_mb / t.memory_mb
                   if t.memory_mb else 0.0, r.gpu / t.gpu if t.gpu else 0.0)


class _Room:
    """Capacity per node that one fit may use, as mutable lists."""

    def __init__(self, cpu: list[float], mem: list[int], gpu: list[int]) -> None:
        self.cpu, self.mem, self.gpu = cpu, mem, gpu


def _avail(pool: _Pool) -> _Room:
    """What is free and not reserved for the head."""
    return _Room([c - r for c, r in zip(pool.cpu, pool.res_cpu, strict=True)],
                 [m - r for m, r in zip(pool.mem, pool.res_mem, strict=True)],
                 [len(g) - r for g, r in zip(pool.gpus, pool.res_gpu, strict=True)])


def _fit(pool: _Pool, q: Queued, room: _Room, order: Iterable[int] | None = None,
         ) -> list[int] | None:
    """Node index per task if the whole gang fits in `room` (which it then uses up)."""
    d = q.per_task
    if order is not None:
        idx: Iterable[int] = order
    elif q.spread:
        idx = range(len(pool.names))
    else:
        # Best fit: the node with the fewest free GPUs, then the fewest free cores, that
        # holds it, so that small jobs fill gaps and whole nodes stay free for big gangs
        # (and CPU-only jobs do not strand the GPUs of an idle GPU node).
        idx = sorted(range(len(pool.names)), key=lambda i: (room.gpu[i], room.cpu[i], i))
    ok = [i for i in idx if not (d.gpu and q.gpu_type and pool.gpu_type[i] != q.gpu_type)]
    out: list[int] = []
    if q.spread:
        taken: dict[int, int] = {}
        for _ in range(q.count):
            best = None
            for i in ok:
                if (d.cpu <= room.cpu[i] + EPS and d.memory_mb <= room.mem[i]
                        and d.gpu <= room.gpu[i]) and (best is None or taken.get(i, 0)
                                                       < taken.get(best, 0)):
                    best = i
            if best is None:
                return None
            _use(room, best, d)
            taken[best] = taken.get(best, 0) + 1
            out.append(best)
        return out
    for i in ok:
        while (len(out) < q.count and d.cpu <= room.cpu[i] + EPS
               and d.memory_mb <= room.mem[i] and d.gpu <= room.gpu[i]):
            _use(room, i, d)
            out.append(i)
        if len(out) == q.count:
            return out
    return None


def _use(room: _Room, i: int, d: resources.Resources) -> None:
    room.cpu[i] -= d.cpu
    room.mem[i] -= d.memory_mb
    room.gpu[i] -= d.gpu


_SEQ = operator.attrgetter("seq")


# --- one pass over one pool ---------------------------------------------------------------


class _Pass:
    def __init__(self, pool: _Pool, quota_of: Mapping[tuple[str, str], Quota],
                 usage: Mapping[tuple[str, str], float], out: Decisions) -> None:
        self.pool = pool
        self.quota_of = {proj: q for (proj, pool_id), q in quota_of.items()
                         if pool_id == pool.name}
        self.usage = usage
        self.out = out
        self.used: dict[str, resources.Resources] = {}
        for r in pool.running:
            self.used[r.project] = (self.used.get(r.project, resources.ZERO)
                                    + r.per_task.times(len(r.slots)))
        self.head: Queued | None = None
        self.ahead = 0
        #: gang shapes that did not fit: room only shrinks during a pass, so they never will
        self.no_room: set[tuple[float, int, int, int, bool, str]] = set()
        self.behind_msg: dict[WaitCode, str] = {}
        # Both only change when a project starts a job (then its entries are dropped): a
        # long queue asks the same questions thousands of times.
        self.keys: dict[str, float] = {}
        self.verdicts: dict[tuple[str, tuple[float, int, int, int, bool, str]], str] = {}

    def run(self, levels: dict[int, dict[str, list[Queued]]]) -> None:
        if not self.pool.names:
            jobs = [q for per in levels.values() for js in per.values() for q in js]
            for q in sorted(jobs, key=lambda j: (-j.priority, j.seq)):
                self._wait(q, WaitCode.NO_NODE, f"pool '{self.pool.name}' has no nodes")
            return
        # The hot loop: most of a long queue is jobs whose shape already failed to fit,
        # waiting behind the head; they are answered here without the general path.
        no_room, quota_of, verdicts = self.no_room, self.quota_of, self.verdicts
        append, name = self.out.waits.append, self.pool.name
        for q in self._order(levels):
            quota = quota_of.get(q.project)
            if quota is not None:
                verdict = verdicts.get((q.project, q.shape))
                if verdict is None or (verdict and quota.borrowing
                                       and q.shape not in no_room):
                    self._one(q)
                    continue
                if verdict:
                    append(_new_wait((q.job_id, WaitCode.QUOTA, verdict, name, self.ahead)))
                    self.ahead += 1
                    continue
            head = self.head
            if head is not None and q.shape in no_room:
                code = WaitCode.PRIORITY if head.priority > q.priority else WaitCode.QUEUED
                msg = self.behind_msg.get(code) or self._behind(code)
                append(_new_wait((q.job_id, code, msg, name, self.ahead)))
                self.ahead += 1
                continue
            self._one(q)

    def _behind(self, code: WaitCode) -> str:
        # Not the head's id: the head changes with every start, and a reason that named it
        # would have every waiting job's row rewritten each time (its place in the queue is
        # shown from the live order instead; the head is the first in the pool's queue).
        h = self.head
        assert h is not None
        msg = self.behind_msg[code] = (
            f"waiting behind higher priority: a job of priority {h.priority} is next to "
            f"start in pool {self.pool.name}" if code is WaitCode.PRIORITY
            else f"queued: behind the job next to start in pool {self.pool.name}")
        return msg

    def _order(self, levels: dict[int, dict[str, list[Queued]]]) -> Iterable[Queued]:
        """Priority first; inside a priority the last head, then fair share by project."""
        for prio in sorted(levels, reverse=True):
            per_project = levels[prio]
            heads = sorted((q for js in per_project.values() for q in js if q.was_head),
                           key=lambda q: q.seq)
            first = heads[0] if heads else None
            if first is not None:
                yield first
            heap = []
            for project, js in per_project.items():
                js.sort(key=_SEQ)
                heap.append((self._key(project), js[0].seq, project, 0))
            heapq.heapify(heap)
            while heap:
                _, _, project, i = heapq.heappop(heap)
                js = per_project[project]
                n = len(js)
                # Keep serving this project while it stays first: its key only changes
                # when it starts a job, so most of a long queue needs no heap operation.
                while True:
                    q = js[i]
                    if q is not first:
                        yield q
                    i += 1
                    if i == n:
                        break
                    nxt = (self._key(project), js[i].seq)
                    if heap and nxt > heap[0][:2]:
                        heapq.heappush(heap, (*nxt, project, i))
                        break

    def _key(self, project: str) -> float:
        key = self.keys.get(project)
        if key is None:
            key = self.keys[project] = self._fair_share(project)
        return key

    def _fair_share(self, project: str) -> float:
        quota = self.quota_of.get(project)
        weight = quota.weight if quota and quota.weight > 0 else 1.0
        held = self.pool.share(self.used.get(project, resources.ZERO))
        return (self.usage.get((project, self.pool.name), 0.0) + held) / weight

    def _one(self, q: Queued) -> None:
        quota = self.quota_of.get(q.project)
        shape = q.shape
        over = ""
        if quota is not None:
            vkey = (q.project, shape)
            over = self.verdicts.get(vkey)  # type: ignore[assignment]
            if over is None:
                over = self._over_quota(q, q.per_task.times(q.count))
                if over:
                    over = (f"quota exceeded: {over}; it may borrow idle capacity, but not "
                            "enough is free" if quota.borrowing else f"quota exceeded: {over}")
                self.verdicts[vkey] = over
        borrowed = bool(over)
        if over and not (quota and quota.borrowing):
            self._wait(q, WaitCode.QUOTA, over)
            return
        if shape not in self.no_room:
            room = _avail(self.pool)
            placed = _fit(self.pool, q, room)
            if placed is not None:
                self._start(q, placed, borrowed)
                return
            self.no_room.add(shape)
        if borrowed:
            self._wait(q, WaitCode.QUOTA, over)
        elif self.head is None:
            self._become_head(q)
        else:
            code = WaitCode.PRIORITY if self.head.priority > q.priority else WaitCode.QUEUED
            self._wait(q, code, self.behind_msg.get(code) or self._behind(code))

    def _over_quota(self, q: Queued, need: resources.Resources) -> str:
        quota = self.quota_of.get(q.project)
        if quota is None:
            return ""
        used = self.used.get(q.project, resources.ZERO)
        parts = []
        for label, limit, u, n, unit in (
                ("CPU", quota.cpu, used.cpu, need.cpu, " core(s)"),
                ("memory", quota.memory_mb, used.memory_mb, need.memory_mb, " MiB"),
                ("GPU", quota.gpu, used.gpu, need.gpu, "")):
            if limit is not None and n and u + n > limit + EPS:
                parts.append(f"{label} quota of project {q.project} in pool {self.pool.name} "
                             f"is {limit:g}{unit}, {u:g} in use, the job needs {n:g} "
                             f"(over by {u + n - limit:g})")
        return "; ".join(parts)

    def _start(self, q: Queued, placed: list[int], borrowed: bool) -> None:
        pool, d = self.pool, q.per_task
        slots = []
        for i in placed:
            pool.cpu[i] -= d.cpu
            pool.mem[i] -= d.memory_mb
            ids, pool.gpus[i] = tuple(pool.gpus[i][: d.gpu]), pool.gpus[i][d.gpu:]
            slots.append(TaskSlot(pool.names[i], ids))
        self.used[q.project] = self.used.get(q.project, resources.ZERO) + d.times(q.count)
        self.keys.pop(q.project, None)
        for k in [k for k in self.verdicts if k[0] == q.project]:
            del self.verdicts[k]  # in place: the hot loop holds this dict
        self.out.starts.append(Start(q.job_id, tuple(slots), borrowed, self.head is not None))

    def _wait(self, q: Queued, code: WaitCode, message: str) -> None:
        self.out.waits.append(_new_wait((q.job_id, code, message, self.pool.name, self.ahead)))
        self.ahead += 1

    # --- the head: preempt for it, reserve for it ---------------------------------------

    def _become_head(self, q: Queued) -> None:
        self.head = q
        pool = self.pool
        stopping = [r for r in pool.running if r.stopping]
        victims = self._victims(q, stopping)
        if victims is None:  # no preemption can make room: reserve where it will start
            order = sorted(range(len(pool.names)),
                           key=lambda i: (-pool.cpu[i] - 1000 * len(pool.gpus[i]), i))
            cap = _Room([c.cpu - r for c, r in zip(pool.cap, pool.res_cpu, strict=True)],
                        [c.memory_mb - r for c, r in zip(pool.cap, pool.res_mem, strict=True)],
                        [c.gpu - r for c, r in zip(pool.cap, pool.res_gpu, strict=True)])
            placed = _fit(pool, q, cap, order)
            if placed is None:
                self._wait(q, WaitCode.NO_NODE, f"no nodes of pool {pool.name} can hold "
                           f"{q.count} task(s) of {resources.describe(q.per_task)}")
                return
            self._reserve(q, placed)
            self._wait(q, *self._short_of(q))
            return
        placed = _fit(pool, q, self._room_with(stopping + victims))
        assert placed is not None
        self._reserve(q, placed)
        for v in victims:
            reclaim = v.borrowed and not (v.preemptible and v.priority < q.priority)
            self.out.preempts.append(Preempt(v.job_id, q.job_id, reclaim))
        names = ", ".join(r.job_id for r in stopping + victims)
        self._wait(q, WaitCode.PREEMPTING,
                   f"waiting for resources: preempting to make room in pool {pool.name}; "
                   f"starts once these job(s) have stopped: {names}")

    def _victims(self, q: Queued, stopping: list[Running]) -> list[Running] | None:
        """The fewest running jobs to stop so that `q` fits; None if none can do it."""
        within = not self._over_quota(q, q.per_task.times(q.count))
        candidates = sorted(
            (r for r in self.pool.running if not r.stopping and (
                (r.preemptible and r.priority < q.priority)
                or (within and r.borrowed and r.project != q.project))),
            key=lambda r: (not r.borrowed, r.priority, -r.started_at, -r.seq, r.job_id))
        if not stopping and not candidates:
            return None
        chosen: list[Running] = []
        while _fit(self.pool, q, self._room_with(stopping + chosen)) is None:
            if not candidates:
                return None
            chosen.append(candidates.pop(0))
        for v in reversed(list(chosen)):  # drop any the others make unneeded
            rest = [c for c in chosen if c is not v]
            if _fit(self.pool, q, self._room_with(stopping + rest)) is not None:
                chosen = rest
        if not chosen and not stopping:
            return None
        return chosen

    def _room_with(self, freed: Sequence[Running]) -> _Room:
        room = _avail(self.pool)
        for r in freed:
            for slot in r.slots:
                i = self.pool.index.get(slot.node)
                if i is not None:
                    room.cpu[i] += r.per_task.cpu
                    room.mem[i] += r.per_task.memory_mb
                    room.gpu[i] += len(slot.gpu_ids)
        return room

    def _reserve(self, q: Queued, placed: list[int]) -> None:
        d = q.per_task
        for i in placed:
            self.pool.res_cpu[i] += d.cpu
            self.pool.res_mem[i] += d.memory_mb
            self.pool.res_gpu[i] += d.gpu

    def _short_of(self, q: Queued) -> tuple[WaitCode, str]:
        pool, d = self.pool, q.per_task
        gang = f"{q.count} tasks of " if q.count > 1 else ""
        free = R(sum(pool.cpu), sum(pool.mem), sum(len(g) for g in pool.gpus))
        if len(pool.names) <= 4:
            now = "; ".join(
                f"{n}: {resources.describe(R(c, m, len(g)))}"
                for n, c, m, g in zip(pool.names, pool.cpu, pool.mem, pool.gpus, strict=True))
        else:
            now = f"{resources.describe(free)} over {len(pool.names)} nodes"
        if q.count > 1 and d.times(q.count).fits_in(free):
            return WaitCode.GANG, (
                f"waiting for resources: gang does not fit: needs {gang}"
                f"{resources.describe(d)} at once in pool {pool.name}, and the free capacity "
                f"is spread over too few nodes; free now {now}")
        return WaitCode.NO_CAPACITY, (
            f"waiting for resources: not enough free capacity in pool {pool.name}: needs "
            f"{gang}{resources.describe(d)}; free now {now}")
