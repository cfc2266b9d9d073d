"""Bringing every task that may have a process up to date with what the executor says.

A task is `launching` until its handle is recorded, then `running` until it is seen
ending: exited (with its code), lost (its process gone and its exit code unknowable), or
lost with its node. A launch that never ran (its claim says so, after a restart) is given
a new launch id and started again, if its job still wants it.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.domain import jobs
from corral.executors import base
from corral.scheduler import launches, launching, passes
from corral.store import job_repo, rows

#: how a task's message starts when the kernel killed it for its memory (settle reads it)
OUT_OF_MEMORY = "out of memory"


def observe(conn: sa.Connection, p: passes.Pass, watched: launches.Launches) -> None:
    copying = watched.copying()
    for t in job_repo.live_tasks(conn):
        status = watched.status_of(t, copying)
        if status is None:
            continue
        if t.job_phase == jobs.Phase.PENDING.value:
            if not _handed_out_ahead(conn, p, t, status):
                continue
        elif status.state is base.State.NOT_STARTED:
            if _renew_launch(conn, t, p.now):
                p.relaunch.add((t.job_id, t.attempt))
            continue
        if status.state is not base.State.RUNNING or t.state != jobs.TaskState.RUNNING.value:
            _record(conn, p, t, status)
            if status.handle and status.state is not base.State.RUNNING:
                p.ended.append((t, status))


def _renew_launch(conn: sa.Connection, t: rows.LiveTask, now: int) -> bool:
    """A launch that never ran: give it a new launch id if its job still wants it."""
    if t.job_phase != jobs.Phase.RUNNING.value:
        passes.never_started(conn, [t], now)
        return False
    return job_repo.update_live_task(conn, t, launch_id=launching.new_launch_id())


def _handed_out_ahead(conn: sa.Connection, p: passes.Pass, t: rows.LiveTask,
                      status: base.Status) -> bool:
    """A live task of a job that waits: corral 0.1 could hand a queued job's launch to the
    launcher ahead, to start when a running task ended, and a server of that version that
    stopped while one was held leaves it behind. One that never ran goes, and the job
    waits as before (False); one that ran means the job started then (True)."""
    if status.state is base.State.NOT_STARTED:
        job_repo.delete_tasks(conn, t.job_id, t.attempt)
        return False
    fields = {"start_time": p.now, "wait_reason": None, "wait_code": None}
    if job_repo.transition(conn, t.job_id, jobs.Phase.RUNNING, jobs.SecondaryPhase.RUNNING,
                           now=p.now, message=f"Job started: 1 task(s) on {t.node}",
                           fields=fields, events=p.events):
        job_repo.open_attempt(conn, t.job_id, t.attempt, p.now,
                              jobs.StartType.INIT_OR_RESCHEDULED)
    return True


def _record(conn: sa.Connection, p: passes.Pass, t: rows.LiveTask, status: base.Status) -> None:
    handle = status.handle.dumps() if status.handle else t.handle
    state = status.state
    if state is base.State.RUNNING:
        job_repo.update_live_task(conn, t, state=jobs.TaskState.RUNNING.value,
                                  handle=handle, launched_at=p.now)
        return
    if state is base.State.EXITED:
        code = status.exit_code if status.exit_code is not None else -1
        oom = f"{OUT_OF_MEMORY}: {status.message}" if status.out_of_memory else ""
        job_repo.update_live_task(conn, t, state=jobs.TaskState.EXITED.value,
                                  exit_code=code, handle=handle, ended_at=p.now,
                                  **({"message": oom} if oom else {}))
        p.events.add(t.job_id, p.now, f"Task {t.name} exited with code {code}"
                     + (f" ({oom})" if oom else ""),
                     level="Info" if code == 0 else "Warning", source="Task")
        if status.log_dropped:
            p.events.add(t.job_id, p.now, f"log of {t.name} capped: "
                         f"{status.log_dropped / 2**20:.1f} MB dropped", level="Warning",
                         source="Task")
    elif state is base.State.NODE_LOST:
        job_repo.update_live_task(conn, t, state=jobs.TaskState.NODE_LOST.value,
                                  message=status.message, handle=handle, ended_at=p.now)
        p.events.add(t.job_id, p.now, f"Task {t.name} lost with its node {t.node}: "
                     f"{status.message}", level="Warning", source="Task")
    else:
        job_repo.update_live_task(conn, t, state=jobs.TaskState.LOST.value,
                                  message=status.message, handle=handle, ended_at=p.now)
        p.events.add(t.job_id, p.now, f"Task {t.name} lost: {status.message}",
                     level="Error", source="Task")
