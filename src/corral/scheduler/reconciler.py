"""The reconciler: admit -> place -> launch -> observe -> finish, one idempotent pass a tick.

Each pass reads the desired state (the database) and the actual state (the executor) and
applies guarded transitions. Nothing is remembered between passes that the database does
not also hold, except which processes this server already watches; so a server killed at
any line and started again converges to the same outcome: a launch recorded without a
handle is settled through the executor's `recover` (never run twice), running tasks are
re-adopted, and tasks that ended meanwhile are observed as ended.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import pathlib
import queue
import threading
import time
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import errors, resources, scheduling, specs
from corral.domain import jobs as J
from corral.executors import base, routing
from corral.scheduler import catalog as catalog_mod
from corral.scheduler import launching
from corral.storage import local as storage
from corral.storage import objects
from corral.store import db, repo

log = logging.getLogger(__name__)

LIVE = (J.TaskState.LAUNCHING, J.TaskState.RUNNING)
LIVE_VALUES = frozenset(s.value for s in LIVE)
#: how many queued jobs of each (pool, priority, project) one pass considers: more than a
#: pass can start or backfill on a big cluster, few enough to keep a pass short
QUEUE_WINDOW = 256
#: how many a pass looks at first; it reads the whole window only when that could change
#: what it does: the queue changed (`queue_changed`: a job submitted, stopped, deleted, a
#: quota set), room is left beyond what the first ones took, or FULL_READ_MS have passed
#: since the last whole read (reasons deeper in the queue). A pass after a task's exit, the
#: usual one under load, glances.
QUEUE_GLANCE = 16
FULL_READ_MS = 1_000
#: waiting reasons written per pass at most (the rest on later passes), so that a long
#: queue whose reasons all change at once does not make one long transaction
REASON_WRITES = 256
#: milliseconds between updates of the projects' recent usage (fair share)
USAGE_EVERY_MS = 5_000
#: the end_reason of a running record closed by preemption
PREEMPTED = "preempted"
#: threads copying attempts' code aside from the scheduler's (see _Workers), and the
#: seconds such a thread waits for more work before it ends
PREPARERS = 2
WORKER_IDLE_S = 10.0
#: seconds a stopping server waits for the logs it still has to export and the deleted
#: jobs' files it still has to remove
FILES_DRAIN_S = 10.0
#: how long removing a deleted job's files waits for a stopped copy of its code to end
#: (a copy stops before its next file)
COPY_STOP_WAIT_S = 60.0
#: how many jobs deep a pass hands out behind one running task (see `_plan_follow_ons`),
#: and the seconds after the start of one pass before which the next may not come unless
#: a user asked for it, while such jobs are handed out (see `Reconciler.hold_s`): a task
#: ending then starts its successor in the launcher anyway, so the scheduler takes in
#: several ends per pass instead of one
FOLLOW_DEPTH = 3
FOLLOW_PACE_S = 0.02
#: why a task whose job was stopped before it could start never ran
STOPPED_FIRST = "never started: the job was stopped first"
TERMINAL_VALUES = frozenset(p.value for p in J.TERMINAL)
#: a task launched (its row), and its launch (perhaps still under way), or None and why
#: it failed to start
_Launched = tuple[Any, base.Started | None, str]
#: the same once the launch's outcome is known
_Outcome = tuple[Any, base.Handle | None, str]


@dataclasses.dataclass
class _Pass:
    """What one pass decided, to be done once its transaction has committed: starting
    processes needs the intent to be durable first, and files wait for the rows."""

    launches: list[tuple[Any, int, list[Any]]] = dataclasses.field(default_factory=list)
    relaunch: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    ended: list[tuple[Any, base.Status]] = dataclasses.field(default_factory=list)
    exports: list[tuple[Any, int]] = dataclasses.field(default_factory=list)
    purged: list[str] = dataclasses.field(default_factory=list)
    #: launch ids of tasks to be signalled that have no handle yet (launches under way)
    unsignalled: set[str] = dataclasses.field(default_factory=set)
    #: attempts whose code was copied aside, to be launched once the transaction commits
    prepared: list[_Prep] = dataclasses.field(default_factory=list)
    #: follow-on launches to hand to the executor once their rows are durable
    follow: list[_FollowOn] = dataclasses.field(default_factory=list)
    #: launch ids of tasks whose follow-on launch started while being taken back: nothing
    #: else may be handed out behind them
    spent: set[str] = dataclasses.field(default_factory=set)
    #: the pass's events, written in one statement before its transaction commits
    events: repo.Events = dataclasses.field(default_factory=repo.Events)


@dataclasses.dataclass(eq=False)
class _Prep:
    """An attempt whose code is copied on a thread of its own before its tasks launch."""

    job: Any
    attempt: int
    tasks: list[Any]
    gang: list[str]
    spec: specs.JobCreate
    paths: storage.RunPaths
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: nobody wants it any more (its job stopped, the server is stopping): the copy stops
    cancelled: bool = False
    code: pathlib.Path | None = None
    cwd: pathlib.Path | None = None
    error: str | None = None


@dataclasses.dataclass(eq=False)
class _FollowOn:
    """A queued job handed to the executor ahead, to start the moment a running task ends
    and leaves it the room (see `_plan_follow_ons`): no round trip through the scheduler
    between the one task and the next. The job stays Pending until its task has started;
    its task row is written first, as `launching`, so that a server that stops meanwhile
    settles the launch as any other (see `_renew_launch`)."""

    job: Any  #: its row, with the MASTER_PORT its task is given
    task: Any  #: its one task's row (attempt 1)
    after: str  #: the launch id of the task it follows
    after_job: str  #: that task's job
    #: the launch under way; None once the executor refused it (`error` says why)
    started: Any = None
    error: str = ""
    #: refused for want of the task to follow, not for anything of this job's
    blameless: bool = False


class _Workers:
    """Daemon threads, at most `size`, that run what is handed to them in order; started
    when there is work, ended after WORKER_IDLE_S without any. Kept off the scheduler's
    thread: work on files whose size has no bound (copying a `code_dir`, exporting logs,
    removing a deleted job's files), which there held up every other job meanwhile: exits
    went unrecorded, a terminate unanswered, the free slots empty."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, work: Callable[[], None]) -> None:
        with self._lock:
            self._queue.put(work)
            if self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._run, name=self.name, daemon=True).start()

    def drain(self, timeout: float) -> bool:
        """Wait until what was handed over so far has been done (one thread only: they
        are done in order); False if `timeout` passed first."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            try:
                work = self._queue.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                with self._lock:  # what is put meanwhile finds a thread (or starts one)
                    if self._queue.empty():
                        self._threads -= 1
                        return
                continue
            try:
                work()
            except Exception:  # one chore's bug must not end the thread with work queued
                log.exception("%s: a chore failed", self.name)


def _prepare(prep: _Prep, executor: base.Executor, run_as: tuple[int, int] | None,
             wake: Callable[[], None], ready: storage.ReadyDirs | None = None) -> None:
    """Copy an attempt's code (the snapshot of `code_dir`, its hash, its git commit; and
    where the executor ships code, ship it), then ask for a pass. A server that stops
    leaves a copy unfinished: the next one prepares that attempt again (its launch was
    never sent)."""
    if not prep.cancelled:
        try:
            prep.code, prep.cwd = launching.prepare_attempt(
                prep.paths, prep.attempt, prep.spec.algorithm, run_as,
                cancelled=functools.partial(getattr, prep, "cancelled"), ready=ready)
            if prep.code is not None and not prep.cancelled:
                base.stage_code(executor, prep.tasks[0].node, str(prep.code))
        except errors.CorralError as exc:
            prep.error = exc.message
        except OSError as exc:
            prep.error = str(exc)
        except Exception as exc:  # never leave the attempt waiting on a dead copy
            log.exception("preparing attempt %s of %s failed", prep.attempt, prep.job.id)
            prep.error = f"preparing the attempt failed: {exc}"
    prep.done.set()
    if not prep.cancelled:
        wake()


@dataclasses.dataclass
class Reconciler:
    store: db.Store
    executor: base.Executor
    catalog: catalog_mod.Catalog
    settings: settings_mod.Settings
    clock: Callable[[], float] = time.time
    #: the environment tasks inherit (less settings.job_env_deny); None: the server's, as
    #: it is at the first launch
    environ: Mapping[str, str] | None = None
    #: (uid, gid) tasks run as (launching.task_user); None: the server's user
    run_as: tuple[int, int] | None = None
    #: told of every new catalog when the executor's nodes change (the API's view)
    on_catalog: Callable[[catalog_mod.Catalog], None] | None = None
    #: told of the jobs a pass changed once its transaction has committed (see
    #: api/watch.py): their phase may have changed
    on_change: Callable[[Collection[str]], None] | None = None
    #: asks for a pass soon (from any thread): called when an attempt's code has been
    #: copied aside and its tasks can launch
    wake: Callable[[], None] | None = None
    _known: set[str] = dataclasses.field(default_factory=set)
    _specs: dict[str, specs.JobCreate] = dataclasses.field(default_factory=dict)
    _base_env: dict[str, str] | None = None
    #: launches of the last pass, to be recorded by the next one: each task with its handle,
    #: or the launch still under way (see base.start), or None and why it failed; a
    #: launch not recorded when the server stops is settled by `recover`
    _unrecorded: list[_Launched] = dataclasses.field(default_factory=list)
    #: the launch ids of those still under way at the start of this pass
    _under_way: set[str] = dataclasses.field(default_factory=set)
    #: the queue as the scheduler saw it last pass, by job id: (its row, what decide takes)
    _seen: dict[str, tuple[tuple[Any, ...], scheduling.Queued]] = dataclasses.field(
        default_factory=dict)
    #: when the queue's whole window was last read (see QUEUE_GLANCE), and the queue's
    #: version then
    _full_read_at: int | None = None
    _read_version: int = -1
    _queue_version: int = 0
    #: jobs were submitted since the last pass (see `jobs_added`)
    _added: bool = False
    #: whether the queue was of one stream at that read (a glance reads it the same way)
    _single: bool | None = None
    #: when a read last found the queue empty (see `_schedule`)
    _empty_at: int | None = None
    #: the quotas and the usage rows as last read (or, for usage, written)
    _read: tuple[list[scheduling.Quota], list[Any]] | None = None
    #: whether a deleted job was still stopping at the last purge (see `_purge`)
    _deleting: bool = True
    #: attempts whose code is being copied aside, by (job id, attempt): their tasks stay
    #: `launching` with no launch sent until a pass takes them (see `_take_prepared`)
    _preps: dict[tuple[str, int], _Prep] = dataclasses.field(default_factory=dict)
    #: copies stopped while their threads may still run, by job id: removing the job's
    #: files waits for them (see `_remove_job_dir`)
    _stopped_preps: dict[str, list[_Prep]] = dataclasses.field(default_factory=dict)
    _preparer: _Workers = dataclasses.field(
        default_factory=lambda: _Workers("corral-prepare", PREPARERS))
    #: exports of ended attempts' logs and removals of purged jobs' files, in order
    _files: _Workers = dataclasses.field(default_factory=lambda: _Workers("corral-files", 1))
    #: jobs handed to the executor to follow a running task, by job id (see _FollowOn)
    _follow: dict[str, _FollowOn] = dataclasses.field(default_factory=dict)
    #: jobs whose follow-on launch failed: they start the ordinary way
    _no_follow: set[str] = dataclasses.field(default_factory=set)
    #: launch ids of tasks whose follow-on launch has started, until they are seen ending
    _followed: set[str] = dataclasses.field(default_factory=set)
    #: when the last pass began (time.monotonic(); see `hold_s`)
    _pass_began: float = 0.0
    #: whether the run directories of jobs purged before this start were looked for
    _swept: bool = False
    #: run directories made ahead of first attempts (storage.ReadyDirs)
    _ready: storage.ReadyDirs = dataclasses.field(init=False)
    #: held through each pass (`tick`, `pass_if_idle`): one at a time, whichever thread
    _passing: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._ready = storage.ReadyDirs(self.settings.runs_dir)

    def now(self) -> int:
        return round(self.clock() * 1000)

    @property
    def grace_ms(self) -> int:
        return int(self.settings.grace_period * 1000)

    def tick(self) -> bool:
        """One pass, once no other thread is in one; True when work was left for another
        pass straight away.

        A pass is two write transactions and a read between them. The first brings the
        running jobs up to date (observe, settle, purge; so a crash leaves all of it or none
        of it). The queue is then read in a snapshot and decided on without the write lock,
        which a long queue would otherwise hold for most of the pass, keeping every API
        write waiting; the decisions are applied, each under a guard, in a second short
        transaction (see `_schedule`). Processes are started after the transactions commit,
        and their handles recorded first thing in a later pass, once the executor has them
        (see `_record_launches`).
        """
        with self._passing:
            return self._tick()

    def pass_if_idle(self) -> bool | None:
        """`tick` on the calling thread, if no pass is under way and nothing is handed out
        ahead (passes then wait for one another, see `hold_s`); None when it did not run."""
        if self._follow or not self._passing.acquire(blocking=False):
            return None
        try:
            return self._tick()
        finally:
            self._passing.release()

    def _tick(self) -> bool:
        p = _Pass()
        self._pass_began = time.monotonic()
        if not self._swept:  # the first pass of this server's life
            self._swept = True
            self._files.submit(self._sweep)
        unrecorded, self._unrecorded = self._handles(self._unrecorded, wait=False)
        self._under_way |= {t.launch_id for prep in self._preps.values() for t in prep.tasks}
        self._under_way |= {fo.task.launch_id for fo in self._follow.values()}
        try:
            holding = self._settle_all(p, unrecorded)
        except BaseException:
            self._unrecorded = [(t, None if h is None else base.Done(h), err)
                                for t, h, err in unrecorded] + self._unrecorded
            raise
        try:
            more = self._schedule(p, holding)
        finally:  # what the first transaction committed is carried out even so
            self._after(p)
        # A launch left alone for want of an answer is recorded by a later pass. One whose
        # task is to be signalled wants that pass as soon as its answer comes; so does any
        # while nothing is handed out ahead (passes then come at once, not paced): it is
        # recorded while its task runs, and the pass that sees the task end, which someone
        # may be waiting on, has that much less to do. (While passes are paced, the next
        # pass records it, as it does one answered already or launched synchronously.)
        for t, started, _err in self._unrecorded:
            if started is not None and (t.launch_id in p.unsignalled or not self._follow):
                started.ready(wake=True)
        # A launch that failed is settled by the next pass (nothing else would wake it).
        # Nor would anything wake it for a follow-on launch found started while being taken
        # back: its task may have ended (and said so) before this pass.
        return (more or any(handle is None for _t, handle, _err in self._unrecorded)
                or any(fo.started is None for fo in self._follow.values()) or bool(p.spent))

    def hold_s(self) -> float:
        """Seconds a pass not asked for by a user may still wait for more to happen (0:
        none). While jobs are handed out ahead, a task that ends starts its successor in
        the executor without the scheduler, so nothing waits on the pass: it waits until
        FOLLOW_PACE_S after the one before began, and takes in every end and submission of
        that time at once, instead of one pass each."""
        if not self._follow:
            return 0.0
        return max(0.0, self._pass_began + FOLLOW_PACE_S - time.monotonic())

    def _full_read_due(self, now: int) -> bool:
        """Whether the next decision reads the queue's whole window (see QUEUE_GLANCE)."""
        return (self._queue_version != self._read_version or self._full_read_at is None
                or now - self._full_read_at >= FULL_READ_MS)

    def queue_changed(self) -> None:
        """Say that the queue changed otherwise than through this reconciler (called after
        the change committed): the next pass reads the whole window."""
        self._queue_version += 1

    def jobs_added(self) -> None:
        """Say that jobs were submitted (called after they committed). A new job goes to
        the end of its stream, so the next pass reads the new jobs with its glance at the
        queue, to admit them, and the whole window only when one of them opens a stream
        that a glance would not read (see `_schedule`)."""
        self._added = True

    def close(self) -> None:
        """Record the last pass's launches (a server stopping). Copies of code under way
        stop: their launches were never sent, and the next start prepares them again. Log
        exports and removals of deleted jobs' files still queued are waited for a while."""
        for prep in self._preps.values():
            prep.cancelled = True
        self._ready.close()
        if not self._files.drain(FILES_DRAIN_S):
            log.warning("stopping with logs still to export or deleted jobs' files still "
                        "to remove: a removal not done leaves the job's run directory")
        if self._unrecorded:
            events = repo.Events()
            launched, _ = self._handles(self._unrecorded, wait=True)
            with self.store.begin() as conn:
                self._record_launches(conn, launched, events)
                events.write(conn)
            self._unrecorded = []

    def _handles(self, launched: Sequence[_Launched], *, wait: bool,
                 ) -> tuple[list[_Outcome], list[_Launched]]:
        """Each launch whose outcome is known, with its handle, or None and why it failed;
        and the launches still under way, unless `wait`. A pass does not wait for them (a
        launcher's answer waits for the task's exec) and leaves their tasks alone; the
        next pass records them (see `tick`)."""
        out: list[_Outcome] = []
        pending: list[_Launched] = []
        for t, started, err in launched:
            handle = None
            if started is not None:
                if not wait and not started.ready(wake=False):
                    pending.append((t, started, err))
                    continue
                try:
                    handle = started()
                except errors.CorralError as exc:
                    err = exc.message
                    self._known.discard(t.launch_id)
            out.append((t, handle, err))
        self._under_way = {t.launch_id for t, _s, _e in pending}
        return out, pending

    def _settle_all(self, p: _Pass, unrecorded: Sequence[_Outcome]
                    ) -> list[tuple[Any, list[Any]]]:
        """The first transaction: the jobs that hold resources once settled, with their
        tasks."""
        with self.store.begin() as conn:
            self._record_launches(conn, unrecorded, p.events)
            if self._preps:
                self._take_prepared(conn, p)
            # Those started first, so that one whose task has ended already is seen
            # ending; and again if a task seen ending had one (it ended meanwhile).
            if self._follow:
                self._follow_ons(conn, p)
            self._observe(conn, p)
            if self._follow and self._follow_ons(conn, p):
                self._observe(conn, p)
            active = repo.active_with_tasks(conn)
            if self._follow and any(job.id in self._follow for job, _tasks in active):
                self._stopped_follow_ons(conn, p, active)
                active = repo.active_with_tasks(conn)
            holding = [(job, tasks) for job, tasks in active
                       if self._settle(conn, p, job, tasks)]
            p.events.write(conn)  # before purging: a purged job's events go with it
            if self._deleting or self._full_read_due(self.now()):
                self._purge(conn, p)
        self._announce(p)
        return holding

    def _announce(self, p: _Pass) -> None:
        """Tell who waits on them of the jobs the transaction just committed changed."""
        if p.events.jobs and self.on_change is not None:
            self.on_change(p.events.jobs)
        p.events.jobs = set()

    def _refresh_nodes(self) -> None:
        """Follow the executor's nodes (a cluster's nodes join and leave)."""
        nodes = tuple(self.executor.nodes())
        if nodes == self.catalog.nodes:
            return
        log.info("nodes now: %s", ", ".join(n.name for n in nodes) or "none")
        self.catalog = catalog_mod.Catalog.build(self.settings, list(nodes),
                                                 routing.origin(self.executor))
        if self.on_catalog:
            self.on_catalog(self.catalog)

    def _after(self, p: _Pass) -> None:
        for row, status in p.ended:
            assert status.handle is not None
            if _ended_badly(row, status):  # nothing of a stopped or failed task stays
                self.executor.clean_up(status.handle)
            self.executor.release(status.handle)
            self._known.discard(status.handle.launch_id)
            self._followed.discard(status.handle.launch_id)
        for job, attempt in p.exports:  # (before a purge of the same job: one thread)
            export = self._spec(job).spec.log_export_path
            dest = export and (export.host_path or export.obs_url)
            if dest and not objects.is_remote(dest):  # object storage: scheduler.finishing
                self._files.submit(functools.partial(self._export_logs, job.id, attempt,
                                                     dest))
        for job_id in p.purged:
            copies = [prep.done for prep in self._stopped_preps.pop(job_id, ())]
            self._files.submit(functools.partial(
                _remove_job_dir, storage.RunPaths(self.settings.runs_dir, job_id), copies))
        for job_id in [j for j, preps in self._stopped_preps.items()
                       if all(prep.done.is_set() for prep in preps)]:
            del self._stopped_preps[job_id]
        results = [r for job, seq, tasks in p.launches
                   for r in self._launch_tasks(job, seq, tasks)]
        results += [self._launch_one(prep.job, prep.spec, prep.paths, t, prep.code, prep.cwd,
                                     prep.gang)
                    for prep in p.prepared for t in prep.tasks]
        for job_id, attempt in p.relaunch:
            results += self._relaunch(job_id, attempt)
        self._unrecorded += results
        for fo in p.follow:
            self._send_follow_on(fo)

    # --- observe --------------------------------------------------------------------------

    def _observe(self, conn: sa.Connection, p: _Pass) -> None:
        """Bring every task that may have a process up to date with the executor."""
        now = self.now()
        for row in repo.live_tasks(conn):
            status = self._status_of(row)
            if status is None:
                continue
            if status.state is base.State.NOT_STARTED:
                if self._renew_launch(conn, row, now):
                    p.relaunch.add((row.job_id, row.attempt))
            elif status.state is not base.State.RUNNING or row.state != J.TaskState.RUNNING:
                if row.job_phase == J.Phase.PENDING.value:
                    # A follow-on launch that ran while no server was there to see it.
                    self._begin(conn, p, row.job_id, row.attempt, row.node, now)
                self._record(conn, p.events, row, status, now)
                if status.handle and status.state is not base.State.RUNNING:
                    p.ended.append((row, status))

    def _status_of(self, row: Any) -> base.Status | None:
        """The task's status; None for a launch still under way (nothing to learn yet)."""
        if row.state == J.TaskState.LAUNCHING.value:
            if row.launch_id in self._under_way:
                return None
            return self.executor.recover(self._bare_spec(row))
        handle = base.Handle.loads(row.handle)
        if handle.launch_id in self._known:
            return self.executor.poll(handle)
        status = self.executor.adopt(handle)
        if status.state is base.State.RUNNING:
            self._known.add(handle.launch_id)
            log.info("adopted %s/%s pid %s", row.job_id, row.name, handle.pid)
        return status

    def _bare_spec(self, row: Any) -> base.LaunchSpec:
        paths = storage.RunPaths(self.settings.runs_dir, row.job_id)
        return base.LaunchSpec(
            job_id=row.job_id, task=row.name, attempt=row.attempt, launch_id=row.launch_id,
            argv=(), cwd="", env={}, log_path=str(paths.log_path(row.attempt, row.name)),
            control_dir=str(paths.control_dir(row.attempt)), node=row.node)

    def _renew_launch(self, conn: sa.Connection, row: Any, now: int) -> bool:
        """A launch that never ran: give it a new launch id if its job still wants it."""
        if row.job_phase == J.Phase.PENDING.value:  # a follow-on launch: the job waits on
            repo.delete_tasks(conn, row.job_id, row.attempt)
            return False
        if row.job_phase != J.Phase.RUNNING.value:
            _never_started(conn, [row], now)
            return False
        return repo.update_task(conn, row.job_id, row.attempt, row.name, expect=LIVE,
                                launch_id=launching.new_launch_id())

    def _take_prepared(self, conn: sa.Connection, p: _Pass) -> None:
        """The attempts whose code is copied aside. One whose job was stopped (or is being
        preempted) meanwhile never starts: its copy stops and its tasks are settled as never
        started, at once, without waiting for the copy. One whose copy is done launches in
        this pass; one whose copy failed fails to start, as it would have inline."""
        now = self.now()
        for key, prep in list(self._preps.items()):
            job = repo.job_by_id(conn, key[0])
            if job is None or job.phase != J.Phase.RUNNING.value \
                    or job.preempt_requested_at is not None:
                prep.cancelled = True
                del self._preps[key]
                if not prep.done.is_set():  # its thread may still make directories
                    self._stopped_preps.setdefault(key[0], []).append(prep)
                _never_started(conn, prep.tasks, now)
            elif prep.done.is_set():
                del self._preps[key]
                if prep.error is not None:
                    self._record_launches(conn, [(t, None, prep.error) for t in prep.tasks],
                                          p.events)
                else:
                    p.prepared.append(prep)

    def _record(self, conn: sa.Connection, events: repo.Events, row: Any, status: base.Status,
                now: int) -> None:
        handle = status.handle.dumps() if status.handle else row.handle
        if status.state is base.State.RUNNING:
            if status.handle:
                self._known.add(status.handle.launch_id)
            repo.update_task(conn, row.job_id, row.attempt, row.name, expect=LIVE,
                             state=J.TaskState.RUNNING.value, handle=handle, launched_at=now)
        elif status.state is base.State.EXITED:
            code = status.exit_code if status.exit_code is not None else -1
            repo.update_task(conn, row.job_id, row.attempt, row.name, expect=LIVE,
                             state=J.TaskState.EXITED.value, exit_code=code,
                             handle=handle, ended_at=now)
            events.add(row.job_id, now, f"Task {row.name} exited with code {code}",
                       level="Info" if code == 0 else "Warning", source="Task")
        elif status.state is base.State.NODE_LOST:
            repo.update_task(conn, row.job_id, row.attempt, row.name, expect=LIVE,
                             state=J.TaskState.NODE_LOST.value, message=status.message,
                             handle=handle, ended_at=now)
            events.add(row.job_id, now, f"Task {row.name} lost with its node "
                       f"{row.node}: {status.message}", level="Warning", source="Task")
        else:
            repo.update_task(conn, row.job_id, row.attempt, row.name, expect=LIVE,
                             state=J.TaskState.LOST.value, message=status.message,
                             handle=handle, ended_at=now)
            events.add(row.job_id, now, f"Task {row.name} lost: {status.message}",
                       level="Error", source="Task")

    # --- settle: decide what each active job's tasks add up to ----------------------------

    def _settle(self, conn: sa.Connection, p: _Pass, job: Any, tasks: Sequence[Any]) -> bool:
        """Act on what an active job's tasks add up to; True if it still holds resources."""
        live = [t for t in tasks if t.state in LIVE]
        if job.phase == J.Phase.TERMINATING.value:
            if live:
                self._signal(conn, p, live)
                return True
            return not self._finish(conn, p, job, tasks, J.Phase.TERMINATED,
                                    J.SecondaryPhase.TERMINATED,
                                    end_reason="terminated by user", message="Job terminated",
                                    failure=(J.FailureClass.TERMINATED, "stopped on request"))
        failed = [t for t in tasks if _failed(t)]
        # A victim that was signalled is requeued however it exited (a clean exit on SIGTERM
        # is a checkpoint, not the end); one that finished before the signal completed.
        if job.preempt_requested_at is not None and (
                live or failed or any(t.kill_sent_at is not None for t in tasks)):
            if live:
                self._signal(conn, p, live)
                return True
            return not self._requeue(conn, p, job, self.now(), end_reason=PREEMPTED,
                                     related_task=None)
        if live:
            if failed:  # one task of the gang failed: the others stop before any restart
                self._signal(conn, p, live)
            return True
        lost = [t for t in failed if t.state == J.TaskState.NODE_LOST.value]
        if lost:  # not the job's fault: place it again, its retries untouched
            return not self._requeue(conn, p, job, self.now(), end_reason="node lost",
                                     related_task=lost[0].name)
        if failed:
            return self._attempt_failed(conn, p, job, tasks, failed)
        return not self._finish(conn, p, job, tasks, J.Phase.COMPLETED,
                                J.SecondaryPhase.COMPLETED,
                                end_reason="job completed", message="Job completed")

    def _signal(self, conn: sa.Connection, p: _Pass, live: Sequence[Any]) -> None:
        """SIGTERM each live task once, SIGKILL when the grace period has passed."""
        now = self.now()
        for t in live:
            if not t.handle:  # a launch still to be settled by the next observe
                p.unsignalled.add(t.launch_id)
                continue
            handle = base.Handle.loads(t.handle)
            if t.kill_sent_at is None:
                self.executor.cancel(handle, force=False)
                repo.update_task(conn, t.job_id, t.attempt, t.name, kill_sent_at=now)
            elif now - t.kill_sent_at >= self.grace_ms:
                self.executor.cancel(handle, force=True)

    def _attempt_failed(self, conn: sa.Connection, p: _Pass, job: Any, tasks: Sequence[Any],
                        failed: Sequence[Any]) -> bool:
        # The cause is a task that failed by itself, not one corral stopped because of it.
        first = min(failed, key=lambda t: (t.kill_sent_at is not None, t.ended_at or 0, t.rank))
        fclass, reason = _failure_of(first)
        restarts = sum(1 for a in repo.attempts_of(conn, job.id)
                       if a.start_type == J.StartType.RESTARTED.value)
        if restarts < job.retry_limit:
            self._restart(conn, p, job, tasks, first, reason, restarts + 1)
            return True
        phase, secondary = {
            J.FailureClass.LOST: (J.Phase.ABNORMAL, J.SecondaryPhase.LOST),
            J.FailureClass.LAUNCH_ERROR: (J.Phase.FAILED, J.SecondaryPhase.CREATE_FAILED),
        }.get(fclass, (J.Phase.FAILED, J.SecondaryPhase.FAILED))
        return not self._finish(conn, p, job, tasks, phase, secondary, end_reason=reason,
                                related=first.name, level="Error",
                                message=f"Job failed: {first.name} {reason}",
                                failure=(fclass, f"{first.name}: {reason}"))

    def _restart(self, conn: sa.Connection, p: _Pass, job: Any, tasks: Sequence[Any],
                 first: Any, reason: str, retry: int) -> None:
        now = self.now()
        old = tasks[0].attempt
        current = repo.job_by_id(conn, job.id, lock=True)
        if current is None or current.phase != J.Phase.RUNNING.value:
            return  # stopped meanwhile: a stopped job is never restarted
        repo.close_attempt(conn, job.id, old, now=now, end_reason=reason,
                           related_task=first.name, end_recover=J.EndRecover.PROC_RESTART)
        repo.open_attempt(conn, job.id, old + 1, now, J.StartType.RESTARTED)
        rows = [_task_row(job.id, old + 1, t.rank, t.name, t.node, t.gpu_ids, t.accel_ids)
                for t in tasks]
        repo.insert_tasks(conn, rows)
        p.events.add(job.id, now, f"Restarting after {first.name} {reason} "
                     f"(retry {retry} of {job.retry_limit})", level="Warning")
        p.exports.append((job, old))
        p.launches.append((job, old + 1, [types.SimpleNamespace(**r) for r in rows]))

    def _requeue(self, conn: sa.Connection, p: _Pass, job: Any, now: int, *, end_reason: str,
                 related_task: str | None) -> bool:
        """Put a job whose processes have all stopped back in the queue, at its old place.

        Its running record closes with `end_reason` and `end_recover: job_reschedule`; the
        next one starts as `init_or_rescheduled`, so this never spends its retry budget
        (only in-place restarts do). False if the job had moved on meanwhile.
        """
        attempt = repo.latest_attempt(conn, job.id)
        self.queue_changed()  # back in the queue, perhaps in a stream of its own
        if not repo.transition(conn, job.id, J.Phase.PENDING, J.SecondaryPhase.QUEUING,
                               now=now, message=f"Job requeued: {end_reason}",
                               level="Warning", events=p.events,
                               fields={"preempt_requested_at": None, "borrowed": False,
                                       "wait_reason": None, "wait_code": None,
                                       "master_port": None}):
            return False
        if attempt:
            repo.close_attempt(conn, job.id, attempt, now=now, end_reason=end_reason,
                               related_task=related_task,
                               end_recover=J.EndRecover.JOB_RESCHEDULE)
            p.exports.append((job, attempt))
        return True

    def _finish(self, conn: sa.Connection, p: _Pass, job: Any, tasks: Sequence[Any],
                phase: J.Phase, secondary: J.SecondaryPhase, *, end_reason: str,
                message: str, related: str | None = None, level: str = "Info",
                failure: tuple[J.FailureClass, str] | None = None) -> bool:
        """Move the job to its end phase and close its running record; False if it had
        already moved on (a terminate racing the end, say)."""
        now = self.now()
        fields: dict[str, Any] = {"end_time": now, "wait_reason": None, "wait_code": None,
                                  "preempt_requested_at": None}
        if failure:
            fields.update(failure_class=failure[0].value, failure_message=failure[1])
        # The tasks are those of the latest attempt (an attempt opens with its tasks).
        attempt = tasks[0].attempt if tasks else repo.latest_attempt(conn, job.id)
        if not repo.transition(conn, job.id, phase, secondary, now=now, message=message,
                               level=level, fields=fields, events=p.events):
            return False
        if attempt:
            repo.close_attempt(conn, job.id, attempt, now=now, end_reason=end_reason,
                               related_task=related)
            p.exports.append((job, attempt))
        return True

    def _export_logs(self, job_id: str, attempt: int, dest: str) -> None:
        """Copy an ended attempt's logs to the job's local log_export_path (on the files
        thread); a failure is told in the job's events."""
        try:
            storage.export_logs(storage.RunPaths(self.settings.runs_dir, job_id), attempt,
                                storage.local_path(dest, "log_export_path"))
        except (OSError, errors.CorralError) as exc:
            try:
                with self.store.begin() as conn:
                    repo.add_event(conn, job_id, self.now(), f"Log export failed: {exc}",
                                   level="Warning")
            except sa.exc.SQLAlchemyError:  # purged meanwhile, or the database is away
                log.warning("exporting the logs of %s attempt %s failed: %s", job_id,
                            attempt, exc)

    # --- admit, place and launch ----------------------------------------------------------

    def _schedule(self, p: _Pass, holding: Sequence[tuple[Any, Sequence[Any]]]) -> bool:
        """Start what fits, preempt what must make room, say why the rest waits; True if a
        queue window was used up (look again at once).

        The queue is read in a snapshot taken after the first transaction committed (a job
        put back in the queue there is served in its old place, on the nodes there are
        now) and decided on outside any transaction. By the time the decisions are written
        the API may have changed a job, so each write is guarded and one whose guard fails
        is dropped for this pass (the next one decides again): a job starts only if it
        still waits and is not deleted, a reason is written only for a job that still
        waits, a victim is preempted only if it still runs. Nothing can over-commit a node:
        only this reconciler takes capacity (it is the one writer of starts, and its passes
        run one at a time), and the API can only free it later (a job it stops holds its
        resources until this reconciler has seen its processes go), so the capacity decide
        saw free is still free when the starts are written.

        Most passes only glance at the first QUEUE_GLANCE jobs of each stream (see there):
        a pass after an exit on a full machine can start the queue's next job and nothing
        else, and reading hundreds of unchanged rows to learn that cost more than the rest
        of the pass.
        """
        now = self.now()
        running = [_running(job, tasks) for job, tasks in holding]
        # After settling: observing may just have seen a node leave.
        self._refresh_nodes()
        nodes = self.catalog.scheduling_nodes()
        version = self._queue_version
        full = self._full_read_due(now)
        added, self._added = self._added, False
        fresh: list[Any] = []  # new jobs beyond the glance, to admit
        if (self._empty_at is not None and now - self._empty_at < FULL_READ_MS
                and not (full or added or self._read is None)):
            # Still empty: nothing was submitted or put back in it since a read found it so
            # (the pass after each job's end, in a sequence of single jobs).
            queue: Sequence[Any] = []
        else:
            queue, full, fresh = self._read_queue(full, added)
            self._empty_at = None if queue else now
        limit = QUEUE_WINDOW if full else QUEUE_GLANCE
        assert self._read is not None
        quotas, usage_rows = self._read
        usage, new_usage = self._usage(usage_rows, running, nodes, now)
        if new_usage is not None:
            self._read = (quotas, [types.SimpleNamespace(**r) for r in new_usage])
        if not queue:
            if new_usage is not None:
                with self.store.begin() as conn:
                    repo.save_usage(conn, new_usage)
            self._full_read_at, self._read_version = now, version
            return False
        queued, by_id, new, window_ends = self._queued(queue, limit, keep=not full)
        d = scheduling.decide(queued, nodes, running, quotas, usage)
        if not full and any(pool in d.roomy for pool in window_ends.values()):
            # A job beyond the first ones could start in what is left: decide on them all.
            with self.store.read() as conn:
                queue = repo.queued(conn, limit=QUEUE_WINDOW, single=self._single)
            full, limit = True, QUEUE_WINDOW
            queued, by_id, new, window_ends = self._queued(queue, limit)
            d = scheduling.decide(queued, nodes, running, quotas, usage)
        if full:
            self._full_read_at, self._read_version = now, version
            fresh = []
        new += fresh  # (admitted without a reason: the next whole read gives theirs)
        plan, taking = self._plan_follow_ons(queued, by_id, holding, running, nodes, quotas,
                                             usage, d)
        launches = []
        live = {job.id: (job, tasks) for job, tasks in holding}
        with self.store.begin() as conn:
            if new_usage is not None:
                repo.save_usage(conn, new_usage)
            admitted = self._admit(conn, p, new, d.waits, now)
            for a in d.starts:
                fo = self._follow.get(a.job_id)
                if fo is not None and not self._take_back(conn, p, fo):
                    continue  # it has just started, in the room of the task it followed
                started = self._record_start(conn, p, a, now)
                if started:
                    launches.append(started)
            # Before any victim is signalled: what follows a victim is taken back here (a
            # pass that preempts hands nothing out), and must not start in its room.
            staged = (self._apply_follow_ons(conn, p, plan, taking, holding, launches)
                      if plan or self._follow else [])
            for v in d.preempts:
                self._preempt(conn, p, live[v.job_id], v, by_id[v.for_job], now)
            self._note_waiting(conn, p, d.waits, by_id, now, admitted)
            p.events.write(conn)
        self._announce(p)
        p.launches += launches  # once their rows are durable
        p.follow += staged
        self._follow.update((fo.job.id, fo) for fo in staged)
        # Jobs past a stream's window were not looked at: look again at once when this
        # pass started even the last job of a full window (it still had room at its end);
        # otherwise they wait for the next pass like the rest of the window.
        started_ids = {a.job_id for a in d.starts}
        return any(job_id in started_ids for job_id in window_ends)

    def _read_queue(self, full: bool, added: bool) -> tuple[Sequence[Any], bool, list[Any]]:
        """The queue's window (`full`) or a glance at it, in one snapshot; with `added`, the
        new jobs beyond the glance too. Returns the queue, whether it was read whole (a new
        job that opens a stream makes it so) and those new jobs."""
        fresh: list[Any] = []
        with self.store.read() as conn:
            if full:
                self._single = repo.single_stream(conn)
            queue = repo.queued(conn, limit=QUEUE_WINDOW if full else QUEUE_GLANCE,
                                single=self._single)
            if added and not full:
                ids = {j.id for j in queue}
                fresh = [j for j in repo.new_jobs(conn, QUEUE_WINDOW) if j.id not in ids]
                if self._single and len({(j.pool_id, j.priority, j.project_id)
                                         for j in (*queue, *fresh)}) > 1:
                    # A new stream: a glance at one stream would not see its jobs.
                    full, fresh = True, []
                    self._single = repo.single_stream(conn)
                    queue = repo.queued(conn, limit=QUEUE_WINDOW, single=self._single)
            # Quotas change through the API (which says so): a glance keeps the last ones.
            # Usage is this reconciler's to write: read on full reads in case, else kept.
            if full or self._read is None:
                self._read = ([_quota(q) for q in repo.quotas(conn)], list(repo.usage(conn)))
        return queue, full, fresh

    def _admit(self, conn: sa.Connection, p: _Pass, new: Sequence[Any],
               waits: Sequence[scheduling.Wait], now: int) -> set[str]:
        """Creating -> Pending for every new job; one that waits gets its reason in the same
        write. Returns the jobs whose reason was written here."""
        if not new:
            return set()
        reasons = {w.job_id: w for w in waits}
        admitted = set()
        for j in new:
            w = reasons.get(j.id)
            fields = None if w is None else {"wait_reason": w.message,
                                             "wait_code": w.code.value}
            if repo.transition(conn, j.id, J.Phase.PENDING, J.SecondaryPhase.QUEUING,
                               now=now, message="Job queued", fields=fields,
                               events=p.events) and w is not None:
                admitted.add(j.id)
                if j.wait_code != w.code:
                    p.events.add(j.id, now, w.message, level=_wait_level(w))
        return admitted

    def _queued(self, queue: Sequence[Any], limit: int, keep: bool = False,
                ) -> tuple[list[scheduling.Queued], dict[str, Any], list[Any], dict[str, str]]:
        """The queue as decide takes it, its rows by id, the new jobs (Creating) and the
        last job of each stream whose `limit` was reached (with its pool), in one loop over
        a queue that may be long.

        Most of a long queue is the same rows pass after pass: what was built from a row is
        used again while the row is unchanged. `keep`: a glance at the queue's first jobs,
        which keeps what was built for the rest of the window."""
        seen = self._seen
        if not keep:
            self._seen = {}
        creating = J.Phase.CREATING.value
        out, by_id, new = [], {}, []
        streams: dict[tuple[str, int, str], list[Any]] = {}  # stream -> [jobs, last id]
        for j in queue:
            job_id = j.id
            row = tuple(j)
            known = seen.get(job_id)
            q = known[1] if known is not None and known[0] == row else _queued(j)
            self._seen[job_id] = (row, q)
            out.append(q)
            by_id[job_id] = j
            if j.phase == creating:
                new.append(j)
            stream = streams.setdefault((q.pool, q.priority, q.project), [0, None])
            stream[0] += 1
            stream[1] = job_id
        ends = {last: pool for (pool, _, _), (n, last) in streams.items() if n == limit}
        return out, by_id, new, ends

    def _preempt(self, conn: sa.Connection, p: _Pass, victim: tuple[Any, Sequence[Any]],
                 v: scheduling.Preempt, for_job: Any, now: int) -> None:
        """Stop a victim (SIGTERM now, SIGKILL after the grace period); it is requeued once
        its processes have gone."""
        job, tasks = victim
        if not repo.request_preempt(conn, job.id, now):
            return  # it stopped or was stopped meanwhile
        why = ("reclaiming capacity it borrowed beyond its project's quota" if v.reclaim
               else f"priority {for_job.priority} over its {job.priority}")
        # Another project's job is described, never named: events are the victim's.
        who = (f"job {for_job.id}" if for_job.project_id == job.project_id
               else f"a priority-{for_job.priority} job of another project")
        p.events.add(job.id, now, f"Preempted for {who} ({why}): "
                     f"stopping it with a grace period of {self.settings.grace_period:g} s; "
                     "it is requeued and keeps its place", level="Warning")
        self._signal(conn, p, [t for t in tasks if t.state in LIVE])

    def _note_waiting(self, conn: sa.Connection, p: _Pass, waits: Sequence[scheduling.Wait],
                      by_id: Mapping[str, Any], now: int, admitted: set[str]) -> None:
        """Record why each job waits; an event whenever the kind of reason changes."""
        writes = 0
        for w in waits:
            row = by_id[w.job_id]
            if row.wait_code == w.code and row.wait_reason == w.message:  # (a StrEnum)
                continue
            if w.job_id in admitted:
                continue
            writes += 1
            if writes > REASON_WRITES:
                return
            if not repo.note_wait(conn, w.job_id, now=now, reason=w.message,
                                  code=w.code.value):
                continue  # it no longer waits (stopped meanwhile)
            if row.wait_code != w.code:
                p.events.add(w.job_id, now, w.message, level=_wait_level(w))

    def _usage(self, rows: Sequence[Any], running: Sequence[scheduling.Running],
               nodes: Sequence[scheduling.Node], now: int,
               ) -> tuple[dict[tuple[str, str], float], list[dict[str, Any]] | None]:
        """Each project's recent mean dominant share per pool (updated every few seconds):
        an exponential moving average over `fair_share_window` of what it held; and the
        rows to save when it was updated (None otherwise)."""
        usage = {(r.project_id, r.pool_id): r.share for r in rows}
        last = max((r.updated_at for r in rows), default=None)
        if last is not None and now - last < USAGE_EVERY_MS:
            return usage, None
        totals: dict[str, resources.Resources] = {}
        for n in nodes:
            totals[n.pool] = totals.get(n.pool, resources.ZERO) + n.capacity
        held: dict[tuple[str, str], resources.Resources] = {}
        for r in running:
            key = (r.project, r.pool)
            held[key] = held.get(key, resources.ZERO) + r.per_task.times(len(r.slots))
        keep = math.exp(-(now - last) / 1000 / self.settings.fair_share_window) if last else 1.0
        out = {}
        for key in set(usage) | set(held):
            total = totals.get(key[1])
            share = resources.dominant_share(held.get(key, resources.ZERO), total) if total \
                else 0.0
            value = usage.get(key, 0.0) * keep + share * (1 - keep)
            if value > 1e-6 or key in held:
                out[key] = value
        if not out and not rows:  # nothing held, nothing to forget: nothing to write
            return out, None
        return out, [{"project_id": k[0], "pool_id": k[1], "share": v, "updated_at": now}
                     for k, v in out.items()]

    def _record_start(self, conn: sa.Connection, p: _Pass, a: scheduling.Start,
                      now: int) -> tuple[Any, int, list[Any]] | None:
        nodes = ", ".join(sorted({s.node for s in a.slots}))
        port = launching.free_port()
        job = repo.job_by_id(conn, a.job_id)
        notes = "".join(((" in a gap (backfill)" if a.backfill else ""),
                         (" on borrowed capacity: it may be preempted to give it back"
                          if a.borrowed else "")))
        if job is None or job.deleted_at is not None or not repo.transition(
                conn, a.job_id, J.Phase.RUNNING, J.SecondaryPhase.RUNNING, now=now,
                message=f"Job started: {len(a.slots)} task(s) on {nodes}{notes}",
                fields={"start_time": job.start_time or now, "wait_reason": None,
                        "wait_code": None, "master_port": port, "borrowed": a.borrowed,
                        "preempt_requested_at": None}, events=p.events):
            return None
        # A job that never started has no running record yet (start_time is set with its
        # first and kept through requeues).
        seq = 1 if job.start_time is None else repo.latest_attempt(conn, a.job_id) + 1
        repo.open_attempt(conn, a.job_id, seq, now, J.StartType.INIT_OR_RESCHEDULED)
        tasks = [_task_row(a.job_id, seq, rank, name, slot.node,
                           ",".join(str(g) for g in slot.gpu_ids),
                           resources.device_ids_json(slot.accel_ids))
                 for rank, (name, slot) in enumerate(zip(J.task_names(len(a.slots)), a.slots,
                                                         strict=True))]
        repo.insert_tasks(conn, tasks)
        started = types.SimpleNamespace(**{**job._mapping, "master_port": port})
        return started, seq, [types.SimpleNamespace(**t) for t in tasks]

    def _relaunch(self, job_id: str, attempt: int) -> list[_Launched]:
        """Start the tasks of an attempt still in state launching (after a crash)."""
        with self.store.read() as conn:
            job = repo.job_by_id(conn, job_id)
            every = repo.tasks_of(conn, job_id, attempt)
        tasks = [t for t in every if t.state == J.TaskState.LAUNCHING.value]
        if job is None or not tasks:
            return []
        return self._launch_tasks(job, attempt, tasks, gang=[t.node for t in every])

    def _launch_tasks(self, job: Any, attempt: int, tasks: Sequence[Any],
                      gang: Sequence[str] | None = None,
                      ) -> list[_Launched]:
        spec = self._spec(job)
        gang = [t.node for t in sorted(tasks, key=lambda t: t.rank)] if gang is None else gang
        paths = storage.RunPaths(self.settings.runs_dir, job.id)
        if launching.needs_snapshot(paths, attempt, spec.algorithm) or (
                spec.algorithm.code_dir and base.ships_code(self.executor)):
            # Copied aside, and shipped where the executor ships code (a relaunch after a
            # restart finds the snapshot made but not shipped, which the launch would then
            # do on this thread); a later pass launches the tasks (see `_take_prepared`).
            prep = _Prep(job=job, attempt=attempt, tasks=list(tasks), gang=list(gang),
                         spec=spec, paths=paths)
            self._preps[(job.id, attempt)] = prep
            self._preparer.submit(functools.partial(_prepare, prep, self.executor,
                                                    self.run_as, self._wake, self._ready))
            return []
        try:
            code, cwd = launching.prepare_attempt(paths, attempt, spec.algorithm, self.run_as,
                                                  ready=self._ready)
        except (errors.CorralError, OSError) as exc:
            return [(t, None, getattr(exc, "message", str(exc))) for t in tasks]
        return [self._launch_one(job, spec, paths, t, code, cwd, gang) for t in tasks]

    def _wake(self) -> None:
        if self.wake is not None:
            self.wake()

    def _spec(self, job: Any) -> specs.JobCreate:
        """A job's parsed spec; specs never change once submitted, so they are kept."""
        spec = self._specs.get(job.id)
        if spec is None:
            if len(self._specs) > 10_000:
                self._specs.clear()
            spec = self._specs[job.id] = repo.job_spec(job)
        return spec

    def _inherited(self) -> dict[str, str]:
        """What every task's environment starts from: the server's as it was at the first
        launch, less what never reaches a job (filtered once: anew, it cost about a fifth
        of building each launch)."""
        if self._base_env is None:
            self._base_env = launching.base_env(
                os.environ if self.environ is None else self.environ,
                self.settings.job_env_deny)
        return self._base_env

    def _launch_spec(self, job: Any, spec: Any, paths: storage.RunPaths, t: Any,
                     code: Any, cwd: Any, gang: Sequence[str]) -> base.LaunchSpec:
        return launching.launch_spec(
            paths=paths, cat=self.catalog, spec=spec, job_id=job.id, attempt=t.attempt,
            task=t.name, rank=t.rank, launch_id=t.launch_id, node=t.node,
            gpu_ids=[int(g) for g in t.gpu_ids.split(",") if g],
            master_port=job.master_port or 29500, code=code, cwd=cwd,
            inherited=self._inherited(), run_as=self.run_as,
            demand=_per_task(job), gang=gang,
            accel_ids=resources.parse_device_ids(t.accel_ids))

    def _launch_one(self, job: Any, spec: Any, paths: storage.RunPaths, t: Any,
                    code: Any, cwd: Any,
                    gang: Sequence[str]) -> _Launched:
        ls = self._launch_spec(job, spec, paths, t, code, cwd, gang)
        try:
            started = base.start(self.executor, ls)
        except errors.CorralError as exc:
            return t, None, exc.message
        self._known.add(t.launch_id)
        return t, started, ""

    def _record_launches(self, conn: sa.Connection,
                         results: Sequence[_Outcome], events: repo.Events) -> None:
        """Record the handles of started tasks (or why they failed to start).

        Until then a task stays `launching`; that is safe at any moment: a server that
        stops first settles such a launch through the executor's `recover` (the launch's
        claim file says whether it ran), exactly as one killed between starting a process
        and recording it. Recording them with the next pass saves a transaction a pass.
        """
        if not results:
            return
        now = self.now()
        for t, handle, err in results:
            if handle is not None:
                repo.update_task(conn, t.job_id, t.attempt, t.name, expect=LIVE,
                                 state=J.TaskState.RUNNING.value, handle=handle.dumps(),
                                 launched_at=now)
            else:
                repo.update_task(conn, t.job_id, t.attempt, t.name, expect=LIVE,
                                 state=J.TaskState.FAILED_TO_START.value, message=err,
                                 ended_at=now)
                events.add(t.job_id, now, f"Task {t.name} failed to start: {err}",
                           level="Error", source="Task")

    # --- follow-on launches ----------------------------------------------------------------

    def _follower(self) -> Any:
        """The executor, when it can start a launch the moment a task of its own ends
        (`can_follow`, `follow`, `withdraw`: see executors/local.py); else None."""
        ex = self.executor
        return ex if callable(getattr(ex, "follow", None)) else None

    def _plan_follow_ons(self, queued: Sequence[scheduling.Queued], rows: Mapping[str, Any],
                         holding: Sequence[tuple[Any, Sequence[Any]]],
                         running: Sequence[scheduling.Running], nodes: Sequence[Any],
                         quotas: Sequence[scheduling.Quota],
                         usage: Mapping[tuple[str, str], float], d: scheduling.Decisions,
                         ) -> tuple[list[tuple[str, str]], dict[str, _FollowOn]]:
        """Which waiting jobs to hand to the executor ahead, each to start the moment a
        given task ends: (job id, the job of that task), in queue order; and the jobs
        handed out before that are taking their room now (see `_taking`).

        `decide` is asked again, layer by layer (FOLLOW_DEPTH of them): as if every task
        that can be followed had ended, then as if the jobs that would start then had
        ended too, and so on; the jobs it would start, in the order it starts them, are
        handed out, so a follow-on launch never takes room that a gang, a bigger job or a
        preemption waits for, nor comes more than a layer after its turn (`_chains` says
        who follows whom). The plan stops at the first job that cannot follow a task on
        its own: one of several tasks, one borrowing beyond its quota or filling a gap
        (backfill), one needing more than any of those tasks holds. Only single-task jobs
        on the same node and with the same GPUs and accelerators follow one another. Made
        anew every pass: a follow-on no longer in the plan (a job of higher priority came,
        say) is taken back, with what follows it.
        """
        ex = self._follower()
        if ex is None or d.preempts:
            return [], {}
        # What can be followed, by job: (its task's node, what the task holds). Tasks
        # launched already (answered or not), those handed out that are starting in the
        # room of a task just ended, and those this pass starts.
        # A job with retries keeps its room when its task fails (it restarts in place):
        # only one without can be followed.
        # A task that has ended since this pass observed them holds nothing any more: its
        # room is taken by the launch that followed it, if one has started (that one is
        # followed instead), or free, and what follows it then starts at once.
        taking, started = self._taking(ex)
        followed = self._followed | {fo.after for fo in started.values()}
        before: dict[str, tuple[str, resources.Resources]] = {}
        ended: set[str] = set()
        for job, tasks in holding:
            if (job.phase == J.Phase.RUNNING.value and job.node_count == 1 and len(tasks) == 1
                    and not job.retry_limit and job.preempt_requested_at is None
                    and tasks[0].state in LIVE_VALUES):
                launch_id = tasks[0].launch_id
                if ex.can_follow(launch_id):
                    before[job.id] = (tasks[0].node, _per_task(job))
                elif ex.has_ended(launch_id):
                    ended.add(job.id)
                    if launch_id not in followed:
                        before[job.id] = (tasks[0].node, _per_task(job))
        before.update((job_id, (fo.task.node, _per_task(fo.job)))
                      for job_id, fo in taking.items())
        by_id = {q.job_id: q for q in queued}
        starting = {a.job_id for a in d.starts}
        before.update((a.job_id, (a.slots[0].node, by_id[a.job_id].per_task))
                      for a in d.starts
                      if len(a.slots) == 1 and not rows[a.job_id].retry_limit)
        if not before:
            return [], taking
        ahead = [r for r in running if r.job_id not in before and r.job_id not in ended]
        ahead += [scheduling.Running(q.job_id, q.project, q.pool, q.per_task, a.slots,
                                     q.priority, q.seq)
                  for a in d.starts if a.job_id not in before for q in (by_id[a.job_id],)]
        heads = dict(before)
        # (job id, its layer), in the order decide starts them
        order: list[tuple[str, int]] = []
        # jobs no longer waiting: started, taking their room, or in the plan
        gone = starting | set(started)
        # Layer after layer: the jobs that would start once those tasks ended follow them;
        # then the jobs that would start once those ended follow those, and so on.
        for layer in range(1, FOLLOW_DEPTH + 1):
            # Each stream's first jobs are all that can take those tasks' room: decide in
            # stream order never reaches further (a long queue is read on many passes).
            first: list[scheduling.Queued] = []
            taken: dict[tuple[str, int, str], int] = {}
            for q in queued:
                if q.job_id in gone:
                    continue
                key = (q.pool, q.priority, q.project)
                taken[key] = n = taken.get(key, 0) + 1
                if n <= len(before):
                    first.append(q)
            if not first:
                break
            then = scheduling.decide(first, nodes, ahead, quotas, usage)
            if then.preempts:
                break
            nxt: dict[str, tuple[str, resources.Resources]] = {}
            stop = False
            for a in then.starts:
                q = by_id[a.job_id]
                if a.backfill or a.borrowed or q.count != 1 or a.job_id in self._no_follow:
                    stop = True
                    break
                pick = next((k for k in before
                             if _room_for(*before[k], a.slots[0].node, q.per_task)), None)
                if pick is None:
                    stop = True
                    break
                del before[pick]
                order.append((a.job_id, layer))
                gone.add(a.job_id)
                nxt[a.job_id] = (a.slots[0].node, q.per_task)
            if stop or before or not nxt:
                break  # (room left unused: the queue has nothing more that fits there)
            before = nxt
        return self._chains(order, heads, by_id), taking

    def _chains(self, order: Sequence[tuple[str, int]],
                heads: Mapping[str, tuple[str, resources.Resources]],
                by_id: Mapping[str, scheduling.Queued]) -> list[tuple[str, str]]:
        """Who follows whom: the jobs to hand out, in `order`, each behind a task in
        `heads` or behind one of them handed out before it. One handed out already keeps
        its place where it is at most one layer later than its own, so that tasks ending
        at different times do not reshuffle the chains every pass; any other goes at the
        end of the shortest chain that leaves it the room, no later than one layer past
        its own. Stops at the first that has no such place."""
        #: each job placed (and each head): its chain's node, what it holds, its depth
        placed = {job_id: (node, have, 0) for job_id, (node, have) in heads.items()}
        tails = {job_id: job_id for job_id in heads}  # the last of each chain, by its head
        chain_of = {job_id: job_id for job_id in heads}
        plan = []
        for job_id, layer in order:
            need = by_id[job_id].per_task
            limit = min(FOLLOW_DEPTH, layer + 1)
            fo = self._follow.get(job_id)
            spot = fo.after_job if fo is not None else None
            if spot is None or spot not in placed or tails[chain_of[spot]] != spot \
                    or placed[spot][2] >= limit \
                    or not _room_for(placed[spot][0], placed[spot][1], placed[spot][0], need):
                ends = sorted((placed[tail][2], i, tail) for i, tail in enumerate(tails.values()))
                spot = next((tail for depth, _i, tail in ends if depth < limit
                             and _room_for(*placed[tail][:2], placed[tail][0], need)), None)
                if spot is None:
                    break
            node, _have, depth = placed[spot]
            placed[job_id] = (node, need, depth + 1)
            chain_of[job_id] = head = chain_of[spot]
            tails[head] = job_id
            plan.append((job_id, spot))
        return plan

    def _started_ahead(self, ex: Any) -> dict[str, _FollowOn]:
        """The jobs handed out whose task before has ended since they were recorded (so
        they have started, or failed to), by job id."""
        return {fo.job.id: fo for fo in self._follow.values()
                if fo.started is not None and not ex.can_follow(fo.after)}

    def _taking(self, ex: Any) -> tuple[dict[str, _FollowOn], dict[str, _FollowOn]]:
        """Of the jobs started ahead (`_started_ahead`, the second), those that now hold
        the room of the task before them: the last of each chain."""
        started = self._started_ahead(ex)
        followed = {fo.after for fo in started.values()}
        return ({job_id: fo for job_id, fo in started.items()
                 if fo.task.launch_id not in followed}, started)

    def _apply_follow_ons(self, conn: sa.Connection, p: _Pass, plan: Sequence[tuple[str, str]],
                          taking: Mapping[str, _FollowOn],
                          holding: Sequence[tuple[Any, Sequence[Any]]],
                          launches: Sequence[tuple[Any, int, list[Any]]]) -> list[_FollowOn]:
        """Keep the follow-on launches still planned behind the same task, take back the
        others, and write the new ones' task rows (their launches are sent once these are
        durable, after this pass's own). The plan is carried out in its order and stops at
        the first job that cannot be launched ahead (one that ran before, or whose code is
        still to be copied), or that was to follow one that is not (nor a job started
        here whose code is: its launch comes later); those start the ordinary way. Those
        whose task before has ended are left alone: they have started (or failed to), and
        are recorded as such by the next pass."""
        tasks = {job.id: ts[0] for job, ts in holding if len(ts) == 1}
        tasks.update((job_id, fo.task) for job_id, fo in taking.items())
        starting = {job.id: (job, seq, ts[0]) for job, seq, ts in launches if len(ts) == 1}
        kept = set(self._started_ahead(self._follower()))
        staged: list[_FollowOn] = []
        for job_id, before in plan:
            task = tasks.get(before)
            if task is None and before in starting:  # (only those the plan follows)
                job, seq, first = starting[before]
                if not self._copies_code(job, seq):
                    task = tasks[before] = first
            if task is None or task.launch_id in p.spent:
                break  # (a task whose follower has just started has its successor)
            fo = self._follow.get(job_id)
            if fo is not None and fo.after == task.launch_id:
                kept.add(job_id)
                tasks[job_id] = fo.task
                continue
            if fo is not None and not self._take_back(conn, p, fo):
                break  # it has just started, behind another task: the plan is stale
            row = repo.job_by_id(conn, job_id)
            if row is None or row.phase != J.Phase.PENDING.value or row.deleted_at is not None \
                    or row.start_time is not None or self._copies_code(row, 1):
                break
            need = _per_task(row)
            t = _task_row(job_id, 1, 0, J.task_names(1)[0], task.node,
                          task.gpu_ids if need.gpu else "", task.accel_ids if need.accel else None)
            repo.insert_tasks(conn, [t])
            job = types.SimpleNamespace(**{**row._mapping, "master_port": launching.free_port()})
            fo = _FollowOn(job=job, task=types.SimpleNamespace(**t), after=task.launch_id,
                           after_job=before)
            staged.append(fo)
            tasks[job_id] = fo.task
        for fo in list(self._follow.values()):  # those no longer planned
            if fo.job.id in self._follow and fo.job.id not in kept:
                self._take_back(conn, p, fo)
        if p.spent:  # new ones behind a task whose old follower started after all
            gone, keep = set(p.spent), []
            for fo in staged:
                if fo.after in gone:
                    gone.add(fo.task.launch_id)  # (and what was to follow it)
                    repo.delete_tasks(conn, fo.job.id, fo.task.attempt)
                else:
                    keep.append(fo)
            staged = keep
        return staged

    def _copies_code(self, job: Any, attempt: int) -> bool:
        """Whether preparing the attempt copies its code (aside, so it cannot be launched
        ahead; see launching.needs_snapshot)."""
        return launching.needs_snapshot(storage.RunPaths(self.settings.runs_dir, job.id),
                                        attempt, self._spec(job).algorithm)

    def _send_follow_on(self, fo: _FollowOn) -> None:
        """Hand a follow-on launch to the executor (its rows are durable)."""
        ex = self._follower()
        if not ex.can_follow(fo.after) and not ex.has_ended(fo.after):
            # That task's launch was not sent after all (or its launcher is gone): not this
            # job's doing, so it may be launched ahead again. (One that has ended left its
            # room to this launch alone, which the launcher starts at once.)
            fo.error, fo.blameless = "the task it was to follow was not launched", True
            return
        spec = self._spec(fo.job)
        paths = storage.RunPaths(self.settings.runs_dir, fo.job.id)
        try:
            code, cwd = launching.prepare_attempt(paths, fo.task.attempt, spec.algorithm,
                                                  self.run_as, ready=self._ready)
            ls = self._launch_spec(fo.job, spec, paths, fo.task, code, cwd, [fo.task.node])
            fo.started = ex.follow(ls, fo.after)
        except (errors.CorralError, OSError) as exc:
            fo.error = getattr(exc, "message", str(exc))

    def _follow_ons(self, conn: sa.Connection, p: _Pass) -> bool:
        """(first transaction) The follow-on launches carried out: those answered, and
        those whose task before has ended (their answer comes before that task's exit is
        told, so it is waited for). The jobs of those started are Running from here.
        True when there were any."""
        ex = self._follower()
        begun = False
        for fo in list(self._follow.values()):
            if fo.started is None:
                self._drop_follow_on(conn, fo, fo.error, blame=not fo.blameless)
            elif fo.started.ready(wake=False) or not ex.can_follow(fo.after):
                fo.started.due()
                self._begin_follow_on(conn, p, fo)
                begun = True
        return begun

    def _stopped_follow_ons(self, conn: sa.Connection, p: _Pass,
                            active: Sequence[tuple[Any, Sequence[Any]]]) -> None:
        """Take back the follow-on launches of jobs stopped or deleted meanwhile: such a
        job is among the active ones (Terminating) while its launch is held, and must not
        run, nor wait for the task it follows to end. Before any task is signalled: the
        one it follows may be stopping too, and its end would start it. (A preemption
        takes back what follows its victims itself: see `_plan_follow_ons`.)"""
        for job, _tasks in active:
            fo = self._follow.get(job.id)
            if fo is not None:
                self._take_back(conn, p, fo)

    def _take_back(self, conn: sa.Connection, p: _Pass, fo: _FollowOn) -> bool:
        """Withdraw a follow-on launch; True when it never runs (its task row goes, and the
        job waits as before). False when the executor had started it already: it is
        recorded as started instead, and the task it followed has its successor
        (`_Pass.spent`). What follows it is taken back first: a launch held behind one
        withdrawn would otherwise start at once, in room still taken."""
        for later in [f for f in self._follow.values() if f.after == fo.task.launch_id]:
            self._take_back(conn, p, later)
        del self._follow[fo.job.id]
        if self.executor.withdraw(self._bare_spec(fo.task)):  # type: ignore[attr-defined]
            repo.delete_tasks(conn, fo.job.id, fo.task.attempt)
            self._under_way.discard(fo.task.launch_id)
            return True
        p.spent.add(fo.after)
        fo.started.due()
        self._begin_follow_on(conn, p, fo)
        return False

    def _begin_follow_on(self, conn: sa.Connection, p: _Pass, fo: _FollowOn) -> None:
        """Record a follow-on launch carried out: its job starts, its task runs (or, when
        the job was stopped meanwhile, is signalled by the job's settling)."""
        self._follow.pop(fo.job.id, None)
        try:
            handle = fo.started()
        except errors.CorralError as exc:
            self._drop_follow_on(conn, fo, exc.message)
            return
        self._known.add(handle.launch_id)
        if len(self._followed) > 10_000:
            self._followed.clear()
        self._followed.add(fo.after)
        self._begin(conn, p, fo.job.id, fo.task.attempt, fo.task.node, self.now(),
                    port=fo.job.master_port)
        self._record_launches(conn, [(fo.task, handle, "")], p.events)

    @staticmethod
    def _begin(conn: sa.Connection, p: _Pass, job_id: str, attempt: int, node: str,
               now: int, port: int | None = None) -> None:
        """A waiting job whose follow-on launch ran: Pending -> Running, with its running
        record (only jobs that never ran are launched ahead). A job stopped meanwhile
        stays as it is: the task, recorded as its job's, is then stopped with it. (Such a
        job cannot have ended: its task row was live all along.)"""
        fields = {"start_time": now, "wait_reason": None, "wait_code": None,
                  "borrowed": False, "preempt_requested_at": None}
        if port is not None:
            fields["master_port"] = port
        if repo.transition(conn, job_id, J.Phase.RUNNING, J.SecondaryPhase.RUNNING, now=now,
                           message=f"Job started: 1 task(s) on {node}, as a task there ended",
                           fields=fields, events=p.events):
            repo.open_attempt(conn, job_id, attempt, now, J.StartType.INIT_OR_RESCHEDULED)

    def _drop_follow_on(self, conn: sa.Connection, fo: _FollowOn, error: str,
                        blame: bool = True) -> None:
        """A follow-on launch that could not be made: the job waits. When it was the job's
        own launch that failed, it starts the ordinary way from then on, where a failure
        is recorded as for any start."""
        self._follow.pop(fo.job.id, None)
        if blame:
            if len(self._no_follow) > 10_000:
                self._no_follow.clear()
            self._no_follow.add(fo.job.id)
        self._under_way.discard(fo.task.launch_id)
        repo.delete_tasks(conn, fo.job.id, fo.task.attempt)
        log.info("job %s starts the ordinary way: launching it ahead failed: %s", fo.job.id,
                 error)

    # --- purge deleted jobs ---------------------------------------------------------------

    def _sweep(self) -> None:
        """(files thread) Remove the run directories of jobs purged before this start that
        were never removed: their directories say so, and their rows are gone."""
        marked = storage.marked_purged(self.settings.runs_dir)
        if not marked:
            return
        with self.store.read() as conn:
            left = repo.existing_jobs(conn, marked)
        gone = [job_id for job_id in marked if job_id not in left]
        for job_id in gone:
            storage.remove_job_dir(storage.RunPaths(self.settings.runs_dir, job_id))
        if gone:
            log.info("removed the run directories of %d deleted jobs that a server before "
                     "this one left behind", len(gone))

    def _purge(self, conn: sa.Connection, p: _Pass) -> None:
        """Remove the deleted jobs that have ended. Called on the passes that read the
        whole queue (deleting goes through the API, which says the queue changed; see
        `queue_changed`) and on every pass while a deleted job is still stopping: the
        others have no deleted job to look for."""
        self._deleting = False
        for row in repo.deleted_jobs(conn):
            if row.phase in TERMINAL_VALUES:  # a job still stopping is purged once it ended
                # Its directory says so first: should the server die before the files
                # thread removes it, the next start does (see `_sweep`).
                storage.mark_purged(storage.RunPaths(self.settings.runs_dir, row.id))
                repo.purge_job(conn, row.id)
                p.purged.append(row.id)
                self._specs.pop(row.id, None)
            else:
                self._deleting = True


