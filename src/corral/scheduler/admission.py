"""Admitting, placing and starting queued jobs, preempting for them, and saying why the
rest wait.

Each pass reads the first `NEAR` jobs of every stream (pool, priority, project): enough for
what can start when a job ends; at least once a second, and right after a pass that used a
stream's window up, a pass reads `QUEUE_WINDOW` jobs of each, which admits the new jobs
further back, refreshes their reasons and lets backfill look that deep. A long queue thus
costs a pass little more than a short one.

The queue is read in a snapshot taken after the pass's first transaction committed (a job
put back in the queue there is served in its old place, on the nodes there are now) and
decided on (`domain.scheduling.decide`) outside any transaction, which on a long queue
would keep every API write waiting. By the time the decisions are written the API may have
changed a job, so each write is guarded and one whose guard fails is dropped for this pass
(the next decides again): a job starts only if it still waits and is not deleted, a reason
is written only for a job that still waits, a victim is preempted only if it still runs.
Nothing can over-commit a node: only the reconciler takes capacity (its passes run one at
a time), and the API can only free it later (a job it stops holds its resources until the
reconciler has seen its processes go), so what `decide` saw free is still free.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

import sqlalchemy as sa

from corral import settings as settings_mod
from corral.domain import jobs, resources, scheduling
from corral.executors import base
from corral.scheduler import endings, launching, passes, usage
from corral.storage import runs
from corral.store import db, job_repo, queue_repo, rows

#: how many queued jobs of each (pool, priority, project) a deep pass considers: more than a
#: pass can start or backfill on a big cluster, few enough to keep a pass short
QUEUE_WINDOW = 256
#: how many of them every other pass considers (what a job's end can start on a full
#: cluster); reading and deciding on the whole window was a third of such a pass's work
NEAR = 32
#: seconds between deep passes, at most (a pass that used a window up is followed by one)
DEEP_EVERY_S = 1.0
#: waiting reasons written per pass at most (the rest on later passes), so that a long
#: queue whose reasons all change at once does not make one long transaction
REASON_WRITES = 256


@dataclasses.dataclass
class Admission:
    store: db.Store
    executor: base.Executor
    settings: settings_mod.Settings
    clock: Callable[[], float] = time.monotonic
    #: when the next pass reads the whole window (by `clock`): the first pass does
    deep_at: float = 0.0

    def schedule(self, p: passes.Pass, nodes: Sequence[scheduling.Node],
                 holding: Sequence[tuple[rows.Job, Sequence[rows.Task]]]) -> bool:
        """Start what fits, preempt what must make room, say why the rest waits. True when
        a stream's window was used up and its last job started: more may start at once."""
        running = [passes.holds(job, tasks) for job, tasks in holding]
        now = self.clock()
        window = QUEUE_WINDOW if now >= self.deep_at else NEAR
        if window == QUEUE_WINDOW:
            self.deep_at = now + DEEP_EVERY_S
        with self.store.read() as conn:
            queue = queue_repo.queued(conn, window)
            quotas = [_quota(q) for q in queue_repo.quotas(conn)]
            saved = queue_repo.usage(conn)
        shares, new_usage = usage.update(saved, running, nodes, p.now,
                                         self.settings.fair_share_window)
        queued = [_queued(j, nodes) for j in queue]
        d = scheduling.decide(queued, nodes, running, quotas, shares) if queue else None
        if d is not None and d.starts:
            d = self._hold_if_disk_low(d, {q.job_id: q.pool for q in queued})
        if d is None and new_usage is None:
            return False
        by_id = {j.id: j for j in queue}
        live = {job.id: (job, tasks) for job, tasks in holding}
        started: list[tuple[rows.Job, int, list[rows.Task]]] = []
        with self.store.begin() as conn:
            if new_usage is not None:
                queue_repo.save_usage(conn, new_usage)
            if d is not None:
                started = self._apply(conn, p, d, by_id, live)
            p.events.write(conn)
        p.launches += started  # (only once their rows are durable)
        # (A preemption is signalled by the next pass: at once, not a tick later.)
        if d is None:
            return False
        ends = _window_ends(queued, window)
        if any(a.job_id in ends for a in d.starts):
            self.deep_at = 0.0  # the rest of that stream may start too: look deep at once
            return True
        return bool(d.preempts)

    def _hold_if_disk_low(self, d: scheduling.Decisions,
                          pools: Mapping[str, str]) -> scheduling.Decisions:
        """No new job starts (and none is preempted for one) while the disk that holds the
        database and the run directories is short of space: the jobs that would have
        started wait, saying so."""
        floor = int(self.settings.disk_free_floor_gb * 2**30)
        why = floor and runs.short_of_space([self.settings.home, self.settings.runs_dir],
                                            floor)
        if not why:
            return d
        held = [scheduling.Wait(a.job_id, scheduling.WaitCode.DISK_LOW, why, pools[a.job_id], 0)
                for a in d.starts]
        return scheduling.Decisions(waits=[*d.waits, *held])

    def _apply(self, conn: sa.Connection, p: passes.Pass, d: scheduling.Decisions,
               by_id: Mapping[str, rows.QueuedJob],
               live: Mapping[str, tuple[rows.Job, Sequence[rows.Task]]],
               ) -> list[tuple[rows.Job, int, list[rows.Task]]]:
        """Write the decisions; returns the attempts started, to launch once committed."""
        new = [j for j in by_id.values() if j.phase == jobs.Phase.CREATING.value]
        admitted = _admit(conn, p, new, d.waits)
        started = [s for a in d.starts if (s := _record_start(conn, p, a)) is not None]
        for v in d.preempts:
            self._preempt(conn, p, live[v.job_id], v, by_id[v.for_job])
        _note_waiting(conn, p, d.waits, by_id, admitted)
        return started

    def _preempt(self, conn: sa.Connection, p: passes.Pass,
                 victim: tuple[rows.Job, Sequence[rows.Task]], v: scheduling.Preempt,
                 for_job: rows.QueuedJob) -> None:
        """Mark a victim to be stopped. The pass after this one, once the mark has
        committed, signals it (settle.py: SIGTERM, SIGKILL after the grace period) and
        requeues it once its processes have gone: a signal sent before the mark commits
        would, after a crash, make its exit read as its own failure."""
        job, _tasks = victim
        if not job_repo.request_preempt(conn, job.id, p.now):
            return  # it stopped or was stopped meanwhile
        why = ("reclaiming capacity it borrowed beyond its project's quota" if v.reclaim
               else f"priority {for_job.priority} over its {job.priority}")
        # Another project's job is described, never named: events are the victim's.
        who = (f"job {for_job.id}" if for_job.project_id == job.project_id
               else f"a priority-{for_job.priority} job of another project")
        grace = self.settings.grace_period
        p.events.add(job.id, p.now, f"Preempted for {who} ({why}): stopping it with a grace "
                     f"period of {grace:g} s; it is requeued and keeps its place",
                     level="Warning")


