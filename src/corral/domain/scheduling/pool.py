"""One pool's nodes during a pass: what is free on each, and what is reserved for the head.

Kept as parallel plain lists, one entry per node, not as a `Resources` per node: a pass
over a long queue reads and changes them thousands of times.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from corral.domain import resources
from corral.domain.scheduling import inputs

#: slack in comparisons of cores, so that sums of fractional cores do not refuse an exact fit
EPS = 1e-9


class Pool:
    """Free and reserved capacity per node, and the jobs running in the pool."""

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
        self.running: list[inputs.Running] = []
        self.index: dict[str, int] = {}

    def add(self, n: inputs.Node) -> None:
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

    def hold(self, r: inputs.Running) -> None:
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


def build(nodes: Sequence[inputs.Node], running: Sequence[inputs.Running]) -> dict[str, Pool]:
    """The pools of `nodes` by name, with what `running` holds taken out."""
    pools: dict[str, Pool] = {}
    for n in nodes:
        pools.setdefault(n.pool, Pool(n.pool)).add(n)
    for r in sorted(running, key=lambda r: (r.seq, r.job_id)):  # input order must not count
        pool = pools.get(r.pool)
        if pool is not None:
            pool.hold(r)
    return pools


def held(running: Iterable[inputs.Running]) -> dict[str, resources.Resources]:
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
            accel[r.project] = accel.get(r.project, resources.ZERO) + resources.Resources(
                accel=d.accel).times(n)
    return {p: resources.Resources(s[0], int(s[1]), int(s[2]),
                                   accel[p].accel if p in accel else ())
            for p, s in sums.items()}


class Room:
    """Capacity per node that one fit may use, as mutable lists (`acc`: accelerators by
    name per node, None in a pool without any)."""

    def __init__(self, cpu: list[float], mem: list[int], gpu: list[int],
                 acc: list[dict[str, int]] | None = None) -> None:
        self.cpu, self.mem, self.gpu, self.acc = cpu, mem, gpu, acc

    def copy(self) -> Room:
        return Room(list(self.cpu), list(self.mem), list(self.gpu),
                    None if self.acc is None else [dict(a) for a in self.acc])


def available(pool: Pool) -> Room:
    """What is free and not reserved for the head."""
    return Room([c - r for c, r in zip(pool.cpu, pool.res_cpu, strict=True)],
                [m - r for m, r in zip(pool.mem, pool.res_mem, strict=True)],
                [len(g) - r for g, r in zip(pool.gpus, pool.res_gpu, strict=True)],
                [{k: len(v) - res.get(k, 0) for k, v in free.items()}
                 for free, res in zip(pool.acc, pool.res_acc, strict=True)]
                if pool.has_acc else None)


def unreserved(pool: Pool) -> Room:
    """The nodes' whole capacity less what is reserved: where a head can be promised room
    once running jobs end."""
    return Room([c.cpu - r for c, r in zip(pool.cap, pool.res_cpu, strict=True)],
                [c.memory_mb - r for c, r in zip(pool.cap, pool.res_mem, strict=True)],
                [c.gpu - r for c, r in zip(pool.cap, pool.res_gpu, strict=True)],
                [{k: v - res.get(k, 0) for k, v in c.accel}
                 for c, res in zip(pool.cap, pool.res_acc, strict=True)]
                if pool.has_acc else None)
