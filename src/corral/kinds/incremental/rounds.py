"""A round, from its trigger to its verdict.

Start: the round's training samples and its evaluation set are written to index files
(frozen: the set's content hash is kept), then one transaction records the round, moves
the loop to Training and submits the train job (`round-N/train`). When that job has
completed and its model is registered, one transaction submits the evaluation job
(`round-N/eval`). When that one has completed, its metrics decide: the round is Rejected
(the rule that failed is kept), or Deploying (`deploys.py` takes it from there). A job
that failed, or an evaluation that cannot answer the condition, fails the round
(`outcomes.fail`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import loopspec, samples, states, triggers
from corral.kinds import owned
from corral.kinds.incremental import bodies, common, current, deploys, layout, outcomes
from corral.services import datasets
from corral.storage import indexfiles
from corral.store import (
    dataset_repo,
    job_repo,
    kind_rows,
    loop_repo,
    model_repo,
    rows,
    version_repo,
)

LS, RS = states.LoopState, states.RoundState


def role(number: int, stage: str) -> str:
    return f"round-{number}/{stage}"


# --- starting --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a round starts with, read before its transaction."""

    loop: kind_rows.Loop
    spec: loopspec.LoopSpec
    dataset: kind_rows.Dataset
    where: layout.Layout
    base: current.ModelAt  #: the model it trains from
    judged: current.ModelAt  #: the model its new one is judged against
    snap: indexfiles.Snapshot


def start(ctx: common.Ctx, loop_id: str, trigger: dict[str, Any], now: int) -> bool:
    """Start the loop's next round (it waits, and its trigger held); True when it did."""
    plan = _plan(ctx, loop_id)
    if plan is None:
        return False
    if isinstance(plan, tuple):
        return _not_started(ctx, plan[0], trigger, plan[1], now)
    number, pool = plan.loop.rounds + 1, common.pool_of(plan.loop)
    if len(plan.snap.samples) < pool.split_upto:
        return False  # rewritten since the check; the next check sees it
    try:
        eval_hash = _write_samples(deploys.files(ctx, plan.loop), plan.where, number,
                                   plan.dataset.format, plan.snap, pool)
    except Exception as exc:  # (OSError, CorralError; botocore and aiohttp have their own)
        why = getattr(exc, "message", None) or getattr(exc, "strerror", None) or exc
        return _not_started(ctx, plan.loop, trigger, "its samples cannot be written under "
                            f"outputDir: {why}", now)
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop_id, lock=True)
        if locked is None or not _same(locked, plan.loop):
            return False  # moved on meanwhile: the next pass sees where it is
        _begin(ctx, conn, locked, plan, trigger, eval_hash, now)
    ctx.services.wake()
    return True


def _plan(ctx: common.Ctx, loop_id: str) -> _Plan | tuple[kind_rows.Loop, str] | None:
    """What the round needs, or (the loop, why it cannot start), or None (not waiting)."""
    with ctx.store.read() as conn:
        loop = loop_repo.loop_by_id(conn, loop_id)
        if loop is None or loop.state != LS.WAITING:
            return None
        spec = common.spec_of(loop)
        dataset = dataset_repo.by_id(conn, loop.dataset_id)
        assert dataset is not None
        try:
            return _Plan(
                loop=loop, spec=spec, dataset=dataset,
                where=layout.Layout.of(conn, ctx.services, loop, spec),
                base=current.current(conn, loop, spec),
                judged=current.baseline(conn, loop, spec, _promoted(conn, loop)),
                snap=datasets.read(dataset, ctx.stores, common.confine(ctx, conn, loop)))
        except errors.CorralError as exc:
            return loop, exc.message


def _begin(ctx: common.Ctx, conn: sa.Connection, locked: kind_rows.Loop, plan: _Plan,
           trigger: dict[str, Any], eval_hash: str, now: int) -> None:
    """Record the round, take its samples and submit its train job (one transaction)."""
    number, spec = locked.rounds + 1, plan.spec
    rest, taken = samples.take_train(common.pool_of(locked))
    loop_repo.insert_round(conn, {
        "loop_id": locked.id, "number": number, "state": RS.TRAINING.value,
        "started_at": now, "trigger": trigger, "train_ranges": [list(r) for r in taken],
        "train_samples": samples.count(taken), "eval_samples": samples.count(rest.evals),
        "eval_hash": eval_hash, "base_model": plan.base.name,
        "base_version": plan.base.version, "current_model": plan.judged.name,
        "current_version": plan.judged.version})
    rnd = loop_repo.get_round(conn, locked.id, number)
    assert rnd is not None
    started: dict[str, Any] = {"rounds": number, "trigger_requested_at": None,
                               "trigger_requested_by": None}
    try:
        body = bodies.train(spec, locked, plan.where, number, plan.base, plan.dataset)
    except ValueError as exc:
        job: rows.Job | str = str(exc)
    else:
        job = common.submit(ctx, conn, locked, role(number, "train"), body, now)
    if isinstance(job, str):
        # (its samples stay in the loop's pool; the failure's backoff sets not_before)
        outcomes.fail(conn, locked, spec, rnd, f"its train job could not be submitted: {job}",
                      now, give_back=False, **started)
        return
    loop_repo.update_round(conn, locked.id, number, train_job_id=job.id)
    loop_repo.move(conn, locked, to=LS.TRAINING, now=now,
                   event=f"Round {number} started ({_why(trigger)}): training {plan.base} "
                         f"on {samples.count(taken)} new sample(s) with job {job.name}",
                   not_before=None, **started, **common.pool_values(rest))


