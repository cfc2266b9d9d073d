"""What follows a failed attempt: the policy of domain/faults.py, carried out.

The failure is classified (the task that failed by itself, its exit code, the tail of its
log against the job's rules), the decision taken from the job's earlier running records,
and then, in the same transaction:

- a restart in place closes the running record at once, and either opens the next one
  now or records on the job when it may start (`restart_at`, its backoff) and why
  (`wait_reason`); a later pass opens it once that time has come. Meanwhile the job keeps
  its slots, as between any failed attempt and its restart, so that nothing can take
  them from under it;
- a requeue puts it back in the queue, kept off the node it failed on when the rule
  says to retry elsewhere;
- a failure ends it, with its class and why nothing follows.

Each of these is one guarded write with its event: a server killed at any point finds the
job before the decision (and takes it again, the same) or after it.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from collections.abc import Callable, Iterable, Sequence

import sqlalchemy as sa

from corral.domain import faults, jobs
from corral.scheduler import endings, observe, passes
from corral.storage import runs
from corral.store import job_repo, rows

log = logging.getLogger(__name__)

#: stop causes (the `stop_cause` column): why corral is stopping a job's tasks
HANG = "hang"
TIMEOUT = "timeout"
#: the job's reason and running record's end once a hang without hang-retry ended it
HANGED = "hanged"


class Policies:
    """Each active job's fault-tolerance policy, read from its spec once (a job's spec
    never changes; a pass settles every active job, and parsing each spec every time
    would cost more than the pass)."""

    def __init__(self, hang_timeout: int = faults.DEFAULT_HANG_TIMEOUT) -> None:
        self.hang_timeout = hang_timeout  #: the server's, for jobs that set none
        self._known: dict[str, faults.Policy] = {}

    def of(self, job: rows.Job) -> faults.Policy:
        policy = self._known.get(job.id)
        if policy is None:
            try:
                spec = job_repo.job_spec(job)
            except ValueError as exc:  # stored by a version that let it through
                log.warning("job %s: its spec no longer reads (%s); its retry count alone "
                            "applies", job.id, exc)
                policy = faults.Policy(retry_limit=job.retry_limit,
                                       hang_timeout=self.hang_timeout)
            else:
                policy = faults.Policy.of(spec.metadata.annotations,
                                          spec.spec.fault_tolerance, self.hang_timeout,
                                          spec.spec.max_run_time,
                                          spec.spec.run_limit_name)
            self._known[job.id] = policy
        return policy

    def keep(self, job_ids: Iterable[str]) -> None:
        """Forget the jobs not among `job_ids` (they no longer hold resources)."""
        keep = set(job_ids)
        for job_id in [j for j in self._known if j not in keep]:
            del self._known[job_id]


def attempt_failed(conn: sa.Connection, p: passes.Pass, job: rows.Job,
                   tasks: Sequence[rows.Task], failed: Sequence[rows.Task],
                   policy: faults.Policy, runs_dir: pathlib.Path,
                   nodes: Callable[[], frozenset[str]]) -> bool:
    """Act on an attempt whose tasks have all ended, some failed; True if the job still
    holds resources. `nodes`: the executors' nodes now (a launch that failed on a node
    that has left is the node's fault)."""
    # The cause is a task that failed by itself, not one corral stopped because of it.
    first = min(failed, key=lambda t: (t.kill_sent_at is not None, t.ended_at or 0, t.rank))
    message = first.message or ""
    oom = first.state == jobs.TaskState.EXITED.value and message.startswith(
        observe.OUT_OF_MEMORY)
    failure = faults.classify(
        policy, task=first.name, node=first.node, state=jobs.TaskState(first.state),
        exit_code=first.exit_code, message=message, out_of_memory=oom,
        log_tail=_log_tail(runs_dir, first) if first.exit_code is not None else "",
        node_gone=(first.state == jobs.TaskState.FAILED_TO_START.value
                   and first.node not in nodes()))
    return follow(conn, p, job, tasks, failure, policy)


def after_stop(conn: sa.Connection, p: passes.Pass, job: rows.Job, tasks: Sequence[rows.Task],
               policy: faults.Policy) -> bool:
    """Act on an attempt corral stopped (its tasks have all ended) because the job hung or
    ran past its max_run_time."""
    failure = (_timed_out(policy) if job.stop_cause == TIMEOUT
               else faults.Failure(jobs.FailureClass.HANG, "", HANGED))
    return follow(conn, p, job, tasks, failure, policy)


