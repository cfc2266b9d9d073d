"""Running jobs that have hung, or run past their max_run_time, are to be stopped.

A job has hung when none of its tasks has written to its log nor used CPU or GPU (its
resource samples, scheduler/sampling.py) for its hang timeout; the log's last write is its
modification time, the samples are in the database: both outlive a server, so a new one
judges a job as the old one would have. Only a job seen idle in a sample is ever judged
hung: where the executor gives no samples, nothing is.

Deciding to stop a job is recorded first (`stop_cause`, with the reason shown on the job);
its tasks are signalled from the next pass on, like any other stop (settle.py), and what
follows once they have ended is recovery.py's. So a server killed in between finds the
decision, never a task signalled for no recorded reason (which would read as its failure).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from corral.domain import faults, jobs
from corral.scheduler import passes, recovery
from corral.storage import runs
from corral.store import job_repo, rows

#: ms before a job whose tasks have not yet been sampled idle is looked at again
RECHECK_MS = 1000


class Watchdog:
    def __init__(self, runs_dir: pathlib.Path) -> None:
        self.runs_dir = runs_dir
        #: per job, the earliest time it could be found hung (ms): nothing is read before
        #: then, so that a long-running job costs nothing on most passes
        self._next: dict[str, int] = {}

    def check(self, conn: sa.Connection, p: passes.Pass, job: rows.Job,
              tasks: Sequence[rows.Task], policy: faults.Policy) -> None:
        """Mark a running job to be stopped if it ran past its max_run_time or hung."""
        if job.stop_cause is not None:
            return
        if faults.past_run_time(policy, job.start_time, p.now):
            assert policy.max_run_time is not None
            self._stop(conn, p, job, recovery.TIMEOUT, f"ran past its {policy.limit_name} "
                       f"of {faults.duration(policy.max_run_time)}")
            return
        if policy.hang_timeout <= 0 or p.now < self._next.get(job.id, 0):
            return
        silent = self._silence(conn, p.now, job, tasks, policy.hang_timeout)
        if silent is not None:
            self._stop(conn, p, job, recovery.HANG, f"hung: {silent}")

    def keep(self, job_ids: Iterable[str]) -> None:
        """Forget the jobs not among `job_ids` (they no longer run)."""
        keep = set(job_ids)
        for job_id in [j for j in self._next if j not in keep]:
            del self._next[job_id]

    def _silence(self, conn: sa.Connection, now: int, job: rows.Job,
                 tasks: Sequence[rows.Task], timeout_s: int) -> str | None:
        timeout = timeout_s * 1000
        if not tasks or any(t.state != jobs.TaskState.RUNNING.value or t.launched_at is None
                            for t in tasks):
            return None
        paths = runs.RunPaths(self.runs_dir, job.id)
        logs = {t.name: _written_at(paths.log_path(t.attempt, t.name)) for t in tasks}
        log_ready = max(max(t.launched_at or 0, logs[t.name] or 0) for t in tasks) + timeout
        if now < log_ready:
            self._next[job.id] = log_ready
            return None
        use = job_repo.last_use(conn, job.id, tasks[0].attempt, cpu=faults.IDLE_CPU_PERCENT,
                                gpu=faults.IDLE_GPU_PERCENT)
        seen = [faults.Activity(t.name, t.launched_at or 0, logs[t.name],
                                *use.get(t.name, (None, None))) for t in tasks]
        silent = faults.silence(now, timeout_s, seen)
        if silent is None:
            use_ready = max(max(a.since, a.busy_at or 0) for a in seen) + timeout
            self._next[job.id] = max(use_ready, now + RECHECK_MS)
        return silent

    def _stop(self, conn: sa.Connection, p: passes.Pass, job: rows.Job, cause: str,
              why: str) -> None:
        if job_repo.request_stop(conn, job.id, p.now, cause=cause, reason=f"{why}; stopping it"):
            p.events.add(job.id, p.now, f"Job {why}: stopping it", level="Warning")


def _written_at(path: pathlib.Path) -> int | None:
    """When a task's log last grew (ms), or None without one (read without following a
    link a job could have put there)."""
    try:
        with runs.open_run_file(path) as fh:
            return os.fstat(fh.fileno()).st_mtime_ns // 1_000_000
    except OSError:
        return None
