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

The modules, one concern each:

- `inputs`: what `decide` reads (`Node`, `Queued`, `Running`, `TaskSlot`, `Quota`);
- `outcomes`: what it answers (`Decisions` of `Start`, `Preempt`, `Wait` with a `WaitCode`);
- `order`: the queue's order and fair share (`queue_order`, the place users are shown);
- `pool`: one pool's free and reserved capacity per node during a pass;
- `placement`: the nodes a job's whole gang fits on (never those it is kept off);
- `head`: preemption and reservation for a pool's head;
- `deciding`: `decide`, the pass over each pool.

Unlike the other packages, this one re-exports the names its callers use: the scheduler,
the services, the store's tests and the benchmarks all say `scheduling.decide` and
`scheduling.Queued`, and the split into modules is how the rules are kept readable, not
something a caller should have to know.
"""

from __future__ import annotations

from corral.domain.scheduling.deciding import decide
from corral.domain.scheduling.inputs import Node, Queued, Quota, Running, TaskSlot
from corral.domain.scheduling.order import fair_share, queue_order
from corral.domain.scheduling.outcomes import (
    HEAD_CODES,
    Decisions,
    Preempt,
    Start,
    Wait,
    WaitCode,
)
from corral.domain.scheduling.placement import keep_off

__all__ = [
    "HEAD_CODES",
    "Decisions",
    "Node",
    "Preempt",
    "Queued",
    "Quota",
    "Running",
    "Start",
    "TaskSlot",
    "Wait",
    "WaitCode",
    "decide",
    "fair_share",
    "keep_off",
    "queue_order",
]
