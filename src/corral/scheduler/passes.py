"""What one reconciler pass decided, and the small helpers its steps share.

A pass decides inside a transaction and acts once it has committed: a process is started
only when the intent to start it is durable, and a job's files go only after its rows.
`Pass` carries those decisions from the steps that make them to the reconciler, which
carries them out (see reconciler.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sqlalchemy as sa

from corral.domain import jobs, resources, scheduling
from corral.executors import base
from corral.scheduler import launching
from corral.store import job_repo, rows

#: task states in which a task may have a process
LIVE = (jobs.TaskState.LAUNCHING, jobs.TaskState.RUNNING)
#: why a task whose job was stopped before it could start never ran
STOPPED_FIRST = "never started: the job was stopped first"


@dataclasses.dataclass
class Pass:
    now: int  #: milliseconds since the epoch, the pass's one clock reading
    #: the pass's events, written together before its transaction commits
    events: job_repo.Events = dataclasses.field(default_factory=job_repo.Events)
    #: attempts to launch once their rows are durable: (job, attempt number, its tasks)
    launches: list[tuple[rows.Job, int, list[rows.Task]]] = dataclasses.field(
        default_factory=list)
    #: attempts whose launch never ran (found after a restart) and that are to run anew
    relaunch: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    #: tasks seen ending, with what the executor said: released once recorded
    ended: list[tuple[rows.LiveTask, base.Status]] = dataclasses.field(default_factory=list)
    #: ended attempts whose logs go to the job's log_export_path
    exports: list[tuple[rows.Job, int]] = dataclasses.field(default_factory=list)
    #: deleted jobs whose rows were purged: their run directories go next
    purged: list[str] = dataclasses.field(default_factory=list)
    #: the jobs its committed transactions changed (told to `on_pass_end`)
    changed: set[str] = dataclasses.field(default_factory=set)


def task_row(job_id: str, attempt: int, rank: int, name: str, node: str, gpu_ids: str,
             accel_ids: str | None = None) -> rows.Task:
    """A new task, launching: recorded before its process is started (see reconciler.py)."""
    return rows.Task(
        job_id=job_id, attempt=attempt, name=name, rank=rank,
        node=node, state=jobs.TaskState.LAUNCHING.value, launch_id=launching.new_launch_id(),
        gpu_ids=gpu_ids, accel_ids=accel_ids, handle=None, exit_code=None, message=None,
        launched_at=None, ended_at=None, kill_sent_at=None)


def never_started(conn: sa.Connection, tasks: Sequence[rows.Task], now: int) -> None:
    """Settle tasks that were never launched because their job was stopped first."""
    for t in tasks:
        job_repo.update_live_task(conn, t, state=jobs.TaskState.FAILED_TO_START.value,
                                  ended_at=now, message=STOPPED_FIRST)


def per_task(job: rows.Job | rows.QueuedJob) -> resources.Resources:
    """What one task of the job is given."""
    return resources.Resources(job.cpu, job.memory_mb, job.gpu,
                               resources.parse_accels(job.accelerators))


def holds(job: rows.Job, tasks: Sequence[rows.Task]) -> scheduling.Running:
    """What an active job holds: its latest attempt's slots. A job keeps its slots (and
    GPUs) also between a failed attempt and its restart."""
    slots = tuple(scheduling.TaskSlot(t.node, gpu_ids(t), resources.parse_device_ids(t.accel_ids))
                  for t in tasks)
    return scheduling.Running(
        job.id, job.project_id, job.pool_id, per_task(job), slots, job.priority, job.seq,
        job.preemptible, job.borrowed, job.start_time or 0,
        stopping=(job.phase == jobs.Phase.TERMINATING.value
                  or job.preempt_requested_at is not None))


def gpu_ids(t: rows.Task) -> tuple[int, ...]:
    return tuple(int(g) for g in t.gpu_ids.split(",") if g)
