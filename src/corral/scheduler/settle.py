"""Settling a job that holds resources: what its tasks add up to, and what follows.

A job being stopped ends Terminated once its processes are gone; a victim of preemption
goes back to the queue at its old place; a job corral is stopping (it hung, or ran past
its max_run_time) has its tasks stopped, then follows its fault-tolerance policy; a task
that failed stops the rest of its gang, and once they have all ended the policy says what
follows (recovery.py: restart in place after a backoff, requeue, fail); a job waiting out
its backoff restarts when its time has come; when every task exited with 0 the job is
Completed. A running job is watched for hangs and its run time (watchdog.py).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from corral.domain import jobs
from corral.executors import base
from corral.scheduler import endings, passes, recovery, watchdog
from corral.store import rows

#: the end_reason of a running record closed by preemption
PREEMPTED = "preempted"


@dataclasses.dataclass(frozen=True)
class Context:
    """What settling needs besides the job: built by the reconciler for each pass."""

    executor: base.Executor
    grace_ms: int
    runs_dir: pathlib.Path
    #: the executors' nodes now (asked only when a launch has failed: was it the node's?)
    nodes: Callable[[], frozenset[str]]
    policies: recovery.Policies
    watchdog: watchdog.Watchdog


def settle(conn: sa.Connection, p: passes.Pass, job: rows.Job, tasks: Sequence[rows.Task],
           ctx: Context) -> bool:
    """Act on what an active job's tasks add up to; True if it still holds resources."""
    live = [t for t in tasks if t.state in passes.LIVE]
    if job.phase == jobs.Phase.TERMINATING.value:
        if live:
            endings.signal(conn, p, live, ctx.executor, ctx.grace_ms)
            return True
        return not endings.finish(conn, p, job, tasks, jobs.Phase.TERMINATED,
                                  jobs.SecondaryPhase.TERMINATED,
                                  end_reason="terminated by user", message="Job terminated",
                                  failure=(jobs.FailureClass.STOPPED, "stopped on request"))
    failed = [t for t in tasks if _failed(t)]
    signalled = any(t.kill_sent_at is not None for t in tasks)
    # A victim that was signalled is requeued however it exited (a clean exit on SIGTERM
    # is a checkpoint, not the end); one that finished before the signal completed.
    if job.preempt_requested_at is not None and (live or failed or signalled):
        if live:
            endings.signal(conn, p, live, ctx.executor, ctx.grace_ms)
            return True
        return not endings.requeue(conn, p, job, end_reason=PREEMPTED, related_task=None,
                                   klass=jobs.FailureClass.PREEMPTED)
    policy = ctx.policies.of(job)
    # A job corral is stopping ends as the stop says once its tasks are gone, however they
    # exited (a clean exit on SIGTERM is not the job done), and also when a task failed
    # unsignalled (a server killed between a signal and its record sent it): only tasks
    # that all completed before any signal make it Completed.
    if job.stop_cause is not None and (live or failed or signalled):
        if live:
            endings.signal(conn, p, live, ctx.executor, ctx.grace_ms)
            return True
        return recovery.after_stop(conn, p, job, tasks, policy)
    if live:
        if failed:  # one task of the gang failed: the others stop before any restart
            endings.signal(conn, p, live, ctx.executor, ctx.grace_ms)
        else:
            ctx.watchdog.check(conn, p, job, tasks, policy)
        return True
    if job.restart_at is not None:
        return recovery.restart_when_due(conn, p, job, tasks, policy)
    lost = [t for t in failed if t.state == jobs.TaskState.NODE_LOST.value]
    if lost or failed:  # a node lost is not the job's fault: it spends none of its retries
        return recovery.attempt_failed(conn, p, job, tasks, lost or failed, policy,
                                       ctx.runs_dir, ctx.nodes)
    return not endings.finish(conn, p, job, tasks, jobs.Phase.COMPLETED,
                              jobs.SecondaryPhase.COMPLETED, end_reason="job completed",
                              message="Job completed")


def _failed(t: rows.Task) -> bool:
    if t.state == jobs.TaskState.EXITED.value:
        return t.exit_code != 0
    return t.state in (jobs.TaskState.LOST.value, jobs.TaskState.NODE_LOST.value,
                       jobs.TaskState.FAILED_TO_START.value)
