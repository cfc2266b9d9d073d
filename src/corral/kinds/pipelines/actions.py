"""What users do to pipelines: create, stop, rerun, clean, delete.

Each writes its intent guarded so that it acts on the pipeline as it is (a stop on a
running attempt, a rerun on an ended one), and leaves the rest to the controller, which
the caller wakes once it has committed. `create`, `stop` and `rerun` run in the caller's
transaction; `make`, `act`, `clean` and `delete` (what the API calls) open their own,
with the caller's right to change the pipeline checked in it before anything is written:
members change their own pipelines, project admins everyone's.
Creating checks every task's template as the job it will become, with the checks a
submitted job gets (flavor, pool, paths under the project's storage roots), and then
writes nothing of those jobs: they are submitted one by one as the graph allows.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, identity
from corral.domain.pipelines import build, dag, shape, status
from corral.kinds import owned
from corral.kinds.pipelines import cleaning, common
from corral.services import runtime
from corral.services import submit as submitting
from corral.storage import paths
from corral.store import db, kind_repo, kind_rows, pipeline_repo

TaskState = status.TaskState


class Rerun(enum.StrEnum):
    FROM_FAILED = "from_failed"  #: runs that did not succeed run again (the default)
    FROM_TASK = "from_task"  #: a task and everything downstream of it run again
    ALL = "all"  #: every run runs again


def create(conn: sa.Connection, services: runtime.Runtime, *, project_id: str,
           user_name: str, data: Any, now: int) -> kind_rows.Pipeline:
    """A new pipeline from a body (validated; BadParameter otherwise), its first attempt
    waiting for the controller; each task's job is probed as `services` would submit it."""
    settings, stores = services.settings, services.stores
    checked = build.parse(data)
    body = checked.body
    pipeline_id = str(uuid.uuid4())
    if body.output_root:  # a place its tasks' jobs may write, checked as their outputs are
        submitting.check_output(body.output_root, "output_root", project_id=project_id,
                                places=submitting.Places(runs_dir=settings.runs_dir,
                                                         stores=stores),
                                policy=common.policy(conn, settings, project_id))
    root = body.output_root or str(paths.project_home(settings, project_id) / "pipelines")
    base = f"{root.rstrip('/')}/{body.metadata.name}-{pipeline_id[:8]}"
    for _key, task, item in checked.runs():
        if item in (None, 0):
            _probe(conn, services, checked, task, item, base=base, project_id=project_id,
                   user_name=user_name, pipeline_id=pipeline_id, now=now)
    pipeline_repo.insert(conn, {
        "id": pipeline_id, "project_id": project_id, "name": body.metadata.name,
        "description": body.metadata.description, "user_name": user_name,
        "spec": body.model_dump_json(by_alias=True, exclude_none=True), "output_base": base,
        "attempt": 1, "created_at": now, "updated_at": now})
    p = pipeline_repo.get(conn, project_id, pipeline_id)
    pipeline_repo.first_attempt(conn, pipeline_id, {
        "mode": "initial", "parameters": common.dumps(body.parameters), "overrides": "{}",
        "progress": 0}, now)
    runs = checked.runs()
    pipeline_repo.insert_runs(conn, [common.new_run(p, 1, key, task, item, now)
                                     for key, task, item in runs])
    kind_repo.add_event(conn, common.KIND, pipeline_id, now,
                        f"Pipeline created: {len(checked.order)} task(s), {len(runs)} run(s)")
    return p


def _probe(conn: sa.Connection, services: runtime.Runtime, checked: shape.Shape, task: str,
           item: int | None, *, base: str, project_id: str, user_name: str,
           pipeline_id: str, now: int) -> None:
    """Submit the task's job as it would be, and take it back: the same checks, nothing
    kept."""
    body = build.probe(checked, task, item, base=base)
    owner = owned.Owner(kind=common.KIND, id=pipeline_id, project_id=project_id,
                        user_name=user_name, name=checked.body.metadata.name)
    try:
        owned.probe(conn, services, owner, task, body, now)
    except errors.CorralError as exc:
        raise type(exc)(f"task '{task}': {exc.message}") from None


