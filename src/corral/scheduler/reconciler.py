"""The reconciler: admit -> place -> launch -> observe -> settle -> finish, one idempotent
pass at a time.

Each pass reads the desired state (the database) and the actual state (the executor) and
applies guarded transitions. Nothing is remembered between passes that the database does
not also hold, except which launches this server watches and which attempts' code it is
copying; so a server killed at any line and started again converges to the same outcome:
a launch recorded without a handle is settled through the executor's `recover` (never run
twice), running tasks are re-adopted, and tasks that ended meanwhile are seen ending.

Each step of a pass lives in a module of its own: observe.py (tasks against the executor),
settle.py (what a job's tasks add up to; what follows a failure is recovery.py's, hangs and
run times are watchdog.py's), cleanup.py (deleted jobs, exported logs),
admission.py (the queue: admit, place, start, preempt, why the rest waits) and
launches.py (starting processes and recording their handles).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import faults, leadership, pacing
from corral.executors import base, routing
from corral.scheduler import (
    admission,
    cleanup,
    launches,
    observe,
    passes,
    recovery,
    settle,
    watchdog,
)
from corral.services import catalog as catalog_mod
from corral.store import db, job_repo

log = logging.getLogger(__name__)
#: seconds a stopping server waits for the logs it still has to export and the deleted
#: jobs' files it still has to remove
FILES_DRAIN_S = 10.0


class Reconciler:
    def __init__(self, store: db.Store, executor: base.Executor, catalog: catalog_mod.Catalog,
                 settings: settings_mod.Settings, *, clock: Callable[[], float] = time.time,
                 environ: Mapping[str, str] | None = None,
                 run_as: tuple[int, int] | None = None,
                 on_catalog: Callable[[catalog_mod.Catalog], None] | None = None,
                 on_change: Callable[[Collection[str], Mapping[str, str]], None] | None = None,
                 on_pass_end: Callable[[Collection[str]], None] | None = None,
                 wake: Callable[[], None] | None = None,
                 hang_timeout: int = faults.DEFAULT_HANG_TIMEOUT,
                 leading: Callable[[], bool] = lambda: True) -> None:
        """`environ`: what tasks inherit (less settings.job_env_deny; default the
        server's); `run_as`: (uid, gid) tasks run as; `on_catalog`: told of the new catalog
        when the executor's nodes change; `on_change`: told of the jobs a pass changed once
        it has committed, with the phase each that moved was moved to (see api/watch.py);
        `on_pass_end`: told of them all once the pass is over (the job kinds' controllers,
        which look up each job's owner: not while the pass still starts what it decided);
        `wake`: asks for a pass soon, from any thread; `hang_timeout`: seconds, for the
        jobs that set none (0: hangs are not looked for); `leading`: whether this
        reconciler's term is still on, by this server's own clock (asked before processes
        are started, adopted or recovered, outside any transaction: a leader that lost its
        lease, or a term since ended, does none of that)."""
        self.store = store
        self.executor = executor
        self.catalog = catalog
        self.settings = settings
        self.clock = clock
        self.on_catalog = on_catalog
        self.on_change = on_change
        self.on_pass_end = on_pass_end
        self.launches = launches.Launches(store, executor, settings, catalog, run_as=run_as,
                                          environ=environ, wake=wake or (lambda: None))
        self.admission = admission.Admission(store, executor, settings)
        self.files = cleanup.Files(store, settings, self.now)
        self.policies = recovery.Policies(hang_timeout)
        self.watchdog = watchdog.Watchdog(settings.runs_dir)
        self.leading = leading

    def now(self) -> int:
        return round(self.clock() * 1000)

    def tick(self) -> bool:
        """One pass; True when there is more to do at once (a queue window used up, or a
        launch that failed and is to be settled).

        The first transaction brings the jobs holding resources up to date, so that a crash
        leaves all of it or none of it; the queue is then decided on and the decisions
        written in a second one (see admission.py); processes are started once both have
        committed, and their handles recorded in a third.
        """
        p = passes.Pass(now=self.now())
        try:
            return self._tick(p)
        finally:
            if p.changed and self.on_pass_end is not None:
                self.on_pass_end(p.changed)

    def _tick(self, p: passes.Pass) -> bool:
        ctx = settle.Context(self.executor, int(self.settings.grace_period * 1000),
                             self.settings.runs_dir, self._node_names, self.policies,
                             self.watchdog)
        self.files.reserve.keep()  # before this pass writes: room for the database
        self.launches.ask_unknown(self.leading)  # not in the transaction: see launches.py
        with self.store.begin() as conn:
            self.launches.take_copied(conn, p)
            observe.observe(conn, p, self.launches)
            holding = [(job, tasks) for job, tasks in job_repo.active_with_tasks(conn)
                       if settle.settle(conn, p, job, tasks, ctx)]
            p.events.write(conn)  # before purging: a purged job's events go with it
            cleanup.purge(conn, p, self.settings.runs_dir)
        self._announce(p)
        self.policies.keep(job.id for job, _ in holding)
        self.watchdog.keep(job.id for job, _ in holding)
        more = False
        try:
            self._refresh_nodes()  # after observing, which may have seen a node leave
            more = self.admission.schedule(p, self.catalog.scheduling_nodes(), holding)
            self._announce(p)
        finally:  # what the first transaction committed is carried out even so
            failed = self._carry_out(p)
        return more or failed

    def _carry_out(self, p: passes.Pass) -> bool:
        """Do what the pass decided, now that it is durable; True if a launch failed."""
        for t, status in p.ended:
            self.launches.release(t, status)
        for job, attempt in p.exports:  # (before a purge of the same job: one thread)
            self.files.export_logs(job, attempt)
        for job_id in p.purged:
            self.files.remove(job_id, self.launches.stopped_copies(job_id))
        if not self.leading():
            # Their tasks stay `launching`: the next leader recovers them (never run).
            raise leadership.LostLease()
        try:
            outcomes = self.launches.launch_copied()
            for job, attempt, tasks in p.launches:
                outcomes += self.launches.start(job, attempt, tasks)
            for job_id, attempt in p.relaunch:
                outcomes += self.launches.relaunch(job_id, attempt)
            if outcomes:
                with self.store.begin() as conn:
                    self.launches.record(conn, outcomes, p.events, self.now())
                    p.events.write(conn)
        except BaseException:
            self.launches.unsettled()
            raise
        if outcomes:
            self._announce(p)
        return any(handle is None for _t, handle, _err in outcomes)

    def _announce(self, p: passes.Pass) -> None:
        """Tell who waits on them of the jobs a committed transaction changed."""
        if p.events.jobs and self.on_change is not None:
            self.on_change(p.events.jobs, p.events.moved)
        p.changed |= p.events.jobs
        p.events.jobs = set()
        p.events.moved = {}

    def _node_names(self) -> frozenset[str]:
        return frozenset(n.name for n in self.executor.nodes())

    def _refresh_nodes(self) -> None:
        """Follow the executor's nodes (a cluster's nodes join and leave)."""
        nodes = tuple(self.executor.nodes())
        if nodes == self.catalog.nodes:
            return
        log.info("nodes now: %s", ", ".join(n.name for n in nodes) or "none")
        self.catalog = catalog_mod.Catalog.build(self.settings, list(nodes),
                                                 routing.origin(self.executor))
        self.launches.catalog = self.catalog
        if self.on_catalog:
            self.on_catalog(self.catalog)

    def close(self) -> None:
        """A server stopping: copies of code under way stop (their launches were never
        sent; the next start makes them again); log exports and removals of deleted jobs'
        files still queued are waited for a while."""
        self.launches.close()
        if not self.files.drain(FILES_DRAIN_S):
            log.warning("stopping with logs still to export or deleted jobs' files still "
                        "to remove: a removal not done leaves the job's run directory")


def run_forever(rec: Reconciler, wake: threading.Event, stop: threading.Event,
                interval: float) -> None:
    """The scheduler's thread: a pass on every wake-up, and at least every `interval`
    (stretched where passes cost more than `pacing.SHARE` of a core); until `stop`, or
    until this server no longer leads."""
    more = False
    wait = interval
    while not stop.is_set():
        if not more:
            wake.wait(wait)
        wake.clear()
        if stop.is_set():
            return
        more = False
        cpu = time.thread_time()
        try:
            more = rec.tick()
            wait = pacing.wait_after(interval, time.thread_time() - cpu)
        except leadership.LostLease as exc:
            log.warning("scheduling stops: %s", exc)
            return
        except sa.exc.OperationalError as exc:
            if retryable(exc):  # a serialization failure or a deadlock: the pass again
                log.info("reconciler pass rolled back (%s): again", exc.orig)
                more = True
                continue
            # database briefly unavailable: next pass
            log.warning("reconciler pass skipped: %s", exc)
        except Exception:
            log.exception("reconciler pass failed")



#: SQLSTATEs of a transaction PostgreSQL rolled back that succeeds when tried again
RETRYABLE = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected


def retryable(exc: sa.exc.DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) in RETRYABLE
