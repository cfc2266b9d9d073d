"""The incremental-learning controller: one pass over the loops that have work to do.

Run by the job kinds' thread (`kinds.loop`) at least every tick_interval and whenever a
job changes or a user acts on a loop. Each loop's pass: its open deploy (files, the
service's acknowledgement), hard examples from its service, its periodic check (which may
start a round), and its current round's next step. Each of these re-reads what it acts
on and applies guarded transitions, so a pass missed or run twice changes nothing.
"""

from __future__ import annotations

import functools

from corral.domain.incremental import states
from corral.kinds import loop
from corral.kinds.incremental import checks, common, deploys, hardexamples, rounds
from corral.services import runtime
from corral.storage import objects
from corral.store import db, loop_repo


class Controller:
    kind = states.KIND

    def __init__(self, store: db.Store, services: runtime.Runtime,
                 stores: objects.Stores | None = None) -> None:
        self.ctx = common.Ctx(store=store, services=services, stores=stores)

    def reconcile(self, now: int) -> bool:
        with self.ctx.store.read() as conn:
            busy = loop_repo.busy_loops(conn)
        more = False
        for loop_id in busy:
            more = loop.isolated(self.ctx.store, self.kind, loop_id, now,
                                 functools.partial(self.step, loop_id, now)) or more
        return more

    def step(self, loop_id: str, now: int) -> bool:
        """One loop's pass; True when it moved (another pass may move it further)."""
        ctx = self.ctx
        loop = self._read(loop_id)
        if loop is None:
            return False
        spec = common.spec_of(loop)
        moved = deploys.advance(ctx, loop, spec, now)
        for act in (hardexamples.ingest, checks.check, rounds.advance):
            fresh = self._read(loop_id) if moved else loop
            if fresh is None or fresh.state not in states.LIVE:
                return moved
            loop = fresh
            moved = act(ctx, loop, spec, now) or moved
        return moved

    def _read(self, loop_id: str) -> loop_repo.kind_rows.Loop | None:
        with self.ctx.store.read() as conn:
            return loop_repo.loop_by_id(conn, loop_id)
