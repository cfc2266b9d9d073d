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

import bisect
import dataclasses
import enum
import functools
import heapq
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from corral.domain import resources

R = resources.Resources
EPS = 1e-9
#: (cpu, memory_mb, gpu, count, spread, gpu_type, accelerators) of a queued job
Shape = tuple[float, int, int, int, bool, str, resources.Accels]


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
    #: device ids per accelerator of `capacity` (those left out are numbered 0 .. n-1)
    accel_ids: resources.DeviceIds = ()


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
    shape: Shape = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = self.per_task
        object.__setattr__(self, "shape", (d.cpu, d.memory_mb, d.gpu, self.count, self.spread,
                                           self.gpu_type, d.accel))


class TaskSlot(NamedTuple):
    node: str
    gpu_ids: tuple[int, ...]
    accel_ids: resources.DeviceIds = ()  #: device ids per accelerator the task was given


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
    #: limits per accelerator by name (0 is a limit too); one left out has none
    accel: resources.Accels = ()


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
    #: the pools where a node still has CPU, GPUs or accelerators free after the starts
    #: (jobs beyond those decided on could start there)
    roomy: set[str] = dataclasses.field(default_factory=set)


def decide(queue: Sequence[Queued], nodes: Sequence[Node], running: Sequence[Running] = (),
           quotas: Sequence[Quota] = (), usage: Mapping[tuple[str, str], float] | None = None,
           ) -> Decisions:
    """What to do now. `usage` is each (project, pool)'s recent mean dominant share."""
    out = Decisions()
    pools = _pools(nodes, running)
    by_pool, heads = _group(queue)
    quota_of = {(q.project, q.pool): q for q in quotas}
    for name in sorted(by_pool):
        pool = pools.get(name)
        if pool is None:
            pool = _Pool(name)
        _Pass(pool, quota_of, usage or {}, out).run(by_pool[name], heads)
        if pool.has_room():
            out.roomy.add(name)
    return out


def queue_order(queue: Sequence[Queued], nodes: Sequence[Node],
                held: Mapping[tuple[str, str], resources.Resources] | None = None,
                quotas: Sequence[Quota] = (),
                usage: Mapping[tuple[str, str], float] | None = None,
                ) -> dict[str, list[Queued]]:
    """Each pool's waiting jobs in the order `decide` considers them while none of them
    starts: priority, then the pool's last head at its priority, then fair share between
    projects (`fair_share`, lowest first), then submission. `held` is what each
    (project, pool) holds now. This is the place in the queue users are shown."""
    pools = _pools(nodes, ())
    by_pool, heads = _group(queue)
    quota_of = {(q.project, q.pool): q for q in quotas}
    out = {}
    for name in sorted(by_pool):
        used = {p: r for (p, pool), r in (held or {}).items() if pool == name}
        p = _Pass(pools.get(name) or _Pool(name), quota_of, usage or {}, Decisions(), used)
        out[name] = list(p.considered(by_pool[name], heads))
    return out


def fair_share(usage: float, held: float, weight: float) -> float:
    """A project's fair-share key in a pool: its recent mean dominant share plus the
    dominant share it holds now, over its quota's weight. Lower goes first."""
    return (usage + held) / (weight if weight > 0 else 1.0)


def _pools(nodes: Sequence[Node], running: Sequence[Running]) -> dict[str, _Pool]:
    pools: dict[str, _Pool] = {}
    for n in nodes:
        pools.setdefault(n.pool, _Pool(n.pool)).add(n)
    for r in sorted(running, key=lambda r: (r.seq, r.job_id)):  # input order must not count
        pool = pools.get(r.pool)
        if pool is not None:
            pool.hold(r)
    return pools


#: pool -> priority -> project -> its waiting jobs
_Levels = dict[str, dict[int, dict[str, list[Queued]]]]


