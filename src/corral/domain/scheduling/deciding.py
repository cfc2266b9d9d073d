"""`decide`: who starts where, who waits and why, and whom to preempt, for every pool.

Each pool gets one pass over its queue in the order of `order`. A job starts when its whole
gang fits on what is free and not reserved, and its project's quota allows it (or allows
borrowing: such a job is marked borrowed, and is the first reclaimed). The first job that
cannot start becomes the pool's head (`head`): it may preempt, and it reserves its nodes;
the jobs after it only wait, or start in the gaps.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from corral.domain import resources
from corral.domain.scheduling import head, inputs, order, outcomes, placement, pool


def decide(queue: Sequence[inputs.Queued], nodes: Sequence[inputs.Node],
           running: Sequence[inputs.Running] = (), quotas: Sequence[inputs.Quota] = (),
           usage: Mapping[tuple[str, str], float] | None = None) -> outcomes.Decisions:
    """What to do now. `usage` is each (project, pool)'s recent mean dominant share."""
    out = outcomes.Decisions()
    pools = pool.build(nodes, running)
    by_pool, heads = order.group(queue)
    quota_of = {(q.project, q.pool): q for q in quotas}
    for name in sorted(by_pool):
        p = pools.get(name)
        if p is None:
            p = pool.Pool(name)
        _Pass(p, quota_of, usage or {}, out).run(by_pool[name], heads)
    return out