def _remove_job_dir(paths: storage.RunPaths, copies: Sequence[threading.Event]) -> None:
    """(files thread) Remove a purged job's files once the copies of its code that were
    stopped have ended: one still running would make its directories again."""
    for done in copies:
        done.wait(COPY_STOP_WAIT_S)
    storage.remove_job_dir(paths)


def _never_started(conn: sa.Connection, tasks: Sequence[Any], now: int) -> None:
    for t in tasks:
        repo.update_task(conn, t.job_id, t.attempt, t.name, expect=LIVE,
                         state=J.TaskState.FAILED_TO_START.value, ended_at=now,
                         message=STOPPED_FIRST)


def _ended_badly(row: Any, status: base.Status) -> bool:
    return (status.state is not base.State.EXITED or status.exit_code != 0
            or row.job_phase != J.Phase.RUNNING.value)


def _wait_level(w: scheduling.Wait) -> str:
    return "Info" if w.code is scheduling.WaitCode.QUEUED else "Warning"


def _failed(t: Any) -> bool:
    if t.state == J.TaskState.EXITED.value:
        return bool(t.exit_code != 0)
    return t.state in (J.TaskState.LOST.value, J.TaskState.NODE_LOST.value,
                       J.TaskState.FAILED_TO_START.value)


def _failure_of(t: Any) -> tuple[J.FailureClass, str]:
    if t.state == J.TaskState.LOST.value:
        return J.FailureClass.LOST, "lost"
    if t.state == J.TaskState.FAILED_TO_START.value:
        return J.FailureClass.LAUNCH_ERROR, f"failed to start: {t.message}"
    return J.FailureClass.USER_EXIT, J.exit_reason(t.exit_code)


