"""What users do to loops: create, trigger a round, stop, resume, promote, roll back, delete.

Each locks the loop's row first and refuses (errors.InvalidState) what its state does not
allow, so that a user and the controller acting at once take turns. They run in the
caller's transaction; `make`, `act` and `remove` (what the API calls) open their own,
with the caller's right to change the loop checked in it. The kinds are the application
layer of their own objects: their rules are here, beside their controllers, above the
services they call (docs/architecture.md).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Literal

import sqlalchemy as sa

from corral.domain import errors, identity, specs
from corral.domain.incremental import loopspec, samples, states
from corral.kinds import owned
from corral.kinds.incremental import bodies, common, current, deploys
from corral.services import datasets, runtime
from corral.storage import objects, paths, wholefiles
from corral.store import (
    dataset_repo,
    identity_repo,
    job_repo,
    kind_rows,
    loop_repo,
    model_repo,
    rows,
)

LS, RS, DS = states.LoopState, states.RoundState, states.DeployState


def create(conn: sa.Connection, body: loopspec.LoopCreate, *, project_id: str,
           user_name: str, confine: datasets.Confine, now: int,
           services: runtime.Runtime | None = None) -> str:
    """Make a loop (Waiting; its service, if it has one, starts with the current model);
    returns its id. BadParameter for what cannot work; with `services`, each job the loop
    would submit is submitted as a probe and taken back, so that what the platform would
    refuse (a flavor, a code_dir that does not exist) is refused now."""
    spec = body.spec
    out = _output_dir(spec, confine, services, project_id)
    try:
        dataset = dataset_repo.get(conn, project_id, spec.dataset.name)
    except errors.NotFound as exc:
        raise errors.BadParameter(f"spec.dataset: {exc.message}") from None
    initial = current.pin(conn, project_id, spec.initialModel)
    judged = current.pin(conn, project_id, spec.evalSpec.initialModel) \
        if spec.evalSpec.initialModel else None
    stored = spec.model_copy(update={"outputDir": str(out)})
    loop_id = loop_repo.insert_loop(conn, {
        "project_id": project_id, "name": body.metadata.name,
        "description": body.metadata.description, "user_name": user_name,
        "spec": stored.model_dump_json(exclude_none=True), "state": LS.WAITING.value,
        "dataset_id": dataset.id, "initial_model": initial.name,
        "initial_version": initial.version, "eval_model": judged.name if judged else None,
        "eval_version": judged.version if judged else None, "rounds": 0, "failed_rounds": 0,
        "next_check_at": now, "split_upto": 0, "train_pending": "[]", "eval_versions": "[]",
        "deploys": 0, "services": 0, "hard_examples_read": 0, "created_at": now,
        "updated_at": now})
    loop = loop_repo.loop_by_id(conn, loop_id)
    assert loop is not None
    def probe(job: specs.JobCreate) -> None:
        if services is not None:
            owned.probe(conn, services, common.owner(loop), "check", job, now)

    try:
        bodies.check(stored, loop, dataset, probe)
        if not objects.is_remote(out):
            wholefiles.make_dir(out)  # last: a loop refused makes no folder
    except ValueError as exc:
        raise errors.BadParameter(f"spec: a template cannot make a job: {exc}") from None
    except errors.CorralError as exc:
        raise type(exc)(f"spec: a template cannot make a job: {exc.message}") from None
    except OSError as exc:
        raise errors.BadParameter(f"spec.outputDir '{out}': {exc.strerror or exc}") from None
    loop_repo.add_event(conn, loop_id, now, f"Created by {user_name or 'a user'}: watching "
                        f"dataset {dataset.name}, starting from {initial}")
    _start_service(conn, loop, stored, user_name, "the service starts", now)
    return loop_id


def _output_dir(spec: loopspec.LoopSpec, confine: datasets.Confine,
                services: runtime.Runtime | None, project_id: str) -> str:
    """outputDir as it is stored: a local folder resolved and allowed to the project, or a
    URL in an object store the project has."""
    if objects.is_remote(spec.outputDir):
        if services is None or services.stores is None:
            raise errors.BadParameter("spec.outputDir: object storage cannot be used here")
        services.stores.require(spec.outputDir, "spec.outputDir", project_id)
        return spec.outputDir.rstrip("/")
    if not os.path.isabs(spec.outputDir):
        raise errors.BadParameter(f"spec.outputDir '{spec.outputDir}' must be an absolute "
                                  "path or an s3:// URL")
    return str(confine(spec.outputDir, "spec.outputDir"))


def _start_service(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
                   user_name: str, why: str, now: int) -> None:
    if spec.deploySpec.template is None:
        return
    model = current.current(conn, loop, spec)
    deploys.create(conn, loop, spec, round_number=None, model=model.name,
                   version=model.version, moves_alias=False, user_name=user_name, reason=why,
                   now=now)


def _locked(conn: sa.Connection, loop: kind_rows.Loop) -> kind_rows.Loop:
    found = loop_repo.loop_by_id(conn, loop.id, lock=True)
    if found is None:
        raise loop_repo.LoopNotFound(f"incremental-learning job '{loop.name}' does not exist")
    return found


def _refuse(loop: kind_rows.Loop, what: str) -> errors.InvalidState:
    return errors.InvalidState(f"incremental-learning job '{loop.name}' is {loop.state}: "
                               f"it cannot {what} now")


def trigger(conn: sa.Connection, loop: kind_rows.Loop, user_name: str, now: int) -> None:
    """Ask for a round now, whatever the trigger says (it needs new training samples)."""
    loop = _locked(conn, loop)
    if loop.state != LS.WAITING:
        raise _refuse(loop, "start a round")
    loop_repo.update_loop(conn, loop.id, now, trigger_requested_at=now,
                          trigger_requested_by=user_name)
    loop_repo.add_event(conn, loop.id, now, f"Round asked for by {user_name or 'a user'}")


def stop(conn: sa.Connection, loop: kind_rows.Loop, user_name: str, now: int) -> None:
    """Stop the loop: its round (its samples wait for the next), its deploy, its jobs."""
    loop = _locked(conn, loop)
    if loop.state not in states.LIVE:
        raise _refuse(loop, "be stopped")
    pool = common.pool_of(loop)
    rnd = loop_repo.get_round(conn, loop.id, loop.rounds)
    if rnd is not None and rnd.state in states.ROUND_OPEN:
        loop_repo.move_round(conn, rnd, to=RS.STOPPED, ended_at=now,
                             message=f"stopped by {user_name or 'a user'}")
        pool = samples.give_back(pool, [(a, b) for a, b in json.loads(rnd.train_ranges)])
    for d in loop_repo.deploys_of(conn, loop.id):
        if d.state in states.DEPLOY_OPEN:
            loop_repo.move_deploy(conn, d, to=DS.SUPERSEDED, ended_at=now,
                                  message="the loop was stopped")
    owned.stop(conn, common.owner(loop), now, "Stopped with its incremental-learning job")
    loop_repo.move(conn, loop, to=LS.STOPPED, now=now,
                   event=f"Stopped by {user_name or 'a user'}", trigger_requested_at=None,
                   **common.pool_values(pool))


def resume(conn: sa.Connection, loop: kind_rows.Loop, user_name: str, now: int) -> None:
    """Set a stopped or failed loop going again (its service starts again)."""
    loop = _locked(conn, loop)
    if loop.state not in (LS.STOPPED, LS.FAILED):
        raise _refuse(loop, "be resumed")
    loop_repo.move(conn, loop, to=LS.WAITING, now=now,
                   event=f"Resumed by {user_name or 'a user'}", failed_rounds=0,
                   not_before=None, next_check_at=now)
    fresh = _locked(conn, loop)
    spec = common.spec_of(fresh)
    running = deploys.running_service(conn, fresh)
    if running is None:
        _start_service(conn, fresh, spec, user_name, "the loop resumed: the service starts",
                       now)


def promote(conn: sa.Connection, loop: kind_rows.Loop, user_name: str, reason: str,
            version: int | None, now: int) -> int:
    """Deploy a version of the loop's model and move its alias to it, by hand; returns the
    version. Recorded as forced, with `reason`."""
    loop = _locked(conn, loop)
    if loop.state != LS.WAITING:
        raise _refuse(loop, "promote a model (wait for its round, or stop it)")
    if not reason.strip():
        raise errors.BadParameter("a forced promotion needs a reason")
    spec = common.spec_of(loop)
    if version is None:
        trained = [r.new_version for r in loop_repo.rounds_of(conn, loop.id) if r.new_version]
        if not trained:
            raise errors.InvalidState("no round has trained a model yet: give a version")
        version = trained[-1]
    try:
        current.version(conn, loop.project_id, spec.model_name, version)
    except errors.NotFound as exc:
        raise errors.BadParameter(exc.message) from None
    if current.alias_target(conn, loop, spec) == version:
        raise errors.InvalidState(f"'{spec.deploySpec.model.alias}' already names "
                                  f"{spec.model_name} v{version}")
    _deploy_by_hand(conn, loop, spec, spec.model_name, version, user_name,
                    f"forced by {user_name or 'a user'}: {reason.strip()}", now)
    return version


def rollback(conn: sa.Connection, loop: kind_rows.Loop, user_name: str, reason: str,
             now: int) -> int:
    """Deploy the version the loop's alias named before its last move, and move it back;
    returns that version."""
    loop = _locked(conn, loop)
    if loop.state != LS.WAITING:
        raise _refuse(loop, "roll back (wait for its round, or stop it)")
    spec = common.spec_of(loop)
    alias = spec.deploySpec.model.alias
    target = current.alias_target(conn, loop, spec)
    moves = _history(conn, loop, spec)
    if target is None or not moves or moves[-1].to_version != target:
        raise errors.InvalidState(f"'{alias}' of {spec.model_name} has no earlier version "
                                  "to roll back to")
    before = moves[-1].from_version
    name, version = ((spec.model_name, before) if before is not None
                     else (loop.initial_model, loop.initial_version))
    why = f"rollback by {user_name or 'a user'}" + (f": {reason.strip()}" if reason.strip()
                                                    else "")
    _deploy_by_hand(conn, loop, spec, name, version, user_name, why, now)
    return version


def _history(conn: sa.Connection, loop: kind_rows.Loop,
             spec: loopspec.LoopSpec) -> list[rows.AliasMove]:
    try:
        model = model_repo.get(conn, loop.project_id, spec.model_name)
    except errors.NotFound:
        return []
    return model_repo.alias_history(conn, model.id, spec.deploySpec.model.alias)


def _deploy_by_hand(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
                    model: str, version: int, user_name: str, why: str, now: int) -> None:
    deploys.create(conn, loop, spec, round_number=None, model=model, version=version,
                   moves_alias=True, user_name=user_name, reason=why, now=now)
    loop_repo.move(conn, loop, to=LS.DEPLOYING, now=now,
                   event=f"Deploying {model} v{version} ({why})")


def delete(conn: sa.Connection, loop: kind_rows.Loop, now: int) -> None:
    """Delete the loop and its jobs (stopped first); its models, their aliases and the
    files under its outputDir stay."""
    loop = _locked(conn, loop)
    owned.delete(conn, common.owner(loop), now)
    loop_repo.delete_loop(conn, loop.id)


def service_job(conn: sa.Connection, loop: kind_rows.Loop) -> rows.Job | None:
    """The loop's latest service job, running or not."""
    if not loop.services:
        return None
    return job_repo.owned_jobs(conn, states.KIND, loop.id).get(
        deploys.service_role(loop.services))