def _admit(conn: sa.Connection, p: passes.Pass, new: Sequence[rows.QueuedJob],
           waits: Sequence[scheduling.Wait]) -> set[str]:
    """Creating -> Pending for every new job; one that waits gets its reason in the same
    write. Returns the jobs whose reason was written here."""
    reasons = {w.job_id: w for w in waits}
    admitted = set()
    for j in new:
        w = reasons.get(j.id)
        fields = None if w is None else {"wait_reason": w.message, "wait_code": w.code.value}
        if job_repo.transition(conn, j.id, jobs.Phase.PENDING, jobs.SecondaryPhase.QUEUING,
                               now=p.now, message="Job queued", fields=fields,
                               events=p.events) and w is not None:
            admitted.add(j.id)
            p.events.add(j.id, p.now, w.message, level=_wait_level(w))
    return admitted


def _record_start(conn: sa.Connection, p: passes.Pass, a: scheduling.Start,
                  ) -> tuple[rows.Job, int, list[rows.Task]] | None:
    """Running, with a new attempt and its tasks `launching`; None if the job no longer
    waits (stopped or deleted meanwhile)."""
    job = job_repo.job_by_id(conn, a.job_id)
    if job is None or job.deleted_at is not None:
        return None
    nodes = ", ".join(sorted({s.node for s in a.slots}))
    port = launching.free_port()
    notes = "".join(((" in a gap (backfill)" if a.backfill else ""),
                     (" on borrowed capacity: it may be preempted to give it back"
                      if a.borrowed else "")))
    if not job_repo.transition(
            conn, a.job_id, jobs.Phase.RUNNING, jobs.SecondaryPhase.RUNNING, now=p.now,
            message=f"Job started: {len(a.slots)} task(s) on {nodes}{notes}",
            fields={"start_time": job.start_time or p.now, "wait_reason": None,
                    "wait_code": None, "master_port": port, "borrowed": a.borrowed,
                    "preempt_requested_at": None}, events=p.events):
        return None
    # A job that never started has no running record yet (start_time is set with its
    # first and kept through requeues).
    seq = 1 if job.start_time is None else job_repo.latest_attempt(conn, a.job_id) + 1
    job_repo.open_attempt(conn, a.job_id, seq, p.now, jobs.StartType.INIT_OR_RESCHEDULED)
    names = jobs.task_names(len(a.slots))
    tasks = [passes.task_row(a.job_id, seq, rank, name, slot.node,
                             ",".join(str(g) for g in slot.gpu_ids),
                             resources.device_ids_json(slot.accel_ids))
             for rank, (name, slot) in enumerate(zip(names, a.slots, strict=True))]
    job_repo.insert_tasks(conn, tasks)
    return dataclasses.replace(job, master_port=port), seq, tasks