def _group(queue: Iterable[Queued]) -> tuple[_Levels, dict[tuple[str, int], Queued]]:
    """The queue by pool, priority and project, in one pass; and each (pool, priority)'s
    last head (the oldest, should there be several)."""
    streams: dict[tuple[str, int, str], list[Queued]] = {}
    heads: dict[tuple[str, int], Queued] = {}
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
    by_pool: _Levels = {}
    for (pool_id, prio, project), js in streams.items():
        by_pool.setdefault(pool_id, {}).setdefault(prio, {})[project] = js
    return by_pool, heads


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
        self.acc: list[dict[str, list[int]]] = []  #: free device ids per accelerator
        self.res_acc: list[dict[str, int]] = []
        self.has_acc = False  #: any node has accelerators (else the lists above stay unread)
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
        ids = dict(n.accel_ids)
        self.acc.append({k: list(ids.get(k, range(c)))[:c] for k, c in n.capacity.accel})
        self.res_acc.append({})
        self.has_acc = self.has_acc or bool(n.capacity.accel)
        self.total = self.total + n.capacity

    def has_room(self) -> bool:
        """Whether a node has CPU, GPUs or accelerators free (reservations count as free)."""
        return (any(c > EPS for c in self.cpu) or any(self.gpus)
                or any(ids for free in self.acc for ids in free.values()))

    def hold(self, r: Running) -> None:
        self.running.append(r)
        for slot in r.slots:
            i = self.index.get(slot.node)
            if i is None:
                continue
            self.cpu[i] -= r.per_task.cpu
            self.mem[i] -= r.per_task.memory_mb
            if slot.gpu_ids:
                busy = set(slot.gpu_ids)
                self.gpus[i] = [g for g in self.gpus[i] if g not in busy]
            for k, ids in slot.accel_ids:
                free = self.acc[i].get(k)
                if free is not None:
                    self.acc[i][k] = [d for d in free if d not in ids]

    def share(self, r: resources.Resources) -> float:
        """Dominant share of `r` in this pool (0 for a pool without capacity)."""
        return resources.dominant_share(r, self.total)


class _Room:
    """Capacity per node that one fit may use, as mutable lists (`acc`: accelerators by
    name per node, None in a pool without any)."""

    def __init__(self, cpu: list[float], mem: list[int], gpu: list[int],
                 acc: list[dict[str, int]] | None = None) -> None:
        self.cpu, self.mem, self.gpu, self.acc = cpu, mem, gpu, acc

    def copy(self) -> _Room:
        return _Room(list(self.cpu), list(self.mem), list(self.gpu),
                     None if self.acc is None else [dict(a) for a in self.acc])


def _avail(pool: _Pool) -> _Room:
    """What is free and not reserved for the head."""
    return _Room([c - r for c, r in zip(pool.cpu, pool.res_cpu, strict=True)],
                 [m - r for m, r in zip(pool.mem, pool.res_mem, strict=True)],
                 [len(g) - r for g, r in zip(pool.gpus, pool.res_gpu, strict=True)],
                 [{k: len(v) - res.get(k, 0) for k, v in free.items()}
                  for free, res in zip(pool.acc, pool.res_acc, strict=True)]
                 if pool.has_acc else None)


def _best_fit(room: _Room) -> list[int]:
    """Nodes with the fewest free GPUs and accelerators, then the fewest free cores,
    first: small jobs fill gaps and whole nodes stay free for big gangs (and CPU-only jobs
    do not strand the devices of an idle GPU or NPU node)."""
    if room.acc is None:
        return sorted(range(len(room.cpu)), key=lambda i: (room.gpu[i], room.cpu[i], i))
    devices = [g + sum(a.values()) for g, a in zip(room.gpu, room.acc, strict=True)]
    return sorted(range(len(room.cpu)), key=lambda i: (devices[i], room.cpu[i], i))


def _has(free: dict[str, int], acc: resources.Accels) -> bool:
    return all(v <= free.get(k, 0) for k, v in acc)