# --- what the API calls: each in a transaction of its own ---------------------------------

Action = Literal["trigger", "stop", "resume", "promote", "rollback"]


def make(rt: runtime.Runtime, body: loopspec.LoopCreate, *, project_id: str, user_name: str,
         now: int) -> str:
    """`create` in a transaction of its own, its paths confined to the project's roots and
    its jobs probed with the platform's checks; the loop's id."""
    with rt.store.begin() as conn:
        identity_repo.require_project(conn, project_id)
        confine = functools.partial(paths.confine, rt.path_policy(conn, project_id))
        return create(conn, body, project_id=project_id, user_name=user_name,
                      confine=confine, now=now, services=rt)


def act(rt: runtime.Runtime, project_id: str, ref: str, action: Action,
        caller: identity.Principal, *, reason: str, version: int | None, now: int) -> str:
    """One of the actions on a loop (by id or name) the caller may change; its id."""
    with rt.store.begin() as conn:
        loop = loop_repo.get_loop(conn, project_id, ref)
        caller.may_change_job(project_id, loop.user_name, "loop")
        who = caller.user_name
        if action == "promote":
            promote(conn, loop, who, reason, version, now)
        elif action == "rollback":
            rollback(conn, loop, who, reason, now)
        else:
            {"trigger": trigger, "stop": stop, "resume": resume}[action](conn, loop, who, now)
        return loop.id


def remove(rt: runtime.Runtime, project_id: str, ref: str, caller: identity.Principal,
           now: int) -> None:
    """`delete` a loop (by id or name) the caller may change, in a transaction of its own."""
    with rt.store.begin() as conn:
        loop = loop_repo.get_loop(conn, project_id, ref)
        caller.may_change_job(project_id, loop.user_name, "loop")
        delete(conn, loop, now)