def stop(conn: sa.Connection, project_id: str, pipeline_id: str, now: int) -> kind_rows.Pipeline:
    p = pipeline_repo.get(conn, project_id, pipeline_id)
    if not pipeline_repo.request_stop(conn, p.id, p.attempt, now):
        raise errors.InvalidState(f"pipeline '{p.name}' has ended (or is stopping already)")
    kind_repo.add_event(conn, common.KIND, p.id, now, "Stop requested")
    return p


def rerun(conn: sa.Connection, project_id: str, pipeline_id: str, *, mode: Rerun,
          from_task: str | None, parameters: Mapping[str, str], now: int) -> kind_rows.Pipeline:
    """A new attempt of an ended pipeline: the runs `mode` picks run again, the others
    keep what they made (`-p NAME=VALUE` sets a pipeline parameter, `TASK.NAME=VALUE` a
    task's own)."""
    p = pipeline_repo.get(conn, project_id, pipeline_id)
    checked = common.shape_of(p)
    last = pipeline_repo.attempt(conn, p.id, p.attempt)
    if last.state == status.Status.RUNNING:
        raise errors.InvalidState(f"pipeline '{p.name}' is running: stop it, or let it end")
    params, overrides = _overrides(checked, json.loads(last.parameters), parameters)
    if (mode == Rerun.FROM_TASK) != (from_task is not None):
        raise errors.BadParameter("give a task (and only then) to rerun from_task")
    if from_task is not None and from_task not in checked.tasks:
        raise errors.BadParameter(f"'{from_task}' is not a task of pipeline '{p.name}'")
    number = p.attempt + 1
    if not pipeline_repo.add_attempt(conn, p.id, number, {
            "mode": mode.value, "from_task": from_task, "parameters": common.dumps(params),
            "overrides": json.dumps(overrides), "progress": 0}, now):
        raise errors.InvalidState(f"pipeline '{p.name}' was rerun meanwhile")
    old = {r.key: r for r in pipeline_repo.runs_of(conn, p.id, last.number)}  # (after the lock)
    again = _to_run(checked, old, mode, from_task)
    pipeline_repo.insert_runs(conn, [
        common.new_run(p, number, key, task, item, now) if key in again
        else _reused(p, number, old[key], now) for key, task, item in checked.runs()])
    states = [TaskState.WAITING if k in again else TaskState(old[k].state) for k in old]
    pipeline_repo.raise_progress(conn, p.id, number, status.progress(states))
    what = mode.value.replace("_", " ") + (f" {from_task}" if from_task else "")
    kind_repo.add_event(conn, common.KIND, p.id, now,
                        f"Rerun ({what}) as attempt {number}: {len(again)} run(s) run again, "
                        f"{len(old) - len(again)} keep their outputs")
    return p


def _overrides(checked: shape.Shape, params: dict[str, str], given: Mapping[str, str],
               ) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    by_task: dict[str, dict[str, str]] = {}
    for name, value in given.items():
        task, dot, param = name.partition(".")
        if dot:
            if task not in checked.tasks:
                raise errors.BadParameter(f"parameter '{name}': '{task}' is not a task")
            by_task.setdefault(task, {})[param] = value
        elif name in params:
            params[name] = value
        else:
            raise errors.BadParameter(f"the pipeline has no parameter '{name}' (a task's own "
                                      "is given as TASK.NAME)")
    return params, by_task


def _to_run(checked: shape.Shape, old: Mapping[str, kind_rows.PipelineRun], mode: Rerun,
            from_task: str | None) -> set[str]:
    """The keys of the runs that run again; a run whose outputs were removed always does."""
    if mode == Rerun.ALL:
        return set(old)
    gone = {k for k, r in old.items() if r.outputs_removed_at is not None}
    if mode == Rerun.FROM_TASK:
        assert from_task is not None
        tasks = dag.downstream(checked.deps(), from_task)
        return {k for k, r in old.items() if r.task in tasks} | gone
    return {k for k, r in old.items() if TaskState(r.state) not in status.GOOD} | gone


def _reused(p: kind_rows.Pipeline, number: int, run: kind_rows.PipelineRun,
            now: int) -> dict[str, Any]:
    return common.new_run(
        p, number, run.key, run.task, run.item, now, state=run.state,
        origin="cached" if run.origin == "cached" else "reused", job_id=run.job_id,
        source=common.source(run), parameters=run.parameters, inputs=run.inputs,
        outputs=run.outputs, metrics=run.metrics, message=run.message,
        submitted_at=run.submitted_at, ended_at=run.ended_at)


