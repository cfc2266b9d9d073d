"""Deploying a model to a loop's service: its files, model_config.json, the acknowledgement.

A deploy (a round's new model, a forced promotion, a rollback, or the model a new service
starts with) goes Writing -> Pending -> Loaded (or Failed). Writing: the model's files are
copied whole into `deploy/models/<model>-v<N>/` (filled beside their place, then renamed),
and only then is `model_config.json` replaced (written beside and renamed) with the
model's path and a new `model_update_time`. One transaction then makes it Pending and
starts a service job where one is needed: always without hot update (the old service is
stopped), with it only when none runs. Pending: the service says it loaded the model by
writing `model_ack.json` with that `model_update_time`; the deploy is Loaded then, and
only then does the alias move (with its history row) and the round count as Promoted. A
service that reports a failure, ends, or says nothing within the acknowledgement timeout
fails the deploy (and its round), and model_config.json goes back to the model last
loaded. Without a service template a deploy is Loaded as soon as its files are written.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import loopspec, states
from corral.kinds import owned
from corral.kinds.incremental import bodies, common, current, layout, outcomes
from corral.storage import wholefiles
from corral.store import dataset_repo, job_repo, kind_rows, loop_repo, model_repo, rows

log = logging.getLogger(__name__)
LS, RS, DS = states.LoopState, states.RoundState, states.DeployState
#: the most of an acknowledgement file read
ACK_BYTES = 64 * 1024


def service_role(number: int) -> str:
    return f"serve-{number}"


def create(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, *,
           round_number: int | None, model: str, version: int, moves_alias: bool,
           user_name: str, reason: str, now: int) -> int:
    """Record a new deploy (Writing), replacing any still open; returns its number."""
    seq = loop.deploys + 1
    for old in loop_repo.deploys_of(conn, loop.id):
        if old.state in states.DEPLOY_OPEN:
            loop_repo.move_deploy(conn, old, to=DS.SUPERSEDED, ended_at=now,
                                  message=f"replaced by deploy {seq}")
    loop_repo.insert_deploy(conn, {
        "loop_id": loop.id, "seq": seq, "round": round_number, "model_name": model,
        "version": version, "token": f"{common.local_time(now)} #{seq}",
        "moves_alias": moves_alias, "reason": reason, "user_name": user_name,
        "state": DS.WRITING.value, "created_at": now})
    loop_repo.update_loop(conn, loop.id, now, deploys=seq)
    loop_repo.add_event(conn, loop.id, now, f"Deploy {seq}: {model} v{version} ({reason})")
    return seq


def advance(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, now: int) -> bool:
    """Move the loop's open deploy along; True when it moved."""
    with ctx.store.read() as conn:
        open_ = [d for d in loop_repo.deploys_of(conn, loop.id) if d.state in states.DEPLOY_OPEN]
    if not open_:
        return False
    if open_[-1].state == DS.WRITING:
        return _write(ctx, loop, spec, open_[-1], now)
    return _await(ctx, loop, spec, open_[-1], now)


# --- writing -------------------------------------------------------------------------------


def config(where: layout.Layout, d: kind_rows.Deploy) -> bytes:
    """model_config.json for a deploy: Sedna's shape, and what corral knows of it."""
    return json.dumps({
        "model_config": {"model_path": where.deployed(d.model_name, d.version),
                         "model_update_time": d.token},
        "corral": {"model": d.model_name, "version": d.version, "deploy": d.seq},
    }, indent=2).encode() + b"\n"