def _task_row(job_id: str, attempt: int, rank: int, name: str, node: str,
              gpu_ids: str, accel_ids: str | None = None) -> dict[str, Any]:
    return {"job_id": job_id, "attempt": attempt, "name": name, "rank": rank, "node": node,
            "state": J.TaskState.LAUNCHING.value, "launch_id": launching.new_launch_id(),
            "gpu_ids": gpu_ids, "accel_ids": accel_ids}


def _room_for(where: str, have: resources.Resources, node: str,
              need: resources.Resources) -> bool:
    """Whether a task holding `have` on `where` leaves, when it ends, the room a task
    needing `need` on `node` takes (the same GPUs and accelerators; as much CPU and
    memory or more)."""
    return (where == node and have.cpu >= need.cpu and have.memory_mb >= need.memory_mb
            and have.gpu == need.gpu and have.accel == need.accel)


def _per_task(j: Any) -> resources.Resources:
    return _resources(j.cpu, j.memory_mb, j.gpu, j.accelerators)


@functools.lru_cache(maxsize=4096)
def _resources(cpu: float, memory_mb: int, gpu: int, accel: str | None) -> resources.Resources:
    # A long queue is a few flavors thousands of times: one immutable object each.
    return resources.Resources(cpu, memory_mb, gpu, resources.parse_accels(accel))


