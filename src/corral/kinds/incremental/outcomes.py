"""How a round that failed ends, and what it does to its loop.

A failed round gives its training samples back (the next round trains on them too),
counts towards the loop's rounds failed in a row, and makes the loop wait before its next
round: checkPeriodSeconds after the first failure, twice that after the second, and so on
up to an hour. After maxFailedRounds failures in a row the loop stops (Failed) until a
user resumes it; its service keeps serving the current model.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from corral.domain.incremental import loopspec, samples, states
from corral.kinds.incremental import common
from corral.store import kind_rows, loop_repo

LS, RS = states.LoopState, states.RoundState
#: the longest a loop backs off after failed rounds
MAX_BACKOFF_S = 3600


def backoff_s(spec: loopspec.LoopSpec, failed: int) -> int:
    period = spec.trainSpec.trigger.checkPeriodSeconds
    return int(min(period * 2 ** max(failed - 1, 0), MAX_BACKOFF_S))


def fail(conn: sa.Connection, loop: kind_rows.Loop, spec: loopspec.LoopSpec, rnd: kind_rows.Round,
         why: str, now: int, *, give_back: bool = True, **values: Any) -> None:
    """End `rnd` Failed because of `why` (the loop's row is locked by the caller)."""
    loop_repo.move_round(conn, rnd, to=RS.FAILED, ended_at=now,
                         message=why)
    pool = common.pool_of(loop)
    if give_back:
        pool = samples.give_back(pool, [(a, b) for a, b in json.loads(rnd.train_ranges)])
    failed = loop.failed_rounds + 1
    values = {**common.pool_values(pool), "failed_rounds": failed, **values}
    text = f"Round {rnd.number} failed: {why}"
    if failed >= spec.maxFailedRounds:
        loop_repo.move(conn, loop, to=LS.FAILED, now=now,
                       level="Error", event=f"{text}. {failed} round(s) failed in a row "
                       f"(maxFailedRounds {spec.maxFailedRounds}): the loop stopped; resume "
                       "it once fixed", message=f"{failed} round(s) failed in a row; the "
                       f"last: {why}", **values)
        return
    wait = backoff_s(spec, failed)
    loop_repo.move(conn, loop, to=LS.WAITING, now=now, level="Warning",
                   event=f"{text}; the next round starts {wait} s from now at the earliest",
                   not_before=now + wait * 1000, **values)