def _write(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, d: kind_rows.Deploy,
           now: int) -> bool:
    try:
        with ctx.store.read() as conn:
            where = layout.Layout.of(conn, ctx.services, loop, spec)
            model = current.version(conn, loop.project_id, d.model_name, d.version)
        _copy(ctx, loop, model, where)
        files(ctx, loop).write(where.config, config(where, d))
    except Exception as exc:  # (OSError, CorralError; botocore and aiohttp have their own)
        why = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc)
        return _end(ctx, loop, d, DS.FAILED, f"the model could not be written: {why}", now)
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        fresh = loop_repo.get_deploy(conn, loop.id, d.seq)
        if locked is None or fresh is None or fresh.state != DS.WRITING:
            return False
        if spec.deploySpec.template is None:
            finish(conn, locked, spec, fresh, DS.LOADED, "written (no service to load it)", now)
            return True
        started = _service(ctx, conn, locked, spec, fresh, where, now)
        if started.startswith("!"):
            finish(conn, locked, spec, fresh, DS.FAILED, started[1:], now)
            return True
        loop_repo.move_deploy(conn, fresh, to=DS.PENDING, written_at=now, service_role=started,
                              deadline=now + spec.deploySpec.model.ack_timeout_s * 1000)
    ctx.services.wake()
    return True


def _copy(ctx: common.Ctx, loop: kind_rows.Loop, model: current.ModelAt,
          where: layout.Layout) -> None:
    """The model's files, whole, in the deploy folder (once: they never change)."""
    dest = where.deployed(model.name, model.version)
    if not where.remote and wholefiles.is_dir(dest):
        return
    if ctx.stores is None:
        raise errors.CorralError("the model store cannot be read here")
    files(ctx, loop).put_tree(dest, ctx.stores.open(model.location, loop.project_id))


def files(ctx: common.Ctx, loop: kind_rows.Loop) -> layout.Files:
    return layout.Files(ctx.stores, loop.project_id)


def _service(ctx: common.Ctx, conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
             d: kind_rows.Deploy, where: layout.Layout, now: int) -> str:
    """The role of the service that is to load the deploy, started when needed ("!" and
    why, when it cannot be)."""
    running = running_service(conn, loop)
    if running is not None and spec.deploySpec.model.hotUpdateEnabled:
        return str(running.owner_role)
    if running is not None:
        job_repo.request_terminate(conn, running.id, now, f"Replaced by a service of "
                                   f"{d.model_name} v{d.version}")
    number = loop.services + 1
    dataset = dataset_repo.by_id(conn, loop.dataset_id)
    assert dataset is not None
    try:
        body = bodies.service(spec, loop, where, where.deployed(d.model_name, d.version),
                              dataset)
    except ValueError as exc:
        return f"!the service job cannot be made: {exc}"
    job = common.submit(ctx, conn, loop, service_role(number), body, now)
    if isinstance(job, str):
        return f"!the service job could not be submitted: {job}"
    loop_repo.update_loop(conn, loop.id, now, services=number)
    loop_repo.add_event(conn, loop.id, now, f"Service job {job.name} started for {d.model_name} "
                        f"v{d.version}")
    return service_role(number)


def running_service(conn: sa.Connection, loop: kind_rows.Loop) -> rows.Job | None:
    if not loop.services:
        return None
    job = job_repo.owned_jobs(conn, states.KIND, loop.id).get(service_role(loop.services))
    if job is None or job.deleted_at is not None or owned.ended(job):
        return None
    return job


# --- waiting for the service -----------------------------------------------------------------


def read_ack(where: layout.Layout, found: layout.Files) -> dict[str, Any] | None:
    """What the service last acknowledged, if it wrote anything readable."""
    try:
        data = json.loads(found.read(where.ack, limit=ACK_BYTES))
    except Exception:  # (none yet, or not read now: botocore and aiohttp have their own)
        return None
    return data if isinstance(data, dict) else None


def _await(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, d: kind_rows.Deploy,
           now: int) -> bool:
    with ctx.store.read() as conn:
        try:
            ack = read_ack(layout.Layout.of(conn, ctx.services, loop, spec), files(ctx, loop))
        except errors.CorralError:
            ack = None
        job = job_repo.owned_jobs(conn, states.KIND, loop.id).get(d.service_role or "")
    state, message = DS.PENDING, ""
    if ack is not None and str(ack.get("model_update_time")) == d.token:
        if str(ack.get("status", "loaded")).lower() in ("loaded", "ok", "completed"):
            state, message = DS.LOADED, "the service loaded it"
        else:
            state = DS.FAILED
            message = f"the service failed to load it: {str(ack.get('message', ''))[:500]}"
    elif job is None or job.deleted_at is not None or owned.ended(job):
        phase = "was deleted" if job is None or job.deleted_at else f"ended {job.phase}"
        state, message = DS.FAILED, f"its service job {phase} before acknowledging it"
    elif d.deadline is not None and now >= d.deadline:
        state = DS.FAILED
        message = (f"the service did not acknowledge loading it within "
                   f"{spec.deploySpec.model.ack_timeout_s} s")
    if state == DS.PENDING:
        return False
    return _end(ctx, loop, d, state, message, now)