def follow(conn: sa.Connection, p: passes.Pass, job: rows.Job, tasks: Sequence[rows.Task],
           failure: faults.Failure, policy: faults.Policy) -> bool:
    """Restart, requeue or fail the job after `failure`; True if it still holds resources."""
    history = [faults.Past(a.failure_class, a.end_recover)
               for a in job_repo.attempts_of(conn, job.id) if a.end_at is not None]
    d = faults.decide(failure, policy, history)
    cause = f"{failure.task} {failure.reason}" if failure.task else failure.reason
    if d.verdict is faults.Verdict.RESTART:
        _restart_later(conn, p, job, tasks, failure, d, cause)
        return True
    if d.verdict is faults.Verdict.REQUEUE:
        return not endings.requeue(conn, p, job, end_reason=failure.reason,
                                   related_task=failure.task or None, klass=failure.klass,
                                   exclude=d.exclude)
    phase, secondary = {
        jobs.FailureClass.LOST: (jobs.Phase.ABNORMAL, jobs.SecondaryPhase.LOST),
        jobs.FailureClass.LAUNCH_ERROR: (jobs.Phase.FAILED, jobs.SecondaryPhase.CREATE_FAILED),
    }.get(failure.klass, (jobs.Phase.FAILED, jobs.SecondaryPhase.FAILED))
    return not endings.finish(
        conn, p, job, tasks, phase, secondary, end_reason=failure.reason,
        related=failure.task or None, level="Error",
        message=f"Job failed: {cause} ({failure.klass.value}; {d.why})",
        failure=(failure.klass, f"{failure.task}: {failure.reason}" if failure.task
                 else failure.reason))


def _restart_later(conn: sa.Connection, p: passes.Pass, job: rows.Job,
                   tasks: Sequence[rows.Task], failure: faults.Failure, d: faults.Decision,
                   cause: str) -> None:
    """Close the running record for a restart in place, and restart now or record when."""
    current = job_repo.job_by_id(conn, job.id, lock=True)
    if current is None or current.phase != jobs.Phase.RUNNING.value:
        return  # stopped meanwhile: a stopped job is never restarted
    old = tasks[0].attempt
    job_repo.close_attempt(conn, job.id, old, now=p.now, end_reason=failure.reason,
                           related_task=failure.task or None,
                           end_recover=jobs.EndRecover.PROC_RESTART,
                           failure_class=failure.klass)
    p.exports.append((job, old))
    why = f"after {cause if failure.task else 'it ' + cause} ({d.retry_text()})"
    if d.delay_ms == 0:
        p.events.add(job.id, p.now, f"Restarting {why}", level="Warning")
        restart(conn, p, job, tasks)
        return
    job_repo.set_restart(conn, job.id, p.now, at=p.now + d.delay_ms, reason=why)
    p.events.add(job.id, p.now, f"Restarting in {faults.duration(d.delay_ms / 1000)} {why}",
                 level="Warning")


def restart_when_due(conn: sa.Connection, p: passes.Pass, job: rows.Job,
                     tasks: Sequence[rows.Task], policy: faults.Policy) -> bool:
    """A job waiting out its backoff: restarted once its time has come (or failed, should
    its run time end first). True if it still holds resources."""
    assert job.restart_at is not None
    if faults.past_run_time(policy, job.start_time, p.now):
        return follow(conn, p, job, tasks, _timed_out(policy), policy)
    if p.now >= job.restart_at:
        restart(conn, p, job, tasks)
    return True


def restart(conn: sa.Connection, p: passes.Pass, job: rows.Job,
            tasks: Sequence[rows.Task]) -> None:
    """A new attempt on the same slots, launched once the pass has committed."""
    old = tasks[0].attempt
    if not job_repo.set_restart(conn, job.id, p.now, at=None, reason=None):
        return  # no longer running
    job_repo.open_attempt(conn, job.id, old + 1, p.now, jobs.StartType.RESTARTED)
    new = [passes.task_row(job.id, old + 1, t.rank, t.name, t.node, t.gpu_ids, t.accel_ids)
           for t in tasks]
    job_repo.insert_tasks(conn, new)
    p.launches.append((dataclasses.replace(job, restart_at=None, stop_cause=None),
                       old + 1, new))


def _timed_out(policy: faults.Policy) -> faults.Failure:
    return faults.Failure(jobs.FailureClass.TIMEOUT, "", f"timeout: ran past its "
                          f"{policy.limit_name} of {faults.duration(policy.max_run_time or 0)}")


def _log_tail(runs_dir: pathlib.Path, t: rows.Task) -> str:
    """The end of a failed task's log, for the rules (read without following a link)."""
    path = runs.RunPaths(runs_dir, t.job_id).log_path(t.attempt, t.name)
    try:
        data, _size = runs.tail(path, faults.LOG_TAIL_BYTES)
    except OSError as exc:
        log.warning("cannot read the log of %s/%s: %s", t.job_id, t.name, exc)
        return ""
    return data.decode("utf-8", "replace")
