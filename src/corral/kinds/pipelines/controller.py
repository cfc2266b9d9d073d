"""The pipelines' controller: one pass over every pipeline with work to do.

A pass reads an attempt as the store holds it (its runs, their jobs, the metrics they
reported), asks `domain.pipelines.plan` what moves it on, and carries that out in one
transaction: runs ended, jobs submitted (with the runs' new states), jobs stopped on a
stop or a timeout, the progress raised. When every run has ended the attempt ends with the
status its runs' states give, after the pipeline's model is registered if it succeeded.

The loop (`kinds/loop.py`) runs a pass when any job changes, so a downstream task is
submitted as soon as the reconciler has recorded its last upstream task's end; and at
least every tick_interval, which is what a timeout relies on. Everything a pass decides is
re-read from the store, so a server killed at any moment goes on where it was.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from corral.domain import jobs
from corral.domain.pipelines import plan, shape, status
from corral.kinds import loop, owned
from corral.kinds.pipelines import cleaning, common, saving, starting
from corral.storage import objects
from corral.store import job_repo, kind_repo, kind_rows, pipeline_repo, rows, version_repo

log = logging.getLogger(__name__)
TaskState = status.TaskState
_STOPPABLE = frozenset(p.value for p in jobs.TERMINABLE)


class Controller:
    kind = common.KIND

    def __init__(self, platform: common.Platform) -> None:
        self.platform = platform

    def reconcile(self, now: int) -> bool:
        with self.platform.store.read() as conn:
            live = pipeline_repo.live(conn)
        more = False
        for p, attempt in live:
            more = loop.isolated(self.platform.store, self.kind, p.id, now,
                                 functools.partial(self.one, p, attempt, now)) or more
        return more

    def one(self, p: kind_rows.Pipeline, attempt: kind_rows.PipelineAttempt, now: int) -> bool:
        """One pass over pipeline `p`'s current attempt; True when another is due at once."""
        if attempt.state != status.Status.RUNNING:
            self._purge(p, now)  # deleted while it ran; now ended
            return False
        checked = common.shape_of(p)
        with self.platform.store.read() as conn:
            runs = {r.key: r for r in pipeline_repo.runs_of(conn, p.id, attempt.number)}
            owned_jobs = {j.id: j for j in job_repo.owned_jobs(conn, common.KIND, p.id).values()}
            metrics = _metrics_read(conn, runs, owned_jobs)
        views = {k: _view(r, owned_jobs, metrics.get(k)) for k, r in runs.items()}
        timed_out = attempt.timed_out_at is not None or _past_timeout(checked, attempt, now)
        stopping = attempt.stop_requested_at is not None or p.deleted_at is not None
        steps = plan.plan(plan.Situation(
            shape=checked, runs=views, params=json.loads(attempt.parameters),
            stopping=stopping, timed_out=timed_out))
        starts = [starting.prepare(self.platform, p, checked, attempt, runs, views,
                                   runs[s.key], now)
                  for s in steps if s.to == TaskState.RUNNING and not stopping]
        states = {k: v.state for k, v in views.items()}
        # Jobs to stop: those not stopping yet (a pass with nothing to do writes nothing).
        # A timeout stops the jobs running when it passes, once: finally tasks run after it.
        stop = stopping and any(
            v.state == TaskState.RUNNING and v.job_phase in _STOPPABLE for v in views.values())
        more = False
        if (steps or metrics or stop or attempt.started_at is None
                or (timed_out and attempt.timed_out_at is None)):
            with self.platform.store.begin() as conn:
                more = self._write(conn, p, attempt, runs, steps, starts, metrics, states, now,
                                   timed_out=timed_out, stop=stop)
            if stop or any(s.to == TaskState.RUNNING for s in steps):
                self.platform.services.wake()
        outcome = status.status(states.values())
        if outcome != status.Status.RUNNING:
            more = self._end(p, attempt, checked, outcome, now) or more
        return more

    def _write(self, conn: sa.Connection, p: kind_rows.Pipeline, attempt: kind_rows.PipelineAttempt,
               runs: Mapping[str, kind_rows.PipelineRun], steps: Sequence[plan.Step],
               starts: Sequence[starting.Start], metrics: Mapping[str, dict[str, float]],
               states: dict[str, TaskState], now: int, *, timed_out: bool,
               stop: bool) -> bool:
        """Carry a pass's decisions out; `states` follows. True when one more is due."""
        number = attempt.number
        if attempt.started_at is None:
            pipeline_repo.set_attempt(conn, p.id, number, started_at=now)
        if timed_out and attempt.timed_out_at is None:
            pipeline_repo.set_attempt(conn, p.id, number, timed_out_at=now)
            asked = owned.stop(conn, common.owner(p), now, "Stopped: its pipeline timed out")
            _event(conn, p, now, f"Attempt {number} ran past its timeout: {asked} task(s) "
                   "being stopped", "Warning")
        elif stop:
            asked = owned.stop(conn, common.owner(p), now, "Stopped with its pipeline")
            if asked:
                _event(conn, p, now, f"Stopping: {asked} task(s) being stopped")
        for key, found in metrics.items():
            pipeline_repo.set_run(conn, runs[key], now, metrics=common.dumps(found))
        for step in steps:
            if step.to != TaskState.RUNNING:
                _end_run(conn, runs[step.key], step, now)
                states[step.key] = step.to
        more = False
        if starts and pipeline_repo.hold_running(conn, p.id, number):
            for start in starts:
                states[start.run.key] = starting.carry_out(conn, self.platform, p, start, now)
                more = more or states[start.run.key] != TaskState.RUNNING
        else:
            more = bool(starts)  # asked to stop meanwhile: the next pass sees it
        pipeline_repo.raise_progress(conn, p.id, number, status.progress(list(states.values())))
        return more

    def _end(self, p: kind_rows.Pipeline, attempt: kind_rows.PipelineAttempt, checked: shape.Shape,
             outcome: status.Status, now: int) -> bool:
        """End the attempt with `outcome`, once the final metrics of its runs that succeeded
        are read (a run is cached, and reused, with them), its model registered first if it
        succeeded."""
        with self.platform.store.read() as conn:
            if _metrics_due(pipeline_repo.runs_of(conn, p.id, attempt.number)):
                return False  # the storage component has not finished with a job yet
        model = checked.body.model if outcome == status.Status.SUCCESS else None
        why: str | None = None
        if model is not None:
            saved = saving.register(self.platform, p, attempt.number, model, now)
            if isinstance(saved, saving.NotYet):
                return False  # its metrics and last upload are not done: next pass
            if isinstance(saved, str):
                outcome, why = status.Status.FAILED, f"model not registered: {saved}"
        with self.platform.store.begin() as conn:
            if why is None and outcome != status.Status.SUCCESS:
                why = _first_trouble(pipeline_repo.runs_of(conn, p.id, attempt.number))
            if model is not None and why is None:
                assert isinstance(saved, tuple)
                pipeline_repo.set_model(conn, p.id, saved[0], saved[1], now)
                _event(conn, p, now, f"Model {saved[0]} version {saved[1]} registered from "
                       f"{model.task}.outputs.{model.channel}")
            level = "Info" if outcome == status.Status.SUCCESS else "Warning"
            pipeline_repo.end_attempt(conn, p.id, attempt.number, to=outcome, now=now,
                                      message=f"Attempt {attempt.number} ended: "
                                              f"{outcome.value}" + (f" ({why})" if why else ""),
                                      level=level, why=why)
        return p.deleted_at is not None  # a deleted one is purged on the next pass

    def _purge(self, p: kind_rows.Pipeline, now: int) -> None:
        """Finish a deletion asked while the pipeline ran: outputs removed, jobs deleted,
        rows gone (removing again after a crash half way is harmless)."""
        checked = common.shape_of(p)
        with self.platform.store.read() as conn:
            if not common.jobs_finished(conn, p.id):
                return  # a job's last files may still come: the next pass
            runs = pipeline_repo.runs_of(conn, p.id)
            todo = cleaning.plan(p, checked, runs, pipeline_repo.borrowers(conn, p.id))
            policy = common.policy(conn, self.platform.settings, p.project_id)
        done = cleaning.remove(policy, todo)
        log.info("pipeline %s (%s) deleted: %s", p.id, p.name, done.summary())
        with self.platform.store.begin() as conn:
            owned.delete(conn, common.owner(p), now)
            pipeline_repo.purge(conn, p.id)
        self.platform.services.wake()