class _Pass:
    """One pass over one pool's queue, writing into `out`."""

    def __init__(self, p: pool.Pool, quota_of: Mapping[tuple[str, str], inputs.Quota],
                 usage: Mapping[tuple[str, str], float], out: outcomes.Decisions) -> None:
        self.pool = p
        self.quota_of = {proj: q for (proj, pool_id), q in quota_of.items()
                         if pool_id == p.name}
        self.usage = usage
        self.out = out
        self.used = pool.held(p.running)
        self.head: inputs.Queued | None = None
        self.ahead = 0
        #: gang shapes that did not fit: room only shrinks during a pass, so they never will
        self.no_room: set[inputs.Shape] = set()
        self.behind_msg: dict[tuple[outcomes.WaitCode, bool], str] = {}
        # Both only change when a project starts a job (then its entries are dropped): a
        # long queue asks the same questions thousands of times.
        self.keys: dict[str, float] = {}
        #: per project, its quota verdict per shape ("" when within its quota)
        self.verdicts: dict[str, dict[inputs.Shape, str]] = {}
        #: what is free and not reserved, the nodes in best-fit order, and the most any
        #: node has free of each resource, until a start or a reservation changes them
        self.free: tuple[pool.Room, list[int], tuple[float, int, int]] | None = None

    def run(self, levels: dict[int, dict[str, list[inputs.Queued]]],
            heads: Mapping[tuple[str, int], inputs.Queued]) -> None:
        if not self.pool.names:
            for q in order.considered(levels, heads, self.pool.name, self._key):
                self._wait(q, outcomes.WaitCode.NO_NODE,
                           f"pool '{self.pool.name}' has no nodes")
            return
        for prio in sorted(levels, reverse=True):
            per_project = levels[prio]
            first = heads.get((self.pool.name, prio))
            if first is not None:  # the last head keeps its place against fair share
                self._one(first)
            heap = []
            for project, js in per_project.items():
                js.sort(key=order.BY_SEQ)
                if first is not None and first.project == project:
                    js = per_project[project] = [q for q in js if q is not first]
                if js:
                    heap.append((self._key(project), js[0].seq, project, 0))
            heapq.heapify(heap)
            while heap:
                _, _, project, i = heapq.heappop(heap)
                self._serve(project, per_project[project], i, heap)

    # --- fair share: serve the project with the lowest key, in runs ----------------------

    def _serve(self, project: str, js: list[inputs.Queued], i: int,
               heap: list[tuple[float, int, str, int]]) -> None:
        """Serve `project`'s jobs from `js[i]` until another project's turn comes (then it
        goes back on the heap). Its key changes only when it starts a job, so most of a
        long queue is answered in runs, without a heap operation per job."""
        n = len(js)
        key = self._key(project)
        stop = order.turn_ends(key, project, js, i, heap)
        while i < n:
            if i >= stop:
                heapq.heappush(heap, (key, js[i].seq, project, i))
                return
            i = self._drain(project, js, i, stop)
            if i < stop:  # a job the short path cannot answer
                self._one(js[i])
                i += 1
                if project not in self.keys:  # it started a job: its key moved
                    key = self._key(project)
                    stop = order.turn_ends(key, project, js, i, heap)

    def _drain(self, project: str, js: list[inputs.Queued], i: int, stop: int) -> int:
        """The hot loop: answer jobs `js[i:stop]` whose shape is known not to fit now, or
        whose quota verdict is known; returns where it stopped (a job that needs more)."""
        if self.head is None and project not in self.quota_of:
            return i
        name, append, new, wait = (self.pool.name, self.out.waits.append, tuple.__new__,
                                   outcomes.Wait)
        start = ahead = self.ahead
        #: per shape, (code, message) of its wait, or () when the general path must decide
        answers: dict[inputs.Shape, tuple[outcomes.WaitCode, str] | tuple[()]] = {}
        for q in js[i:stop]:
            shape = q.shape
            answer = answers.get(shape)
            if answer is None:
                answer = answers[shape] = self._known(q)
            if not answer:
                break
            append(new(wait, (q.job_id, answer[0], answer[1], name, ahead)))
            ahead += 1
        self.ahead = ahead
        return i + ahead - start

    def _known(self, q: inputs.Queued) -> tuple[outcomes.WaitCode, str] | tuple[()]:
        """Why `q` waits, if that follows from what this pass already knows (its shape did
        not fit, or its quota verdict); () if it needs the general path."""
        quota = self.quota_of.get(q.project)
        if quota is not None:
            verdict = self.verdicts.get(q.project, {}).get(q.shape)
            if verdict is None:
                return ()
            if verdict:
                if quota.borrowing and q.shape not in self.no_room:
                    return ()
                return outcomes.WaitCode.QUOTA, verdict
        if self.head is not None and q.shape in self.no_room:
            return self._behind(q)
        return ()

    def _behind(self, q: inputs.Queued) -> tuple[outcomes.WaitCode, str]:
        """Why `q` waits behind the head (a few messages for thousands of jobs). Other
        projects' jobs learn only that it belongs to another project, and its priority."""
        h = self.head
        assert h is not None
        code = (outcomes.WaitCode.PRIORITY if h.priority > q.priority
                else outcomes.WaitCode.QUEUED)
        same = h.project == q.project
        msg = self.behind_msg.get((code, same))
        if msg is None:
            # Never the head's id: the head changes with every start, and a reason naming
            # it would rewrite every waiting job's row each time (the place in the queue
            # is shown from the live order instead).
            who = (f"a job of priority {h.priority}" if same
                   else f"a job of another project (priority {h.priority})")
            msg = self.behind_msg[code, same] = (
                f"waiting behind higher priority: {who} is next to start in pool "
                f"{self.pool.name}" if code is outcomes.WaitCode.PRIORITY
                else f"queued: behind {'the job' if same else 'a job of another project'} "
                     f"next to start in pool {self.pool.name}")
        return code, msg

    def _key(self, project: str) -> float:
        key = self.keys.get(project)
        if key is None:
            quota = self.quota_of.get(project)
            key = self.keys[project] = order.fair_share(
                self.usage.get((project, self.pool.name), 0.0),
                self.pool.share(self.used.get(project, resources.ZERO)),
                quota.weight if quota else 1.0)
        return key

    # --- one job: start it, or say why it waits ------------------------------------------

    def _one(self, q: inputs.Queued) -> None:
        quota = self.quota_of.get(q.project)
        shape = q.shape
        over = ""
        if quota is not None:
            verdicts = self.verdicts.setdefault(q.project, {})
            known = verdicts.get(shape)
            if known is None:
                over = self._over_quota(q)
                if over:
                    over = (f"quota exceeded: {over}; it may borrow idle capacity, but not "
                            "enough is free" if quota.borrowing else f"quota exceeded: {over}")
                verdicts[shape] = over
            else:
                over = known
        borrowed = bool(over)
        if over and not (quota and quota.borrowing):
            self._wait(q, outcomes.WaitCode.QUOTA, over)
            return
        if shape not in self.no_room:
            placed = self._place(q)
            if placed is not None:
                self._start(q, placed, borrowed)
                return
            self.no_room.add(shape)
        if borrowed:
            self._wait(q, outcomes.WaitCode.QUOTA, over)
        elif self.head is None:
            self._become_head(q)
        else:
            self._wait(q, *self._behind(q))

    def _place(self, q: inputs.Queued) -> list[int] | None:
        """Where `q` starts now (outside the head's reservation), or None."""
        if self.free is None:
            room = pool.available(self.pool)
            self.free = (room, placement.best_fit(room),
                         (max(room.cpu), max(room.mem), max(room.gpu)))
        room, best, most = self.free
        d = q.per_task
        if d.cpu > most[0] + pool.EPS or d.memory_mb > most[1] or d.gpu > most[2]:
            return None  # no node has room for one task: most of a full cluster's queue
        return placement.fit(self.pool, q, room.copy(), None if q.spread else best)

    def _over_quota(self, q: inputs.Queued) -> str:
        """How `q`'s gang would exceed its project's quota in the pool ("" if it would not)."""
        quota = self.quota_of.get(q.project)
        if quota is None:
            return ""
        need = q.per_task.times(q.count)
        used = self.used.get(q.project, resources.ZERO)
        parts = []
        for label, limit, u, n, show, unit in (
                ("CPU", quota.cpu, used.cpu, need.cpu, _count, " core(s)"),
                ("memory", quota.memory_mb, used.memory_mb, need.memory_mb, resources.gib, ""),
                ("GPU", quota.gpu, used.gpu, need.gpu, _count, ""),
                *((k, limit, used.count(k), need.count(k), _count, "")
                  for k, limit in quota.accel)):
            if limit is not None and n and u + n > limit + pool.EPS:
                parts.append(f"{label} quota of project {q.project} in pool {self.pool.name} "
                             f"is {show(limit)}{unit}, {show(u)} in use, the job needs "
                             f"{show(n)} (over by {show(u + n - limit)})")
        return "; ".join(parts)

    def _start(self, q: inputs.Queued, placed: list[int], borrowed: bool) -> None:
        p, d = self.pool, q.per_task
        self.free = None
        slots = []
        for i in placed:
            p.cpu[i] -= d.cpu
            p.mem[i] -= d.memory_mb
            ids, p.gpus[i] = tuple(p.gpus[i][: d.gpu]), p.gpus[i][d.gpu:]
            devices = []
            for k, v in d.accel:
                free = p.acc[i][k]
                devices.append((k, tuple(free[:v])))
                p.acc[i][k] = free[v:]
            slots.append(inputs.TaskSlot(p.names[i], ids, tuple(devices)))
        self.used[q.project] = self.used.get(q.project, resources.ZERO) + d.times(q.count)
        self.keys.pop(q.project, None)
        self.verdicts.get(q.project, {}).clear()  # in place: the hot loop holds it
        self.out.starts.append(
            outcomes.Start(q.job_id, tuple(slots), borrowed, self.head is not None))

    def _wait(self, q: inputs.Queued, code: outcomes.WaitCode, message: str) -> None:
        self.out.waits.append(
            outcomes.new_wait((q.job_id, code, message, self.pool.name, self.ahead)))
        self.ahead += 1

    # --- the head: preempt for it, reserve for it ---------------------------------------

    def _become_head(self, q: inputs.Queued) -> None:
        self.head = q
        p = self.pool
        stopping = [r for r in p.running if r.stopping]
        victims = head.victims(p, q, stopping, within_quota=not self._over_quota(q))
        if victims is None:  # no preemption can make room: reserve where it will start
            placed = head.promised(p, q)
            if placed is None:
                self._wait(q, outcomes.WaitCode.NO_NODE, f"no nodes of pool {p.name} can hold "
                           f"{q.count} task(s) of {resources.describe(q.per_task)}")
                return
            self._reserve(q, placed)
            self._wait(q, *head.short_of(p, q))
            return
        placed = placement.fit(p, q, head.room_with(p, stopping + victims))
        assert placed is not None
        self._reserve(q, placed)
        for v in victims:
            reclaim = v.borrowed and not (v.preemptible and v.priority < q.priority)
            self.out.preempts.append(outcomes.Preempt(v.job_id, q.job_id, reclaim))
        self._wait(q, outcomes.WaitCode.PREEMPTING,
                   f"waiting for resources: preempting to make room in pool {p.name}; "
                   f"starts once these job(s) have stopped: "
                   f"{head.jobs_seen_by(stopping + victims, q)}")

    def _reserve(self, q: inputs.Queued, placed: list[int]) -> None:
        self.free = None
        head.reserve(self.pool, q, placed)


def _count(n: float) -> str:
    return f"{n:g}"
