"""What the pieces of the incremental-learning controller share: their context, a loop's
spec and owner, its pool of samples, and the server's local time of day."""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
from typing import Any

import sqlalchemy as sa

from corral.domain import errors, specs
from corral.domain.incremental import loopspec, samples, states, triggers
from corral.kinds import owned
from corral.services import datasets, runtime
from corral.storage import objects
from corral.store import db, kind_rows, rows

KIND = states.KIND


@dataclasses.dataclass(frozen=True)
class Ctx:
    store: db.Store
    services: runtime.Runtime
    #: the object stores s3:// datasets and model stores resolve to
    stores: objects.Stores | None = None


def spec_of(loop: kind_rows.Loop) -> loopspec.LoopSpec:
    return loopspec.LoopSpec.model_validate_json(loop.spec)


def owner(loop: kind_rows.Loop) -> owned.Owner:
    return owned.Owner(kind=KIND, id=loop.id, project_id=loop.project_id,
                       user_name=loop.user_name, name=loop.name)


def confine(ctx: Ctx, conn: sa.Connection, loop: kind_rows.Loop) -> datasets.Confine:
    return functools.partial(ctx.services.confine, conn, loop.project_id)


def confine_alone(ctx: Ctx, loop: kind_rows.Loop) -> datasets.Confine:
    """`confine` reading the project's roots in a transaction of its own."""
    def confined(path: str, what: str) -> pathlib.Path:
        with ctx.store.read() as conn:
            return ctx.services.confine(conn, loop.project_id, path, what)
    return confined


def pool_of(loop: kind_rows.Loop) -> samples.Pool:
    return samples.Pool.of(loop.split_upto, loop.train_pending, loop.eval_versions)


def pool_values(pool: samples.Pool) -> dict[str, Any]:
    train, evals = pool.to_json()
    return {"split_upto": pool.split_upto, "train_pending": train, "eval_versions": evals}


def minute_of_day(now: int) -> int:
    """The minute of the day in the server's local time (what timers are written in)."""
    t = time.localtime(now / 1000)
    return t.tm_hour * 60 + t.tm_min


def window_open(trigger: loopspec.Trigger | None, now: int) -> bool:
    if trigger is None or trigger.timer is None:
        return True
    start, end = trigger.timer.minutes()
    return triggers.in_window(start, end, minute_of_day(now))


def submit(ctx: Ctx, conn: sa.Connection, loop: kind_rows.Loop, role: str,
           body: specs.JobCreate, now: int) -> rows.Job | str:
    """The job playing `role` for the loop, or why it could not be submitted (in a
    savepoint, so that a refusal leaves the rest of the transaction whole)."""
    try:
        with conn.begin_nested():
            return owned.submit(conn, ctx.services, owner(loop), role, body, now)
    except errors.CorralError as exc:
        return exc.message


def local_time(now: int) -> str:
    ms = now % 1000
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now / 1000)) + f".{ms:03d}"