def _metrics_read(conn: sa.Connection, runs: Mapping[str, kind_rows.PipelineRun],
                  owned_jobs: Mapping[str, rows.Job]) -> dict[str, dict[str, float]]:
    """The final metrics of ended runs that have none recorded yet, where they are known:
    once the storage component has finished with their job (or they had none)."""
    found: dict[str, dict[str, float]] = {}
    for key, run in runs.items():
        if run.metrics is not None or TaskState(run.state) not in status.ENDED:
            continue
        job = _job_of(run, owned_jobs)
        if job is None:
            found[key] = {}
        elif job.finalized_at is not None:
            found[key] = version_repo.final_of(conn, job.id)
    return found


def _metrics_due(runs: Sequence[kind_rows.PipelineRun]) -> bool:
    """Whether a run that succeeded by running its job has no final metrics recorded yet
    (`_metrics_read` records them once the job is finished with)."""
    return any(r.state == TaskState.SUCCESS and r.origin == "run" and r.job_id is not None
               and r.metrics is None for r in runs)


def _job_of(run: kind_rows.PipelineRun, owned_jobs: Mapping[str, rows.Job]) -> rows.Job | None:
    """The run's job, if the pipeline owns it (a cached run's is another pipeline's)."""
    return None if run.job_id is None else owned_jobs.get(run.job_id)


