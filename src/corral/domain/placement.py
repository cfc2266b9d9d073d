"""Where queued jobs go: a pure function from (queue, free capacity) to decisions.

First come, first served: jobs start in queue order, all of a job's tasks at once or none
(gang), and the first job that does not fit stops the pass so that later, smaller jobs
cannot starve it. GPUs are handed out by index so they can be pinned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from corral.domain import resources


@dataclasses.dataclass(frozen=True)
class Request:
    job_id: str
    per_task: resources.Resources
    count: int


@dataclasses.dataclass(frozen=True)
class NodeFree:
    name: str
    free: resources.Resources
    free_gpus: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class TaskSlot:
    node: str
    gpu_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Assignment:
    job_id: str
    slots: tuple[TaskSlot, ...]


@dataclasses.dataclass(frozen=True)
class Blocked:
    job_id: str
    reason: str


def place_fifo(queue: Sequence[Request],
               nodes: Sequence[NodeFree]) -> tuple[list[Assignment], Blocked | None]:
    state = {n.name: (n.free, list(n.free_gpus)) for n in nodes}
    placed: list[Assignment] = []
    for req in queue:
        trial = {k: (free, list(g)) for k, (free, g) in state.items()}
        slots = _gang(req, trial, [n.name for n in nodes])
        if slots is None:
            return placed, Blocked(req.job_id, _reason(req, state))
        state = trial
        placed.append(Assignment(req.job_id, tuple(slots)))
    return placed, None


def _gang(req: Request, trial: dict[str, tuple[resources.Resources, list[int]]],
          order: list[str]) -> list[TaskSlot] | None:
    slots: list[TaskSlot] = []
    for _ in range(req.count):
        fits = [n for n in order if req.per_task.fits_in(trial[n][0])]
        if not fits:
            return None
        name = fits[0]
        free, gpu_ids = trial[name]
        taken = tuple(gpu_ids[: req.per_task.gpu])
        trial[name] = (free - req.per_task, gpu_ids[req.per_task.gpu:])
        slots.append(TaskSlot(name, taken))
    return slots


def _reason(req: Request, state: dict[str, tuple[resources.Resources, list[int]]]) -> str:
    need = resources.describe(req.per_task)
    free = "; ".join(f"{name}: {resources.describe(f)}" for name, (f, _g) in state.items())
    gang = f"{req.count} tasks of " if req.count > 1 else ""
    return f"waiting for resources: needs {gang}{need}; free now {free}"


def free_capacity(nodes: Sequence[resources.Node], used: dict[str, resources.Resources],
                  busy_gpus: dict[str, set[int]]) -> list[NodeFree]:
    out = []
    for n in nodes:
        free = n.capacity - used.get(n.name, resources.ZERO)
        gpu_ids = tuple(g.index for g in n.gpus if g.index not in busy_gpus.get(n.name, set()))
        out.append(NodeFree(n.name, free, gpu_ids))
    return out
