"""A loop's periodic check: count its dataset, split the new samples, judge the trigger.

The check runs every trainSpec.trigger.checkPeriodSeconds (and at once when a user asks
for a round): the dataset's file is looked at (a stat, and a count when it changed), the
samples that appeared since the last check are split between training and evaluation,
and a waiting loop whose train trigger holds starts its next round. The file is read
outside the write transaction, which then applies what was read only if no other check
got there first.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa

from corral.domain import errors
from corral.domain.incremental import loopspec, samples, states, triggers
from corral.kinds.incremental import common, rounds
from corral.services import datasets
from corral.storage import indexfiles
from corral.store import dataset_repo, kind_rows, loop_repo

log = logging.getLogger(__name__)


def due(loop: kind_rows.Loop, now: int) -> bool:
    manual = loop.state == states.LoopState.WAITING and loop.trigger_requested_at is not None
    return manual or now >= loop.next_check_at


def next_check(scheduled: int, period_ms: int, now: int) -> int:
    """When the check after the one `scheduled` runs: at the same rhythm, unless the loop
    fell behind it; a check made early (a user asked for a round) keeps the one scheduled."""
    if now < scheduled:
        return scheduled
    nxt = scheduled + period_ms
    return nxt if nxt > now else now + period_ms


def check(ctx: common.Ctx, loop: kind_rows.Loop, spec: loopspec.LoopSpec, now: int) -> bool:
    """Check the loop if it is due; True when a round started."""
    if not due(loop, now):
        return False
    snap, problem = _look(ctx, loop)
    period = spec.trainSpec.trigger.checkPeriodSeconds * 1000
    trigger: dict[str, Any] | None = None
    with ctx.store.begin() as conn:
        locked = loop_repo.loop_by_id(conn, loop.id, lock=True)
        if (locked is None or locked.next_check_at != loop.next_check_at
                or locked.state not in states.LIVE):
            return False  # checked, stopped or deleted meanwhile
        dataset = dataset_repo.by_id(conn, locked.dataset_id)
        assert dataset is not None  # (a dataset in use is never deleted)
        total = (dataset.number_of_samples if problem
                 else datasets.count_if_changed(conn, dataset, snap, now))
        pool = _split(conn, locked, spec, total, now)
        values = {**common.pool_values(pool),
                  "next_check_at": next_check(locked.next_check_at, period, now),
                  **_problem(conn, locked, problem, now)}
        if locked.state == states.LoopState.WAITING:
            trigger = decide(conn, locked, spec, pool, now)
            if trigger is None and locked.trigger_requested_at is not None:
                values["trigger_requested_at"] = None  # (ignored, and said so)
        loop_repo.update_loop(conn, locked.id, now, **values)
    if trigger is None:
        return False
    return rounds.start(ctx, loop.id, trigger, now)


def _look(ctx: common.Ctx, loop: kind_rows.Loop) -> tuple[indexfiles.Snapshot | None, str | None]:
    """The dataset's file if it changed since it was counted, or what keeps it from being
    read."""
    with ctx.store.read() as conn:
        dataset = dataset_repo.by_id(conn, loop.dataset_id)
        assert dataset is not None
        try:
            return datasets.changed(dataset, ctx.stores, common.confine(ctx, conn, loop)), None
        except errors.CorralError as exc:
            return None, f"dataset '{dataset.name}' cannot be read: {exc.message}"


def _split(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, total: int,
           now: int) -> samples.Pool:
    pool = common.pool_of(loop)
    if total < pool.split_upto:
        loop_repo.add_event(conn, loop.id, now, f"The dataset has {total} samples, fewer than the "
                            f"{pool.split_upto} already split: it was rewritten, so the samples "
                            "split so far are dropped and new ones count from here", "Warning")
        return samples.shrunk(total)
    after = samples.split(pool, total, spec.dataset.trainProb)
    if after.split_upto > pool.split_upto:
        new = after.split_upto - pool.split_upto
        to_train = after.num_of_samples - pool.num_of_samples
        loop_repo.add_event(conn, loop.id, now, f"{new} new sample(s): {to_train} for training, "
                            f"{new - to_train} for evaluation")
    return after


def _problem(conn: sa.Connection, loop: kind_rows.Loop, problem: str | None,
             now: int) -> dict[str, Any]:
    """The loop's message while its dataset cannot be read (an event when it changes)."""
    if problem == loop.message:
        return {}
    if problem is not None:
        loop_repo.add_event(conn, loop.id, now, problem, "Warning")
    return {"message": problem}


def decide(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, pool: samples.Pool,
           now: int) -> dict[str, Any] | None:
    """What starts a round now (the round record keeps it), or None."""
    n = pool.num_of_samples
    if loop.trigger_requested_at is not None:
        if n == 0:
            loop_repo.add_event(conn, loop.id, now, "Round asked for by "
                                f"{loop.trigger_requested_by or 'a user'} not started: no new "
                                "training samples since the last round", "Warning")
            return None
        return {"num_of_samples": n, "manual": True, "by": loop.trigger_requested_by or ""}
    if n == 0 or (loop.not_before is not None and now < loop.not_before):
        return None
    trig = spec.trainSpec.trigger
    if not common.window_open(trig, now):
        return None
    cond = trig.condition
    if cond is None:
        return {"num_of_samples": n, "rule": f"{loopspec.NUM_OF_SAMPLES} > 0: {n} holds"}
    verdict = triggers.judge(cond.metric, cond.operator, cond.threshold, n)
    return {"num_of_samples": n, "rule": verdict.rule} if verdict.passed else None