def _view(run: kind_rows.PipelineRun, owned_jobs: Mapping[str, rows.Job],
          metrics: dict[str, float] | None) -> plan.Run:
    job = _job_of(run, owned_jobs)
    known = pipeline_repo.loads(run.metrics) if run.metrics is not None else metrics
    remote = any(objects.is_remote(url)
                 for url in (pipeline_repo.loads(run.outputs) or {}).values())
    return plan.Run(key=run.key, task=run.task, item=run.item, state=TaskState(run.state),
                    job_phase=job.phase if job is not None else None,
                    job_message=(job.failure_message or "") if job is not None else "",
                    metrics=known, outputs_ready=not remote or known is not None)


def _end_run(conn: sa.Connection, run: kind_rows.PipelineRun, step: plan.Step, now: int) -> None:
    why = f": {step.message}" if step.message else ""
    level = "Info" if step.to in (TaskState.SUCCESS, TaskState.SKIPPED) else "Warning"
    values: dict[str, object] = {"ended_at": now, "message": step.message or None}
    if run.job_id is None:
        values["metrics"] = "{}"  # it never ran: it reported nothing
    pipeline_repo.move_run(conn, run, to=step.to, now=now,
                           message=f"{run.key} {step.to.value}{why}", level=level,
                           values=values)


def _first_trouble(runs: Sequence[kind_rows.PipelineRun]) -> str | None:
    """What a failed, timed out or stopped attempt says first: its first run to have
    ended that way, and why."""
    for state in (TaskState.FAILED, TaskState.TIMEOUT, TaskState.CANCELED):
        for run in sorted(runs, key=lambda r: r.ended_at or 0):
            if run.state == state:
                return f"{run.key} {state.value}" + (f": {run.message}" if run.message else "")
    return None


def _past_timeout(checked: shape.Shape, attempt: kind_rows.PipelineAttempt, now: int) -> bool:
    timeout = checked.body.timeout
    return (timeout is not None and attempt.started_at is not None
            and now >= attempt.started_at + timeout * 1000)


def _event(conn: sa.Connection, p: kind_rows.Pipeline, now: int, message: str,
           level: str = "Info") -> None:
    kind_repo.add_event(conn, common.KIND, p.id, now, message, level=level)