def _end(ctx: common.Ctx, loop: kind_rows.Loop, d: kind_rows.Deploy, state: states.DeployState,
         message: str, now: int) -> bool:
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        fresh = loop_repo.get_deploy(conn, loop.id, d.seq)
        if locked is None or fresh is None or fresh.state != d.state:
            return False
        spec = common.spec_of(locked)
        finish(conn, locked, spec, fresh, state, message, now)
        last = _last_loaded(conn, loop.id) if state == DS.FAILED else None
    if last is not None:
        _restore(ctx, loop, spec, last)
    ctx.services.wake()
    return True


def _last_loaded(conn: sa.Connection, loop_id: str) -> kind_rows.Deploy | None:
    loaded = [d for d in loop_repo.deploys_of(conn, loop_id) if d.state == DS.LOADED]
    return loaded[-1] if loaded else None


def _restore(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
             last: kind_rows.Deploy) -> None:
    """model_config.json back to the model last loaded, so that it says what serves (a
    service that never loaded the failed one sees the token it has and does nothing)."""
    try:
        with ctx.store.read() as conn:
            where = layout.Layout.of(conn, ctx.services, loop, spec)
        files(ctx, loop).write(where.config, config(where, last))
    except Exception as exc:  # (OSError, CorralError; botocore and aiohttp have their own)
        log.warning("loop %s: model_config.json not restored: %s", loop.name, exc)


def finish(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, d: kind_rows.Deploy,
           state: states.DeployState, message: str, now: int) -> None:
    """End a deploy Loaded or Failed, with what follows for the alias, its round and its
    loop (whose row the caller has locked)."""
    loop_repo.move_deploy(conn, d, to=state, ended_at=now,
                          message=message)
    what = f"Deploy {d.seq} ({d.model_name} v{d.version})"
    if state == DS.LOADED:
        loop_repo.add_event(conn, loop.id, now, f"{what}: {message}")
        if d.moves_alias:
            _move_alias(conn, loop, spec, d, now)
    else:
        loop_repo.add_event(conn, loop.id, now, f"{what} failed: {message}", "Warning")
    rnd = loop_repo.get_round(conn, loop.id, d.round) if d.round is not None else None
    if rnd is not None and rnd.state == RS.DEPLOYING and rnd.deploy_seq == d.seq:
        if state == DS.LOADED:
            loop_repo.move_round(conn, rnd, to=RS.PROMOTED, ended_at=now)
            alias = spec.deploySpec.model.alias
            loop_repo.move(conn, loop, to=LS.WAITING, now=now,
                           failed_rounds=0, event=f"Round {rnd.number} promoted: "
                           f"{d.model_name} v{d.version} serves as '{alias}'")
        else:
            outcomes.fail(conn, loop, spec, rnd, f"its deploy failed: {message}", now)
    elif d.round is None and loop.state == LS.DEPLOYING and d.moves_alias:
        loop_repo.move(conn, loop, to=LS.WAITING, now=now,
                       event=f"{what} {'done' if state == DS.LOADED else 'failed'}")


def _move_alias(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
                d: kind_rows.Deploy, now: int) -> None:
    """The loop's alias to the deployed version (or removed, when what was deployed is the
    initial model of another name: a rollback past the first promotion)."""
    model = model_repo.ensure(conn, loop.project_id, spec.model_name, now)
    to = d.version if d.model_name == spec.model_name else None
    model_repo.move_alias(conn, model.id, spec.deploySpec.model.alias, to, now=now,
                          user_name=d.user_name, reason=d.reason)
