"""Starting a run: its job built with every reference resolved, then submitted, or an
earlier identical run's outputs reused instead (caching).

`prepare` does what may take time (building the job, hashing code and inputs for the
cache, looking the cache up) outside any transaction; `carry_out` then writes the run's
new state in the controller's transaction, together with the job it submits, so that a
server killed at any moment never submits a run's job twice and never forgets one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import sqlalchemy as sa

from corral.domain import errors, specs
from corral.domain.pipelines import build, plan, shape, status
from corral.kinds import owned
from corral.kinds.pipelines import caching, common
from corral.store import kind_rows, pipeline_repo

TaskState = status.TaskState


@dataclasses.dataclass(frozen=True)
class Start:
    """What starting one run comes to."""

    run: kind_rows.PipelineRun
    body: specs.JobCreate | None = None
    resolved: build.Resolved | None = None
    #: why it fails before any job is submitted
    refusal: str | None = None
    cache_key: str | None = None
    #: the earlier run whose outputs it reuses
    cached: kind_rows.PipelineRun | None = None
    #: why the cache was not looked up
    note: str | None = None


def prepare(platform: common.Platform, p: kind_rows.Pipeline, checked: shape.Shape,
            attempt: kind_rows.PipelineAttempt, runs: Mapping[str, kind_rows.PipelineRun],
            views: Mapping[str, plan.Run], run: kind_rows.PipelineRun, now: int) -> Start:
    def output_of(key: str, channel: str) -> str:
        outputs = pipeline_repo.loads(runs[key].outputs) or {}
        if channel not in outputs:
            raise build.MissingValue(f"{key} has no output channel '{channel}'")
        return str(outputs[channel])

    try:
        body, resolved = build.job_body(
            checked, run.task, run.item, attempt=attempt.number, base=p.output_base,
            name=p.name, params=json.loads(attempt.parameters),
            overrides=json.loads(attempt.overrides), output_of=output_of,
            metric_of=lambda key, name: plan.metric(views[key], name))
    except errors.CorralError as exc:
        return Start(run=run, refusal=exc.message)
    cache = checked.tasks[run.task].task.cache
    if cache is None:
        return Start(run=run, body=body, resolved=resolved)
    try:
        key = caching.key_of(body)
    except caching.Uncacheable as exc:
        return Start(run=run, body=body, resolved=resolved, note=f"cache not used: {exc}")
    with platform.store.read() as conn:
        hit = pipeline_repo.cached_run(conn, p.project_id, key, now - cache.max_age * 1000)
    return Start(run=run, body=body, resolved=resolved, cache_key=key, cached=hit)


def carry_out(conn: sa.Connection, platform: common.Platform, p: kind_rows.Pipeline,
              start: Start, now: int) -> TaskState:
    """Write what `start` comes to, in the caller's transaction; the run's new state."""
    run = start.run
    if start.refusal is not None or start.body is None or start.resolved is None:
        _move(conn, run, TaskState.FAILED, now, f"{run.key} could not start: "
              f"{start.refusal}", "Error",
              {"ended_at": now, "metrics": "{}", "message": start.refusal})
        return TaskState.FAILED
    given = {"parameters": common.dumps(start.resolved.parameters),
             "inputs": common.dumps(start.resolved.inputs), "cache_key": start.cache_key,
             "submitted_at": now}
    if start.cached is not None:
        hit = start.cached
        _move(conn, run, TaskState.CACHED, now,
              f"{run.key} cached: reuses the outputs of an identical run that succeeded "
              f"({_describe(hit)})", "Info",
              {**given, "origin": "cached", "job_id": hit.job_id, "source": common.source(hit),
               "outputs": hit.outputs, "metrics": hit.metrics, "ended_at": now})
        return TaskState.CACHED
    job = owned.try_submit(conn, platform.services, common.owner(p),
                           common.role(run.attempt, run.task, run.item), start.body, now)
    if isinstance(job, errors.CorralError):
        _move(conn, run, TaskState.FAILED, now, f"{run.key} could not start: {job.message}",
              "Error", {**given, "ended_at": now, "metrics": "{}", "message": job.message})
        return TaskState.FAILED
    note = f" ({start.note})" if start.note else ""
    _move(conn, run, TaskState.RUNNING, now, f"{run.key} submitted as job {job.id}{note}",
          "Info", {**given, "job_id": job.id,
                   "outputs": common.dumps(start.resolved.outputs)})
    return TaskState.RUNNING


def _move(conn: sa.Connection, run: kind_rows.PipelineRun, to: TaskState, now: int, message: str,
          level: str, values: dict[str, object]) -> None:
    if not pipeline_repo.move_run(conn, run, to=to, now=now, message=message, level=level,
                                  values=values):
        # Only the controller moves a waiting run, one pass at a time: this is a bug, and
        # the pass's transaction (with the job it may have submitted) must not commit.
        raise RuntimeError(f"run {run.key} of pipeline {run.pipeline_id} is no longer waiting")


def _describe(hit: kind_rows.PipelineRun) -> str:
    return f"pipeline {hit.pipeline_id}, attempt {hit.attempt}, {hit.key}"
