"""What `decide` answers: the jobs to start and where, the jobs to preempt, and why the
others wait.

A waiting job's `WaitCode` is kept in the store with it (the `wait_code` column) and shown
by the API and the CLI, so its values are data, not just names.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import NamedTuple

from corral.domain.scheduling import inputs


class WaitCode(enum.StrEnum):
    QUEUED = "queued"  #: behind an older job of its priority that is next to start
    NO_CAPACITY = "no_capacity"  #: next to start; the pool lacks free capacity for now
    GANG = "gang_does_not_fit"  #: next to start; capacity is free but not on enough nodes
    PREEMPTING = "preempting"  #: next to start; preempted jobs are stopping to make room
    PRIORITY = "behind_priority"  #: a higher-priority job is next to start in the pool
    QUOTA = "quota_exceeded"  #: its project's quota in the pool would be exceeded
    NO_NODE = "no_node"  #: no node of its pool could hold it (nodes went away since submit)
    DISK_LOW = "disk_low"  #: the server's disk is below its free-space floor: nothing starts


#: codes of a pool's head: the job that holds the reservation
HEAD_CODES = frozenset({WaitCode.NO_CAPACITY, WaitCode.GANG, WaitCode.PREEMPTING})


class Start(NamedTuple):
    """Start this job now, its tasks on these slots."""

    job_id: str
    slots: tuple[inputs.TaskSlot, ...]
    borrowed: bool
    backfill: bool = False  #: started in a gap while an earlier job of its pool waits


class Preempt(NamedTuple):
    """Stop a running job (it goes back to the queue) to make room for a waiting one."""

    job_id: str  #: the victim
    for_job: str  #: the job that needs its room
    reclaim: bool  #: taking back borrowed capacity (else: for a higher priority)


class Wait(NamedTuple):
    """A job that does not start on this pass, and why, in words its project may read."""

    job_id: str
    code: WaitCode
    message: str
    pool: str
    ahead: int  #: waiting jobs before it in its pool's order


#: builds a Wait without NamedTuple's Python-level __new__ (a long queue makes thousands)
new_wait = functools.partial(tuple.__new__, Wait)


@dataclasses.dataclass
class Decisions:
    starts: list[Start] = dataclasses.field(default_factory=list)
    preempts: list[Preempt] = dataclasses.field(default_factory=list)
    waits: list[Wait] = dataclasses.field(default_factory=list)