def _fit(pool: _Pool, q: Queued, room: _Room, order: Iterable[int] | None = None,
         ) -> list[int] | None:
    """Node index per task if the whole gang fits in `room` (which it then uses up)."""
    d = q.per_task
    if order is not None:
        idx: Iterable[int] = order
    elif q.spread:
        idx = range(len(pool.names))
    else:
        idx = _best_fit(room)
    acc = d.accel
    racc = room.acc if room.acc is not None else []
    if acc and not racc:
        return None  # no node of the pool has any accelerator
    ok = [i for i in idx if not (d.gpu and q.gpu_type and pool.gpu_type[i] != q.gpu_type)]
    out: list[int] = []
    if q.spread:
        taken: dict[int, int] = {}
        for _ in range(q.count):
            best = None
            for i in ok:
                if (d.cpu <= room.cpu[i] + EPS and d.memory_mb <= room.mem[i]
                        and d.gpu <= room.gpu[i] and (not acc or _has(racc[i], acc))
                        ) and (best is None or taken.get(i, 0) < taken.get(best, 0)):
                    best = i
            if best is None:
                return None
            _use(room, best, d)
            taken[best] = taken.get(best, 0) + 1
            out.append(best)
        return out
    for i in ok:
        while (len(out) < q.count and d.cpu <= room.cpu[i] + EPS
               and d.memory_mb <= room.mem[i] and d.gpu <= room.gpu[i]
               and (not acc or _has(racc[i], acc))):
            _use(room, i, d)
            out.append(i)
        if len(out) == q.count:
            return out
    return None


def _use(room: _Room, i: int, d: resources.Resources) -> None:
    room.cpu[i] -= d.cpu
    room.mem[i] -= d.memory_mb
    room.gpu[i] -= d.gpu
    if d.accel and room.acc is not None:
        free = room.acc[i]
        for k, v in d.accel:
            free[k] = free.get(k, 0) - v


_SEQ = operator.attrgetter("seq")


def _held(running: Iterable[Running]) -> dict[str, resources.Resources]:
    """What each project holds (plain sums: a big cluster runs thousands of jobs)."""
    sums: dict[str, list[float]] = {}
    accel: dict[str, resources.Resources] = {}
    for r in running:
        n, d = len(r.slots), r.per_task
        s = sums.get(r.project)
        if s is None:
            s = sums[r.project] = [0.0, 0, 0]
        s[0] += d.cpu * n
        s[1] += d.memory_mb * n
        s[2] += d.gpu * n
        if d.accel:
            accel[r.project] = accel.get(r.project, resources.ZERO) + R(
                accel=d.accel).times(n)
    return {p: R(s[0], int(s[1]), int(s[2]), accel[p].accel if p in accel else ())
            for p, s in sums.items()}


def _jobs(jobs: Sequence[Running], seen_by: Queued) -> str:
    """Jobs as `seen_by`'s project may see them: its own by id, others only counted."""
    own = [r.job_id for r in jobs if r.project == seen_by.project]
    others = len(jobs) - len(own)
    return ", ".join([*own, *([f"{others} job(s) of other projects"] if others else [])])


def _turn_ends(key: float, project: str, js: list[Queued], i: int,
               heap: list[tuple[float, int, str, int]]) -> int:
    """The first index of `js[i:]` at which the project on top of `heap` comes first
    (the order is key, then submission, then project name)."""
    if not heap:
        return len(js)
    other, seq, name, _ = heap[0]
    if key != other:
        return len(js) if key < other else i
    if project < name:
        return bisect.bisect_right(js, seq, i, key=_SEQ)
    return bisect.bisect_left(js, seq, i, key=_SEQ)


# --- one pass over one pool ---------------------------------------------------------------