def make(rt: runtime.Runtime, *, project_id: str, user_name: str, data: Any,
         now: int) -> kind_rows.Pipeline:
    """`create` in a transaction of its own; the pipeline as created."""
    with rt.store.begin() as conn:
        return create(conn, rt, project_id=project_id, user_name=user_name, data=data, now=now)


def act(rt: runtime.Runtime, project_id: str, pipeline_id: str,
        action: Literal["stop", "rerun"], caller: identity.Principal, *, mode: Rerun,
        from_task: str | None, parameters: Mapping[str, str], now: int) -> str:
    """`stop` or `rerun` of a pipeline the caller may change, in a transaction of its own;
    the pipeline's id."""
    with rt.store.begin() as conn:
        p = _changeable(conn, project_id, pipeline_id, caller)
        if action == "stop":
            return stop(conn, project_id, p.id, now).id
        return rerun(conn, project_id, p.id, mode=mode, from_task=from_task,
                     parameters=parameters, now=now).id


def _changeable(conn: sa.Connection, project_id: str, pipeline_id: str,
                caller: identity.Principal) -> kind_rows.Pipeline:
    """The pipeline (by id or name), if the caller may change it (Forbidden otherwise)."""
    p = pipeline_repo.get(conn, project_id, pipeline_id)
    caller.may_change_job(project_id, p.user_name, "pipeline")
    return p


def clean(store: db.Store, settings: settings_mod.Settings, project_id: str,
          pipeline_id: str, caller: identity.Principal, now: int) -> cleaning.Done:
    """Remove the intermediate outputs of an ended pipeline the caller may change; what was
    removed and kept."""
    with store.begin() as conn:
        found = _changeable(conn, project_id, pipeline_id, caller)
        p, todo, policy = _cleanup(conn, settings, project_id, found.id, now)
    done = cleaning.remove(policy, todo)
    with store.begin() as conn:
        kind_repo.add_event(conn, common.KIND, p.id, now, f"Cleaned: {done.summary()}")
    return done


def delete(store: db.Store, settings: settings_mod.Settings, project_id: str,
           pipeline_id: str, caller: identity.Principal, now: int) -> cleaning.Done | None:
    """Delete a pipeline the caller may change: at once when it has ended and the storage
    component is done with its jobs (what was removed), else stopped first if it runs and
    finished by the controller once its jobs are done with (None)."""
    with store.begin() as conn:
        p = _changeable(conn, project_id, pipeline_id, caller)
        running = pipeline_repo.attempt(conn, p.id, p.attempt).state == status.Status.RUNNING
        if running or not common.jobs_finished(conn, p.id):
            pipeline_repo.mark_deleted(conn, p.id, now)
            if running:
                pipeline_repo.request_stop(conn, p.id, p.attempt, now)
            kind_repo.add_event(conn, common.KIND, p.id, now, "Delete requested: " + (
                "stopping" if running else "waiting for its jobs' last files"))
            return None
        p, todo, policy = _cleanup(conn, settings, project_id, p.id, now)
        pipeline_repo.mark_deleted(conn, p.id, now)
    done = cleaning.remove(policy, todo)
    with store.begin() as conn:
        owned.delete(conn, common.owner(p), now)
        pipeline_repo.purge(conn, p.id)
    return done


def _cleanup(conn: sa.Connection, settings: settings_mod.Settings, project_id: str,
             pipeline_id: str, now: int) -> tuple[kind_rows.Pipeline, cleaning.Plan, paths.Policy]:
    """What cleaning the pipeline takes away, its runs marked as having lost it (before the
    files go: a rerun from now on runs them again)."""
    p = pipeline_repo.get(conn, project_id, pipeline_id)
    if not pipeline_repo.hold_ended(conn, p.id, p.attempt, now):
        raise errors.InvalidState(f"pipeline '{p.name}' is running: stop it, or let it end")
    if not common.jobs_finished(conn, p.id):
        raise errors.InvalidState(f"pipeline '{p.name}' has just ended: its jobs' last files "
                                  "are still being saved; try again in a few seconds")
    todo = cleaning.plan(p, common.shape_of(p), pipeline_repo.runs_of(conn, p.id),
                         pipeline_repo.borrowers(conn, p.id))
    pipeline_repo.mark_outputs_removed(conn, p.id, todo.runs, now)
    return p, todo, common.policy(conn, settings, project_id)