def _same(locked: kind_rows.Loop, seen: kind_rows.Loop) -> bool:
    return (locked.state == LS.WAITING and locked.rounds == seen.rounds
            and (locked.split_upto, locked.train_pending, locked.eval_versions)
            == (seen.split_upto, seen.train_pending, seen.eval_versions))


def _why(trigger: dict[str, Any]) -> str:
    if trigger.get("manual"):
        return f"asked for by {trigger.get('by') or 'a user'}"
    return str(trigger.get("rule", "triggered"))


def _write_samples(found: layout.Files, where: layout.Layout, number: int, fmt: str,
                   snap: indexfiles.Snapshot, pool: samples.Pool) -> str:
    """Write the round's index files; the content hash of its evaluation set."""
    train = indexfiles.render(snap.header, samples.pick(snap.samples, pool.train))
    evals = indexfiles.render(snap.header, samples.pick(snap.samples, pool.evals))
    found.write(where.train_index(number, fmt), train)
    found.write(where.eval_index(number, fmt), evals)
    return samples.content_hash(evals)


def _not_started(ctx: common.Ctx, loop: kind_rows.Loop, trigger: dict[str, Any], why: str,
                 now: int) -> bool:
    """A round that could not even start: recorded as failed, its samples kept."""
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        if locked is None or not _same(locked, loop):
            return False
        number = locked.rounds + 1
        loop_repo.insert_round(conn, {
            "loop_id": loop.id, "number": number, "state": RS.TRAINING.value,
            "started_at": now, "trigger": trigger, "train_ranges": [], "train_samples": 0,
            "eval_samples": 0, "eval_hash": "", "base_model": "", "base_version": 0})
        rnd = loop_repo.get_round(conn, loop.id, number)
        assert rnd is not None
        outcomes.fail(conn, locked, common.spec_of(locked), rnd, why, now, give_back=False,
                      rounds=number, trigger_requested_at=None, trigger_requested_by=None)
    return True


def _promoted(conn: sa.Connection, loop: kind_rows.Loop) -> bool:
    """Whether the loop has had a model promoted (its evaluations then judge against the
    current model rather than evalSpec.initialModel)."""
    return any(d.moves_alias and d.state == states.DeployState.LOADED
               for d in loop_repo.deploys_of(conn, loop.id))


# --- moving along ----------------------------------------------------------------------------


def advance(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, now: int) -> bool:
    """Take the loop's current round a step further if its jobs allow; True if it moved."""
    with ctx.store.read() as conn:
        rnd = loop_repo.get_round(conn, loop.id, loop.rounds)
        if rnd is None or not _ready(conn, loop, spec, rnd, now):
            return False
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        fresh = loop_repo.get_round(conn, loop.id, rnd.number)
        if (locked is None or fresh is None or locked.state != loop.state
                or fresh.state != rnd.state or locked.rounds != rnd.number):
            return False
        if fresh.state == RS.TRAINING:
            _after_train(ctx, conn, locked, spec, fresh, now)
        elif fresh.state == RS.EVALUATING:
            _after_eval(conn, locked, spec, fresh, now)
        else:
            _deploy(conn, locked, spec, fresh, now)
    ctx.services.wake()
    return True


def _ready(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, rnd: kind_rows.Round,
           now: int) -> bool:
    """Whether the round has a step to take (read before the write transaction takes it)."""
    if loop.state == LS.TRAINING and rnd.state == RS.TRAINING:
        return _job_done(conn, rnd.train_job_id)
    if loop.state == LS.EVALUATING and rnd.state == RS.EVALUATING:
        return _job_done(conn, rnd.eval_job_id)
    if loop.state == LS.DEPLOYING and rnd.state == RS.DEPLOYING and rnd.deploy_seq is None:
        return common.window_open(spec.deploySpec.trigger, now)
    return False


def _job_done(conn: sa.Connection, job_id: str | None) -> bool:
    job = job_repo.job_by_id(conn, job_id) if job_id else None
    return job is None or (owned.ended(job) and (
        not owned.succeeded(job) or job.finalized_at is not None))


def _outcome(conn: sa.Connection, job_id: str | None, what: str) -> tuple[rows.Job | None, str]:
    """The job, completed and finished (its metrics and model stored), or why the round
    fails ('' while there is neither)."""
    job = job_repo.job_by_id(conn, job_id) if job_id else None
    if job is None:
        return None, f"its {what} job was deleted"
    if not owned.ended(job):
        return None, ""
    if not owned.succeeded(job):
        reason = f": {job.failure_message}" if job.failure_message else ""
        return None, f"its {what} job {job.name} ended {job.phase}{reason}"
    return (job, "") if job.finalized_at is not None else (None, "")