class _Pass:
    def __init__(self, pool: _Pool, quota_of: Mapping[tuple[str, str], Quota],
                 usage: Mapping[tuple[str, str], float], out: Decisions,
                 used: dict[str, resources.Resources] | None = None) -> None:
        self.pool = pool
        self.quota_of = {proj: q for (proj, pool_id), q in quota_of.items()
                         if pool_id == pool.name}
        self.usage = usage
        self.out = out
        self.used = _held(pool.running) if used is None else used
        self.head: Queued | None = None
        self.ahead = 0
        #: gang shapes that did not fit: room only shrinks during a pass, so they never will
        self.no_room: set[Shape] = set()
        self.behind_msg: dict[tuple[WaitCode, bool], str] = {}
        # Both only change when a project starts a job (then its entries are dropped): a
        # long queue asks the same questions thousands of times.
        self.keys: dict[str, float] = {}
        #: per project, its quota verdict per shape ("" when within its quota)
        self.verdicts: dict[str, dict[Shape, str]] = {}
        #: what is free and not reserved, the nodes in best-fit order, and the most any
        #: node has free of each resource, until a start or a reservation changes them
        self.free: tuple[_Room, list[int], tuple[float, int, int]] | None = None

    def run(self, levels: dict[int, dict[str, list[Queued]]],
            heads: Mapping[tuple[str, int], Queued]) -> None:
        if not self.pool.names:
            for q in self.considered(levels, heads):
                self._wait(q, WaitCode.NO_NODE, f"pool '{self.pool.name}' has no nodes")
            return
        for prio in sorted(levels, reverse=True):
            per_project = levels[prio]
            first = heads.get((self.pool.name, prio))
            if first is not None:  # the last head keeps its place against fair share
                self._one(first)
            heap = []
            for project, js in per_project.items():
                js.sort(key=_SEQ)
                if first is not None and first.project == project:
                    js = per_project[project] = [q for q in js if q is not first]
                if js:
                    heap.append((self._key(project), js[0].seq, project, 0))
            heapq.heapify(heap)
            while heap:
                _, _, project, i = heapq.heappop(heap)
                self._serve(project, per_project[project], i, heap)

    def considered(self, levels: dict[int, dict[str, list[Queued]]],
                   heads: Mapping[tuple[str, int], Queued]) -> Iterator[Queued]:
        """The jobs in the order `run` considers them when none of them starts (projects'
        keys then stay as they are)."""
        for prio in sorted(levels, reverse=True):
            first = heads.get((self.pool.name, prio))
            if first is not None:
                yield first
            keys = {project: self._key(project) for project in levels[prio]}
            yield from sorted((q for js in levels[prio].values() for q in js if q is not first),
                              key=lambda q: (keys[q.project], q.seq, q.project))

    # --- fair share: serve the project with the lowest key, in runs ----------------------

    def _serve(self, project: str, js: list[Queued], i: int,
               heap: list[tuple[float, int, str, int]]) -> None:
        """Serve `project`'s jobs from `js[i]` until another project's turn comes (then it
        goes back on the heap). Its key changes only when it starts a job, so most of a
        long queue is answered in runs, without a heap operation per job."""
        n = len(js)
        key = self._key(project)
        stop = _turn_ends(key, project, js, i, heap)
        while i < n:
            if i >= stop:
                heapq.heappush(heap, (key, js[i].seq, project, i))
                return
            i = self._drain(project, js, i, stop)
            if i < stop:  # a job the short path cannot answer
                self._one(js[i])
                i += 1
                if project not in self.keys:  # it started a job: its key moved
                    key = self._key(project)
                    stop = _turn_ends(key, project, js, i, heap)

    def _drain(self, project: str, js: list[Queued], i: int, stop: int) -> int:
        """The hot loop: answer jobs `js[i:stop]` whose shape is known not to fit now, or
        whose quota verdict is known; returns where it stopped (a job that needs more)."""
        if self.head is None and project not in self.quota_of:
            return i
        name, append, new, wait = self.pool.name, self.out.waits.append, tuple.__new__, Wait
        start = ahead = self.ahead
        #: per shape, (code, message) of its wait, or () when the general path must decide
        answers: dict[Shape, tuple[WaitCode, str] | tuple[()]] = {}
        for q in js[i:stop]:
            shape = q.shape
            answer = answers.get(shape)
            if answer is None:
                answer = answers[shape] = self._known(q)
            if not answer:
                break
            append(new(wait, (q.job_id, answer[0], answer[1], name, ahead)))
            ahead += 1
        self.ahead = ahead
        return i + ahead - start

    def _known(self, q: Queued) -> tuple[WaitCode, str] | tuple[()]:
        """Why `q` waits, if that follows from what this pass already knows (its shape did
        not fit, or its quota verdict); () if it needs the general path."""
        quota = self.quota_of.get(q.project)
        if quota is not None:
            verdict = self.verdicts.get(q.project, {}).get(q.shape)
            if verdict is None:
                return ()
            if verdict:
                if quota.borrowing and q.shape not in self.no_room:
                    return ()
                return WaitCode.QUOTA, verdict
        if self.head is not None and q.shape in self.no_room:
            return self._behind(q)
        return ()

    def _behind(self, q: Queued) -> tuple[WaitCode, str]:
        """Why `q` waits behind the head (a few messages for thousands of jobs). Other
        projects' jobs learn only that it belongs to another project, and its priority."""
        h = self.head
        assert h is not None
        code = WaitCode.PRIORITY if h.priority > q.priority else WaitCode.QUEUED
        same = h.project == q.project
        msg = self.behind_msg.get((code, same))
        if msg is None:
            # Never the head's id: the head changes with every start, and a reason naming
            # it would rewrite every waiting job's row each time (the place in the queue
            # is shown from the live order instead).
            who = (f"a job of priority {h.priority}" if same
                   else f"a job of another project (priority {h.priority})")
            msg = self.behind_msg[code, same] = (
                f"waiting behind higher priority: {who} is next to start in pool "
                f"{self.pool.name}" if code is WaitCode.PRIORITY
                else f"queued: behind {'the job' if same else 'a job of another project'} "
                     f"next to start in pool {self.pool.name}")
        return code, msg

    def _key(self, project: str) -> float:
        key = self.keys.get(project)
        if key is None:
            key = self.keys[project] = self._fair_share(project)
        return key

    def _fair_share(self, project: str) -> float:
        quota = self.quota_of.get(project)
        return fair_share(self.usage.get((project, self.pool.name), 0.0),
                          self.pool.share(self.used.get(project, resources.ZERO)),
                          quota.weight if quota else 1.0)

    def _one(self, q: Queued) -> None:
        quota = self.quota_of.get(q.project)
        shape = q.shape
        over = ""
        if quota is not None:
            verdicts = self.verdicts.setdefault(q.project, {})
            known = verdicts.get(shape)
            if known is None:
                over = self._over_quota(q, q.per_task.times(q.count))
                if over:
                    over = (f"quota exceeded: {over}; it may borrow idle capacity, but not "
                            "enough is free" if quota.borrowing else f"quota exceeded: {over}")
                verdicts[shape] = over
            else:
                over = known
        borrowed = bool(over)
        if over and not (quota and quota.borrowing):
            self._wait(q, WaitCode.QUOTA, over)
            return
        if shape not in self.no_room:
            placed = self._place(q)
            if placed is not None:
                self._start(q, placed, borrowed)
                return
            self.no_room.add(shape)
        if borrowed:
            self._wait(q, WaitCode.QUOTA, over)
        elif self.head is None:
            self._become_head(q)
        else:
            self._wait(q, *self._behind(q))

    def _place(self, q: Queued) -> list[int] | None:
        """Where `q` starts now (outside the head's reservation), or None."""
        if self.free is None:
            room = _avail(self.pool)
            self.free = room, _best_fit(room), (max(room.cpu), max(room.mem), max(room.gpu))
        room, order, most = self.free
        d = q.per_task
        if d.cpu > most[0] + EPS or d.memory_mb > most[1] or d.gpu > most[2]:
            return None  # no node has room for one task: most of a full cluster's queue
        return _fit(self.pool, q, room.copy(), None if q.spread else order)

    def _over_quota(self, q: Queued, need: resources.Resources) -> str:
        quota = self.quota_of.get(q.project)
        if quota is None:
            return ""
        used = self.used.get(q.project, resources.ZERO)
        parts = []
        for label, limit, u, n, unit in (
                ("CPU", quota.cpu, used.cpu, need.cpu, " core(s)"),
                ("memory", quota.memory_mb, used.memory_mb, need.memory_mb, " MiB"),
                ("GPU", quota.gpu, used.gpu, need.gpu, ""),
                *((k, limit, used.count(k), need.count(k), "") for k, limit in quota.accel)):
            if limit is not None and n and u + n > limit + EPS:
                parts.append(f"{label} quota of project {q.project} in pool {self.pool.name} "
                             f"is {limit:g}{unit}, {u:g} in use, the job needs {n:g} "
                             f"(over by {u + n - limit:g})")
        return "; ".join(parts)

    def _start(self, q: Queued, placed: list[int], borrowed: bool) -> None:
        pool, d = self.pool, q.per_task
        self.free = None
        slots = []
        for i in placed:
            pool.cpu[i] -= d.cpu
            pool.mem[i] -= d.memory_mb
            ids, pool.gpus[i] = tuple(pool.gpus[i][: d.gpu]), pool.gpus[i][d.gpu:]
            devices = []
            for k, v in d.accel:
                free = pool.acc[i][k]
                devices.append((k, tuple(free[:v])))
                pool.acc[i][k] = free[v:]
            slots.append(TaskSlot(pool.names[i], ids, tuple(devices)))
        self.used[q.project] = self.used.get(q.project, resources.ZERO) + d.times(q.count)
        self.keys.pop(q.project, None)
        self.verdicts.get(q.project, {}).clear()  # in place: the hot loop holds it
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
            wanted = [k for k, _ in q.per_task.accel]
            order = sorted(range(len(pool.names)), key=lambda i: (
                -pool.cpu[i] - 1000 * (len(pool.gpus[i])
                                       + sum(len(pool.acc[i].get(k, ())) for k in wanted)), i))
            cap = _Room([c.cpu - r for c, r in zip(pool.cap, pool.res_cpu, strict=True)],
                        [c.memory_mb - r for c, r in zip(pool.cap, pool.res_mem, strict=True)],
                        [c.gpu - r for c, r in zip(pool.cap, pool.res_gpu, strict=True)],
                        [{k: v - res.get(k, 0) for k, v in c.accel}
                         for c, res in zip(pool.cap, pool.res_acc, strict=True)]
                        if pool.has_acc else None)
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
        self._wait(q, WaitCode.PREEMPTING,
                   f"waiting for resources: preempting to make room in pool {pool.name}; "
                   f"starts once these job(s) have stopped: {_jobs(stopping + victims, q)}")

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
                    if room.acc is not None:
                        for k, ids in slot.accel_ids:
                            room.acc[i][k] = room.acc[i].get(k, 0) + len(ids)
        return room

    def _reserve(self, q: Queued, placed: list[int]) -> None:
        d = q.per_task
        self.free = None
        for i in placed:
            self.pool.res_cpu[i] += d.cpu
            self.pool.res_mem[i] += d.memory_mb
            self.pool.res_gpu[i] += d.gpu
            res = self.pool.res_acc[i]
            for k, v in d.accel:
                res[k] = res.get(k, 0) + v

    def _short_of(self, q: Queued) -> tuple[WaitCode, str]:
        pool, d = self.pool, q.per_task
        gang = f"{q.count} tasks of " if q.count > 1 else ""
        each = [R(c, m, len(g), resources.accels((k, len(v)) for k, v in a.items()))
                for c, m, g, a in zip(pool.cpu, pool.mem, pool.gpus, pool.acc, strict=True)]
        free = sum(each, resources.ZERO)
        if len(pool.names) <= 4:
            now = "; ".join(f"{n}: {resources.describe(r)}"
                            for n, r in zip(pool.names, each, strict=True))
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