def _note_waiting(conn: sa.Connection, p: passes.Pass, waits: Sequence[scheduling.Wait],
                  by_id: Mapping[str, rows.QueuedJob], admitted: set[str]) -> None:
    """Record why each job waits; an event whenever the kind of reason changes."""
    writes = 0
    for w in waits:
        row = by_id[w.job_id]
        if w.job_id in admitted or (row.wait_code == w.code and row.wait_reason == w.message):
            continue
        writes += 1
        if writes > REASON_WRITES:
            return
        if not job_repo.note_wait(conn, w.job_id, now=p.now, reason=w.message,
                                  code=w.code.value):
            continue  # it no longer waits (stopped meanwhile)
        if row.wait_code != w.code:
            p.events.add(w.job_id, p.now, w.message, level=_wait_level(w))


def _window_ends(queued: Sequence[scheduling.Queued], window: int) -> set[str]:
    """The last job of each stream whose window is full: jobs behind it were not read."""
    streams: dict[tuple[str, int, str], list[str]] = {}
    for q in queued:
        streams.setdefault((q.pool, q.priority, q.project), []).append(q.job_id)
    return {ids[-1] for ids in streams.values() if len(ids) >= window}


def _wait_level(w: scheduling.Wait) -> str:
    return "Info" if w.code is scheduling.WaitCode.QUEUED else "Warning"


def _queued(j: rows.QueuedJob, nodes: Sequence[scheduling.Node]) -> scheduling.Queued:
    q = scheduling.Queued(
        j.id, j.project_id, j.pool_id, passes.per_task(j), j.node_count, j.priority, j.seq,
        j.spread, j.gpu_type, was_head=j.wait_code in scheduling.HEAD_CODES,
        excluded=frozenset(endings.excluded(j)), node=j.node_name)
    return scheduling.keep_off(q, nodes)


def _quota(q: rows.Quota) -> scheduling.Quota:
    return scheduling.Quota(q.project_id, q.pool_id, q.cpu, q.memory_mb, q.gpu,
                            q.borrowing, q.weight,
                            resources.parse_accels(q.accelerators, keep_zero=True))