def _after_train(ctx: common.Ctx, conn: sa.Connection, loop: kind_rows.Loop,
                 spec: loopspec.LoopSpec, rnd: kind_rows.Round, now: int) -> None:
    job, why = _outcome(conn, rnd.train_job_id, "train")
    if job is None:
        if why:
            outcomes.fail(conn, loop, spec, rnd, why, now)
        return
    reg = model_repo.registered_from(conn, job.id)
    if reg is None or reg.model_name != spec.model_name:
        outcomes.fail(conn, loop, spec, rnd, f"its train job {job.name} registered no model: "
                      f"its output {bodies.MODEL_OUT} (MODEL_URL) held no files", now)
        return
    new = current.ModelAt(name=spec.model_name, version=reg.version, location=reg.location)
    try:
        judged = current.version(conn, loop.project_id, rnd.current_model or "",
                                 rnd.current_version or 0)
        where = layout.Layout.of(conn, ctx.services, loop, spec)
        dataset = dataset_repo.by_id(conn, loop.dataset_id)
        assert dataset is not None
        body = bodies.evaluation(spec, loop, where, rnd.number, new, judged, dataset)
    except (errors.CorralError, ValueError) as exc:
        outcomes.fail(conn, loop, spec, rnd, "its evaluation job cannot be made: "
                      f"{getattr(exc, 'message', exc)}", now)
        return
    eval_job = common.submit(ctx, conn, loop, role(rnd.number, "eval"), body, now)
    if isinstance(eval_job, str):
        outcomes.fail(conn, loop, spec, rnd, "its evaluation job could not be submitted: "
                      f"{eval_job}", now)
        return
    loop_repo.move_round(conn, rnd, to=RS.EVALUATING, new_version=new.version,
                         eval_job_id=eval_job.id)
    loop_repo.move(conn, loop, to=LS.EVALUATING, now=now,
                   event=f"Round {rnd.number}: {new} trained; evaluating it against "
                         f"{judged} with job {eval_job.name}")


def verdict(spec: loopspec.LoopSpec, results: list[triggers.Metrics]) -> triggers.Verdict:
    """Whether the new model is promoted, by the deploy trigger's condition (MetricError
    when the evaluation's results cannot say)."""
    cond = spec.deploySpec.trigger.condition if spec.deploySpec.trigger else None
    if cond is None:
        triggers.require_both(results)
        return triggers.Verdict(passed=True, rule="no deploy condition: every new model "
                                                  "is promoted")
    value = triggers.value_of(triggers.parse_metric(cond.metric), results)
    return triggers.judge(cond.metric, cond.operator, cond.threshold, value)


def _after_eval(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
                rnd: kind_rows.Round, now: int) -> None:
    job, why = _outcome(conn, rnd.eval_job_id, "evaluation")
    if job is None:
        if why:
            outcomes.fail(conn, loop, spec, rnd, why, now)
        return
    results = triggers.evaluation_results(version_repo.final_of(conn, job.id))
    reported = {"metrics_new": json.dumps(triggers.flat(results[0]) if results else {}),
                "metrics_current": json.dumps(triggers.flat(results[1])
                                              if len(results) > 1 else {})}
    loop_repo.update_round(conn, loop.id, rnd.number, **reported)
    try:
        judged = verdict(spec, results)
    except triggers.MetricError as exc:
        outcomes.fail(conn, loop, spec, rnd, f"its evaluation cannot be judged: {exc}", now)
        return
    if not judged.passed:
        loop_repo.move_round(conn, rnd, to=RS.REJECTED, decision="reject", rule=judged.rule,
                             ended_at=now)
        loop_repo.move(conn, loop, to=LS.WAITING, now=now,
                       failed_rounds=0, event=f"Round {rnd.number} rejected: "
                                              f"{judged.rule}; the current model stays")
        return
    loop_repo.move_round(conn, rnd, to=RS.DEPLOYING, decision="promote", rule=judged.rule)
    loop_repo.move(conn, loop, to=LS.DEPLOYING, now=now,
                   event=f"Round {rnd.number}: {spec.model_name} v{rnd.new_version} wins "
                         f"({judged.rule})")
    fresh = loop_repo.get_round(conn, loop.id, rnd.number)
    assert fresh is not None
    if common.window_open(spec.deploySpec.trigger, now):
        _deploy(conn, loop, spec, fresh, now)


def _deploy(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec,
            rnd: kind_rows.Round, now: int) -> None:
    """Deploy the round's new model (its deploy window is open)."""
    assert rnd.new_version is not None
    seq = deploys.create(conn, loop, spec, round_number=rnd.number, model=spec.model_name,
                         version=rnd.new_version, moves_alias=True, user_name=loop.user_name,
                         reason=f"round {rnd.number} promoted it: {rnd.rule}", now=now)
    loop_repo.update_round(conn, loop.id, rnd.number, deploy_seq=seq)