def _queued(j: Any) -> scheduling.Queued:
    return scheduling.Queued(
        j.id, j.project_id, j.pool_id, _per_task(j), j.node_count, j.priority, j.seq,
        bool(j.spread), j.gpu_type, was_head=j.wait_code in scheduling.HEAD_CODES)


def _running(job: Any, tasks: Sequence[Any]) -> scheduling.Running:
    """What an active job holds: its latest attempt's slots. A job keeps its slots (and
    GPUs) also between a failed attempt and its restart."""
    slots = tuple(scheduling.TaskSlot(t.node, tuple(int(g) for g in t.gpu_ids.split(",") if g),
                                      resources.parse_device_ids(t.accel_ids))
                  for t in tasks)
    return scheduling.Running(
        job.id, job.project_id, job.pool_id, _per_task(job),
        slots, job.priority, job.seq, bool(job.preemptible), bool(job.borrowed),
        job.start_time or 0,
        stopping=job.phase == J.Phase.TERMINATING.value or job.preempt_requested_at is not None)


def _quota(q: Any) -> scheduling.Quota:
    return scheduling.Quota(q.project_id, q.pool_id, q.cpu, q.memory_mb, q.gpu,
                            bool(q.borrowing), q.weight,
                            resources.parse_accels(q.accelerators, keep_zero=True))


def run_forever(rec: Reconciler, wake_event: Any, stop_event: Any, interval: float,
                urgent_event: Any = None) -> None:
    """The scheduler thread: a pass on every wake-up, and at least every `interval`.

    While jobs are handed out ahead (see `Reconciler.hold_s`), a pass woken by a task's end
    or a submission waits a moment longer for more to come; `urgent_event` (a user stopping
    or deleting a job, a quota changed) ends that wait at once."""
    more = False
    while not stop_event.is_set():
        if not more:
            wake_event.wait(interval)
            hold = rec.hold_s()
            if hold > 0 and urgent_event is not None:
                urgent_event.wait(hold)
        wake_event.clear()
        if urgent_event is not None:
            urgent_event.clear()
        if stop_event.is_set():
            return
        more = False
        try:
            more = rec.tick()
        except sa.exc.OperationalError as exc:  # database briefly unavailable: next pass
            log.warning("reconciler pass skipped: %s", exc)
        except Exception:
            log.exception("reconciler pass failed")
