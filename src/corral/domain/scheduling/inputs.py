"""What `decide` reads: the pools' nodes, the jobs waiting and running, and the quotas.

Frozen values: the reconciler builds them from its rows on every pass, tests and benchmarks
build them by hand, and nothing here decides anything.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from corral.domain import resources, values

#: (cpu, memory_mb, gpu, count, spread, gpu_type, accelerators, excluded nodes, the node
#: it is pinned to) of a queued job
Shape = tuple[float, int, int, int, bool, str, resources.Accels, frozenset[str], str]


@values.value
class Node:
    """A node of a pool, with its whole capacity; what is free follows from `running`."""

    name: str
    pool: str
    capacity: resources.Resources
    gpu_ids: tuple[int, ...] = ()
    gpu_type: str = ""
    #: device ids per accelerator of `capacity` (those left out are numbered 0 .. n-1)
    accel_ids: resources.DeviceIds = ()


@values.value
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
    #: nodes it is not placed on (it failed there; see `placement.keep_off`)
    excluded: frozenset[str] = frozenset()
    node: str = ""  #: the one node it may run on ("": any node of its pool)
    #: what placement depends on, as plain values (cheap to hash: a long queue is mostly
    #: the same few shapes, and each is tried once per pass)
    shape: Shape = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = self.per_task
        object.__setattr__(self, "shape", (d.cpu, d.memory_mb, d.gpu, self.count, self.spread,
                                           self.gpu_type, d.accel, self.excluded,
                                           self.node))


class TaskSlot(NamedTuple):
    """Where one task of a job runs, and the devices it holds there."""

    node: str
    gpu_ids: tuple[int, ...]
    accel_ids: resources.DeviceIds = ()  #: device ids per accelerator the task was given


@values.value
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


@values.value
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
