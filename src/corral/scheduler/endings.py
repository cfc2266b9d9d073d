"""How an attempt of a job ends: its tasks stopped, then the job finished, or put back in
the queue, with its running record closed saying why and what followed.

Shared by settle.py (a job's tasks ended), recovery.py (what follows a failure) and
admission.py (a victim of preemption is signalled).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from corral.domain import jobs
from corral.executors import base
from corral.scheduler import passes
from corral.store import job_repo, rows

#: what a job's fault-tolerance state is once it has ended, restarted or been requeued
CLEARED: dict[str, Any] = {"restart_at": None, "stop_cause": None}


def signal(conn: sa.Connection, p: passes.Pass, live: Sequence[rows.Task],
           executor: base.Executor, grace_ms: int) -> None:
    """SIGTERM each live task once, SIGKILL when the grace period has passed. A task with
    no handle yet is left to the next pass, once observing has settled its launch."""
    for t in live:
        if not t.handle:
            continue
        handle = base.Handle.loads(t.handle)
        if t.kill_sent_at is None:
            executor.cancel(handle, force=False)
            job_repo.update_task(conn, t, kill_sent_at=p.now)
        elif p.now - t.kill_sent_at >= grace_ms:
            executor.cancel(handle, force=True)


def requeue(conn: sa.Connection, p: passes.Pass, job: rows.Job, *, end_reason: str,
            related_task: str | None, klass: jobs.FailureClass,
            exclude: str | None = None) -> bool:
    """Put a job whose processes have all stopped back in the queue, at its old place.

    Its running record closes with `end_reason` and `end_recover: job_reschedule` (with
    `_with_taint` when the node it failed on, `exclude`, is kept out of its next
    placements); the next one starts as `init_or_rescheduled`. False if the job had moved
    on meanwhile.
    """
    attempt = job_repo.latest_attempt(conn, job.id)
    fields: dict[str, Any] = {"preempt_requested_at": None, "borrowed": False,
                              "wait_reason": None, "wait_code": None, "master_port": None,
                              **CLEARED}
    if exclude is not None:
        fields["excluded_nodes"] = json.dumps(sorted({*excluded(job), exclude}))
    why = f"{end_reason}; kept off node {exclude}" if exclude else end_reason
    if not job_repo.transition(conn, job.id, jobs.Phase.PENDING, jobs.SecondaryPhase.QUEUING,
                               now=p.now, message=f"Job requeued: {why}",
                               level="Warning", events=p.events, fields=fields):
        return False
    if attempt:
        job_repo.close_attempt(conn, job.id, attempt, now=p.now, end_reason=end_reason,
                               related_task=related_task, failure_class=klass,
                               end_recover=(jobs.EndRecover.JOB_RESCHEDULE_WITH_TAINT if exclude
                                            else jobs.EndRecover.JOB_RESCHEDULE))
        p.exports.append((job, attempt))
    return True


def finish(conn: sa.Connection, p: passes.Pass, job: rows.Job, tasks: Sequence[rows.Task],
           phase: jobs.Phase, secondary: jobs.SecondaryPhase, *, end_reason: str,
           message: str, related: str | None = None, level: str = "Info",
           failure: tuple[jobs.FailureClass, str] | None = None) -> bool:
    """Move the job to its end phase and close its running record; False if it had
    already moved on (a terminate racing the end, say)."""
    fields: dict[str, Any] = {"end_time": p.now, "wait_reason": None, "wait_code": None,
                              "preempt_requested_at": None, **CLEARED}
    if failure:
        fields.update(failure_class=failure[0].value, failure_message=failure[1])
    # The tasks are those of the latest attempt (an attempt opens with its tasks).
    attempt = tasks[0].attempt if tasks else job_repo.latest_attempt(conn, job.id)
    if not job_repo.transition(conn, job.id, phase, secondary, now=p.now, message=message,
                               level=level, fields=fields, events=p.events):
        return False
    if attempt and job.restart_at is not None:
        # It ended while waiting out a backoff: its record closed then, announcing a
        # restart that now never comes.
        job_repo.withdraw_restart(conn, job.id, attempt)
    elif attempt:
        job_repo.close_attempt(conn, job.id, attempt, now=p.now, end_reason=end_reason,
                               related_task=related,
                               failure_class=failure[0] if failure else None)
        p.exports.append((job, attempt))
    return True


def excluded(job: rows.Job | rows.QueuedJob) -> list[str]:
    """The nodes a job is kept off."""
    return list(json.loads(job.excluded_nodes)) if job.excluded_nodes else []
