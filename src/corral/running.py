"""What a running server runs: the API's context beside its threads, and, while it holds
the leadership lease, a term of scheduling work.

Every server serves the API. Only the leader schedules: its reconciler, the job kinds'
controllers, the storage component, resource sampling and retention run in a *term*, begun
when this server gains the lease (domain/leadership.py) and ended when it loses it or
stops. Each term's writes are fenced by its epoch, and each term after the first gets a
fresh reconciler, so that it begins as a restarted server would: it adopts the tasks the
last leader started and settles the launches it left under way exactly once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from corral import settings as settings_mod
from corral.api import deps
from corral.domain import leadership, pacing
from corral.executors import base
from corral.kinds import loop
from corral.scheduler import reconciler, sampling
from corral.services import catalog as catalog_mod
from corral.services import environments, leasing, retention, sync
from corral.store import db

log = logging.getLogger(__name__)


#: makes a term's reconciler, fenced by the guard it is given
NewReconciler = Callable[[leasing.Fence], reconciler.Reconciler]


@dataclasses.dataclass
class Platform:
    settings: settings_mod.Settings
    store: db.Store
    executor: base.Executor
    catalog: catalog_mod.Catalog
    reconciler: reconciler.Reconciler
    context: deps.Context
    syncer: sync.Syncer
    kinds: loop.Loop
    locks: list[Any]
    leader: leasing.Leader
    #: the guard of the current term's writes, for the work beside the reconciler's, and
    #: the database as that work writes it
    fence: leasing.Fence
    fenced: db.Store
    #: a reconciler for a new term, fenced by its own guard (in-memory state does not
    #: carry over from one term to the next: each begins as a restart would)
    new_reconciler: NewReconciler
    rec_fence: leasing.Fence
    wake_event: threading.Event = dataclasses.field(default_factory=threading.Event)
    stop_event: threading.Event = dataclasses.field(default_factory=threading.Event)
    threads: list[threading.Thread] = dataclasses.field(default_factory=list)
    #: the current term's threads and what stops them (none while this server follows)
    term_threads: list[threading.Thread] = dataclasses.field(default_factory=list)
    term_stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    terms: int = 0

    def start(self) -> None:
        # The lease first, here: a lone server (or the first of several) schedules at once.
        self._lead_once()
        self.threads = [threading.Thread(target=self._lead_forever, name="corral-leadership",
                                         daemon=True)]
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        """Stop corral's own threads; the jobs' processes keep running for the next start."""
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=10)
        self._end_term()
        self.leader.release()  # a standby takes over at once
        self.context.tensorboards.close()
        self.context.threads.shutdown(wait=False, cancel_futures=True)
        self.executor.close()
        self.store.dispose()
        for lock in self.locks:
            with contextlib.suppress(Exception):
                lock.close()

    def _lead_forever(self) -> None:
        """Renew the lease (or try to take it) every `leader_renew` seconds; begin a term
        when it is gained, end it when it is lost."""
        while not self.stop_event.wait(self.settings.leader_renew):
            try:
                self._lead_once()
            except Exception:
                log.exception("the leadership step failed")

    def _lead_once(self) -> None:
        self.leader.step()
        epoch = self.leader.epoch()
        # A term's threads stop at the first write their guard refuses; the lease may
        # since have been renewed in the same epoch (a renewal held back, past this
        # server's own term, by a transaction waiting on a row): the term begins again.
        if self.term_threads and (self.fence.epoch != epoch
                                  or not all(t.is_alive() for t in self.term_threads)):
            self._end_term()
        if epoch is not None and not self.term_threads and not self.stop_event.is_set():
            self._begin_term(epoch)

    def _begin_term(self, epoch: int) -> None:
        if self.terms:
            self.rec_fence = leasing.Fence(self.leader)
            self.reconciler = self.new_reconciler(self.rec_fence)
        self.terms += 1
        self.rec_fence.epoch = self.fence.epoch = epoch
        self.term_stop = threading.Event()
        self.wake_event.set()  # first pass at once: re-adopt, recover, start queued jobs
        self.term_threads = [
            threading.Thread(target=reconciler.run_forever, name="corral-reconciler",
                             args=(self.reconciler, self.wake_event, self.term_stop,
                                   self.settings.tick_interval),
                             daemon=True),
            threading.Thread(target=self._sample_loop, name="corral-metrics", daemon=True),
            threading.Thread(target=self._retention_loop, name="corral-retention",
                             daemon=True),
            threading.Thread(target=sync.run_forever, name="corral-storage",
                             args=(self.syncer, self.term_stop,
                                   self.settings.storage_interval), daemon=True),
            threading.Thread(target=self.kinds.run_forever, name="corral-kinds",
                             args=(self.term_stop,), daemon=True),
        ]
        for t in self.term_threads:
            t.start()

    def _end_term(self) -> None:
        """This server no longer schedules (it lost its lease, or it stops). Its guards
        refuse the term's writes from now on, even from a thread that outlives the wait
        below and even if the lease is renewed in the same epoch."""
        self.fence.epoch = self.rec_fence.epoch = None
        self.term_stop.set()
        self.wake_event.set()
        self.kinds.wake()
        for t in self.term_threads:
            t.join(timeout=10)
        if self.term_threads:
            self.reconciler.close()
        self.term_threads = []

    def _sample_loop(self) -> None:
        """A sample every `metrics_interval` (stretched where sampling costs more than
        `pacing.SHARE` of a core)."""
        interval = wait = self.settings.metrics_interval
        nodes_due = 0.0  # the nodes' own use: every sampling.NODE_INTERVAL_S at most
        while not self.term_stop.wait(wait):
            cpu = time.thread_time()
            nodes = time.monotonic() >= nodes_due
            if nodes:
                nodes_due = time.monotonic() + max(interval, sampling.NODE_INTERVAL_S)
            try:
                sampling.sample_once(self.fenced, self.executor, self.catalog,
                                     self.reconciler.now(), nodes=nodes)
                wait = pacing.wait_after(interval, time.thread_time() - cpu)
            except leadership.LostLease:
                return
            except Exception:
                log.exception("resource sampling failed")

    def _retention_loop(self) -> None:
        """Retention, applied every `retention_interval` (the first time a minute after
        the term begins: a server that crashes at once never deletes in a loop)."""
        wait = min(60.0, self.settings.retention_interval)
        while not self.term_stop.wait(wait):
            wait = self.settings.retention_interval
            try:
                with self.store.read() as conn:
                    todo = retention.plan(conn, self.settings, self.reconciler.now())
                retention.apply(self.fenced, self.settings, todo, self.reconciler.now())
                if todo.records:
                    self.wake_event.set()  # the scheduler purges them
                environments.collect(self.store, self.settings, time.time())
            except leadership.LostLease:
                return
            except Exception:
                log.exception("applying retention failed")
