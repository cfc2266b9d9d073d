"""The scheduler's pure decision function: pools, quotas, priorities, backfill, gangs."""

from __future__ import annotations

import collections
import dataclasses
import random
import re
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain import resources, scheduling


def node(name: str = "n0", cpu: float = 4, mem: int = 16384, gpus: int = 0, pool: str = "p",
         gpu_type: str = "", npu: int = 0) -> scheduling.Node:
    capacity = resources.Resources(cpu, mem, gpus, resources.accels({"npu": npu}))
    return scheduling.Node(name, pool, capacity, tuple(range(gpus)), gpu_type)


def job(job_id: str, cpu: float = 1, mem: int = 1024, gpu: int = 0, count: int = 1, *,
        project: str = "a", pool: str = "p", priority: int = 1, seq: int | None = None,
        npu: int = 0, **kw: object) -> scheduling.Queued:
    per_task = resources.Resources(cpu, mem, gpu, resources.accels({"npu": npu}))
    return scheduling.Queued(job_id, project, pool, per_task, count, priority,
                             seq if seq is not None
                             else int(job_id.strip("abcdefghijklmnopqrstuvwxyz") or 0),
                             **kw)  # type: ignore[arg-type]


def running(job_id: str, nodes: Sequence[str], cpu: float = 1, mem: int = 1024, *,
            gpu_ids: Sequence[tuple[int, ...]] | None = None, project: str = "a",
            pool: str = "p", npu_ids: tuple[int, ...] = (), **kw: object) -> scheduling.Running:
    ids = gpu_ids or [()] * len(nodes)
    gpu = len(ids[0])
    npus = (("npu", npu_ids),) if npu_ids else ()
    slots = tuple(scheduling.TaskSlot(n, g, npus) for n, g in zip(nodes, ids, strict=True))
    per_task = resources.Resources(cpu, mem, gpu,
                                   resources.accels(npus and {"npu": len(npu_ids)}))
    return scheduling.Running(job_id, project, pool, per_task, slots,
                              **kw)  # type: ignore[arg-type]


def started(d: scheduling.Decisions) -> list[str]:
    return [s.job_id for s in d.starts]


def waits(d: scheduling.Decisions) -> dict[str, scheduling.Wait]:
    return {w.job_id: w for w in d.waits}


# --- examples -----------------------------------------------------------------------------


def test_jobs_of_one_project_start_in_submission_order_while_they_fit() -> None:
    d = scheduling.decide([job("j1", 2), job("j2", 2), job("j3", 2)], [node(cpu=4)])
    assert started(d) == ["j1", "j2"]
    assert waits(d)["j3"].code is scheduling.WaitCode.NO_CAPACITY
    assert waits(d)["j3"].message.startswith("waiting for resources: not enough free capacity")


def test_higher_priority_goes_first_and_the_rest_say_so() -> None:
    d = scheduling.decide([job("j1", 4), job("j2", 4, priority=3), job("j3", 4, priority=2)],
                          [node(cpu=4)])
    assert started(d) == ["j2"]
    w = waits(d)
    assert w["j3"].code is scheduling.WaitCode.NO_CAPACITY and w["j3"].ahead == 0
    assert w["j1"].code is scheduling.WaitCode.PRIORITY and w["j1"].ahead == 1
    assert "waiting behind higher priority: a job of priority 2" in w["j1"].message


def test_backfill_uses_gaps_but_never_the_heads_reservation() -> None:
    # n0 is half busy; the 4-core head reserves n1 (the freest node); a 1-core job may
    # still start on what is left of n0, but not on n1.
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    run = [running("r0", ["n0"], cpu=2), running("r1", ["n1"], cpu=1)]
    d = scheduling.decide([job("j1", 4), job("j2", 1), job("j3", 1), job("j4", 1)], nodes, run)
    assert started(d) == ["j2", "j3"]
    assert {s.slots[0].node for s in d.starts} == {"n0"}
    assert waits(d)["j1"].code is scheduling.WaitCode.NO_CAPACITY
    assert waits(d)["j4"].code is scheduling.WaitCode.QUEUED


def test_a_gang_that_fits_in_sum_but_not_per_node_says_so() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    run = [running("r0", ["n0"], cpu=1), running("r1", ["n1"], cpu=3)]
    d = scheduling.decide([job("j1", 2, count=2)], nodes, run)
    assert waits(d)["j1"].code is scheduling.WaitCode.GANG
    assert "gang does not fit" in waits(d)["j1"].message


def test_spread_puts_one_task_per_node_and_pack_fills_a_node_first() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=4), node("n2", cpu=4)]
    packed = scheduling.decide([job("j1", 1, count=3)], nodes)
    spread = scheduling.decide([job("j1", 1, count=3, spread=True)], nodes)
    assert [s.node for s in packed.starts[0].slots] == ["n0", "n0", "n0"]
    assert sorted(s.node for s in spread.starts[0].slots) == ["n0", "n1", "n2"]


def test_gpus_by_type_and_distinct_ids() -> None:
    nodes = [node("t4", cpu=8, gpus=2, gpu_type="T4"), node("a100", cpu=8, gpus=2,
                                                             gpu_type="A100")]
    d = scheduling.decide([job(f"j{i}", 1, gpu=1, gpu_type="A100") for i in (1, 2, 3)], nodes)
    assert [(s.slots[0].node, s.slots[0].gpu_ids) for s in d.starts] == [
        ("a100", (0,)), ("a100", (1,))]
    assert waits(d)["j3"].code is scheduling.WaitCode.NO_CAPACITY


def test_accelerators_by_name_go_only_where_they_are_with_distinct_devices() -> None:
    nodes = [node("cpu", cpu=8), node("npu", cpu=8, npu=4)]
    d = scheduling.decide([job("j1", 1, npu=2), job("j2", 1), job("j3", 1, npu=2),
                           job("j4", 1, npu=1)], nodes)
    # The CPU-only job leaves the NPU node's cores to NPU jobs.
    assert [(s.job_id, s.slots[0].node, s.slots[0].accel_ids) for s in d.starts] == [
        ("j1", "npu", (("npu", (0, 1)),)), ("j2", "cpu", ()), ("j3", "npu", (("npu", (2, 3)),))]
    w = waits(d)["j4"]
    assert w.code is scheduling.WaitCode.NO_CAPACITY
    assert w.message.endswith("needs 1 CPU, 1.0 GiB memory, 1 npu; free now cpu: 7 CPU, 15.0 GiB "
                              "memory; npu: 6 CPU, 14.0 GiB memory")
    # Devices a running job holds are not given again.
    run = [running("r1", ["npu"], npu_ids=(1, 2))]
    d = scheduling.decide([job("j1", 1, npu=2)], nodes, run)
    assert d.starts[0].slots[0].accel_ids == (("npu", (0, 3)),)


def test_an_accelerator_quota_holds_and_names_it() -> None:
    quotas = [scheduling.Quota("a", "p", accel=(("npu", 2),))]
    run = [running("r1", ["n0"], npu_ids=(0,))]
    d = scheduling.decide([job("j1", 1, npu=3)], [node(cpu=8, npu=8)], run, quotas)
    assert waits(d)["j1"].message == (
        "quota exceeded: npu quota of project a in pool p is 2, 1 in use, the job needs 3 "
        "(over by 2)")


def test_quota_holds_and_says_which_and_by_how_much() -> None:
    quotas = [scheduling.Quota("a", "p", gpu=2)]
    nodes = [node(cpu=16, gpus=8)]
    d = scheduling.decide([job("j1", 1, gpu=2), job("j2", 1, gpu=1)], nodes, quotas=quotas)
    assert started(d) == ["j1"]
    w = waits(d)["j2"]
    assert w.code is scheduling.WaitCode.QUOTA
    assert w.message == ("quota exceeded: GPU quota of project a in pool p is 2, 2 in use, "
                         "the job needs 1 (over by 1)")


def test_borrowing_uses_idle_capacity_and_is_marked() -> None:
    quotas = [scheduling.Quota("a", "p", cpu=1, borrowing=True)]
    d = scheduling.decide([job("j1", 1), job("j2", 1)], [node(cpu=4)], quotas=quotas)
    assert [(s.job_id, s.borrowed) for s in d.starts] == [("j1", False), ("j2", True)]


def test_borrowed_capacity_is_reclaimed_first() -> None:
    # b borrowed all of the node; a asks for its own quota back.
    quotas = [scheduling.Quota("a", "p", cpu=2),
              scheduling.Quota("b", "p", cpu=2, borrowing=True)]
    run = [running("r1", ["n0"], cpu=2, project="b", started_at=1),
           running("r2", ["n0"], cpu=2, project="b", borrowed=True, started_at=2)]
    d = scheduling.decide([job("j1", 2, project="a")], [node(cpu=4)], run, quotas)
    assert d.preempts == [scheduling.Preempt("r2", "j1", True)]
    assert waits(d)["j1"].code is scheduling.WaitCode.PREEMPTING


def test_higher_priority_preempts_only_preemptible_lower_priority_jobs() -> None:
    run = [running("keep", ["n0"], cpu=2, priority=1, preemptible=False),
           running("old", ["n0"], cpu=1, priority=1, preemptible=True, started_at=1),
           running("young", ["n0"], cpu=1, priority=1, preemptible=True, started_at=5),
           running("peer", ["n0"], cpu=0, priority=3, preemptible=True)]
    d = scheduling.decide([job("j1", 1, priority=3)], [node(cpu=4)], run)
    assert d.preempts == [scheduling.Preempt("young", "j1", False)]
    # Next pass, the victim is stopping: nobody else is preempted for the same job.
    run2 = [r if r.job_id != "young" else dataclasses.replace(r, stopping=True)
            for r in run]
    d2 = scheduling.decide([job("j1", 1, priority=3, was_head=True)], [node(cpu=4)], run2)
    assert d2.preempts == [] and waits(d2)["j1"].code is scheduling.WaitCode.PREEMPTING


def test_equal_priority_never_preempts() -> None:
    run = [running("r1", ["n0"], cpu=4, priority=2, preemptible=True)]
    d = scheduling.decide([job("j1", 1, priority=2)], [node(cpu=4)], run)
    assert d.preempts == [] and waits(d)["j1"].code is scheduling.WaitCode.NO_CAPACITY


def test_fair_share_serves_the_project_that_used_less_first() -> None:
    queue = [job("j1", 4, project="busy"), job("j2", 4, project="idle")]
    d = scheduling.decide(queue, [node(cpu=4)], usage={("busy", "p"): 0.9})
    assert started(d) == ["j2"]
    # Weight counts: twice the weight halves the usage that counts against it.
    quotas = [scheduling.Quota("busy", "p", weight=10)]
    d = scheduling.decide(queue, [node(cpu=4)], quotas=quotas,
                          usage={("busy", "p"): 0.9, ("idle", "p"): 0.2})
    assert started(d) == ["j1"]


def test_the_last_head_keeps_its_place_against_fair_share() -> None:
    queue = [job("j1", 4, project="busy", was_head=True), job("j2", 4, project="idle")]
    d = scheduling.decide(queue, [node(cpu=4)], usage={("busy", "p"): 0.9})
    assert started(d) == ["j1"]


def test_pools_are_separate() -> None:
    nodes = [node("n0", cpu=2, pool="cpu"), node("g0", cpu=8, gpus=1, pool="gpu")]
    d = scheduling.decide([job("j1", 2, pool="cpu"), job("j2", 2, pool="cpu"),
                           job("j3", 1, gpu=1, pool="gpu")], nodes)
    assert started(d) == ["j1", "j3"]
    assert waits(d)["j2"].pool == "cpu"


def test_a_pool_without_nodes_makes_its_jobs_wait_with_a_reason() -> None:
    d = scheduling.decide([job("j1", pool="gone")], [node()])
    assert waits(d)["j1"].code is scheduling.WaitCode.NO_NODE


# --- properties ---------------------------------------------------------------------------

PROJECTS = ["a", "b", "c"]


@st.composite
def clusters(draw: st.DrawFn) -> list[scheduling.Node]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.integers(0, 4))
        out.append(node(f"n{i}", cpu=draw(st.sampled_from([1, 2, 4, 8])),
                        mem=draw(st.integers(1, 16)) * 1024, gpus=gpus,
                        pool=draw(st.sampled_from(["p", "p", "q"])),
                        npu=draw(st.sampled_from([0, 0, 2, 4]))))
    return out


@st.composite
def queues(draw: st.DrawFn, start: int = 0) -> list[scheduling.Queued]:
    out = []
    for i in range(draw(st.integers(0, 14))):
        out.append(job(
            f"j{start + i}", cpu=draw(st.sampled_from([0.5, 1, 2, 4])),
            mem=draw(st.integers(0, 8)) * 512, gpu=draw(st.integers(0, 2)),
            count=draw(st.integers(1, 3)), project=draw(st.sampled_from(PROJECTS)),
            pool=draw(st.sampled_from(["p", "q"])), priority=draw(st.integers(1, 3)),
            seq=start + i, spread=draw(st.booleans()), npu=draw(st.sampled_from([0, 0, 1, 2]))))
    return out


@st.composite
def quota_sets(draw: st.DrawFn) -> list[scheduling.Quota]:
    out = []
    for p in PROJECTS:
        for pool in ("p", "q"):
            if draw(st.booleans()):
                out.append(scheduling.Quota(
                    p, pool, cpu=draw(st.sampled_from([None, 1, 2, 4, 8])),
                    memory_mb=draw(st.sampled_from([None, 2048, 8192])),
                    gpu=draw(st.sampled_from([None, 0, 1, 2])), borrowing=draw(st.booleans()),
                    weight=draw(st.sampled_from([0.5, 1, 2])),
                    accel=draw(st.sampled_from([(), (("npu", 0),), (("npu", 2),)]))))
    return out


#: a queue, the nodes, what runs on them, the quotas, and the projects' usage
World = tuple[list[scheduling.Queued], list[scheduling.Node], list[scheduling.Running],
              list[scheduling.Quota], dict[tuple[str, str], float]]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """A cluster with jobs already running on it (placed by a first pass), and a queue."""
    nodes = draw(clusters())
    first = draw(queues())
    placed = scheduling.decide(first, nodes)
    by_id = {q.job_id: q for q in first}
    run = []
    for s in placed.starts:
        q = by_id[s.job_id]
        run.append(scheduling.Running(q.job_id, q.project, q.pool, q.per_task, s.slots,
                                      priority=q.priority, seq=q.seq,
                                      preemptible=draw(st.booleans()),
                                      borrowed=draw(st.booleans()), started_at=q.seq,
                                      stopping=draw(st.booleans())))
    usage = {(p, pool): draw(st.sampled_from([0.0, 0.1, 0.5])) for p in PROJECTS
             for pool in ("p", "q")}
    return draw(queues(start=100)), nodes, run, draw(quota_sets()), usage


PROPS = settings(max_examples=120, deadline=None)


def _held(nodes: Sequence[scheduling.Node], run: Sequence[scheduling.Running],
          starts: Sequence[scheduling.Start], per_task: dict[str, resources.Resources],
          ) -> dict[str, resources.Resources]:
    used: dict[str, resources.Resources] = collections.defaultdict(lambda: resources.ZERO)
    for r in run:
        for s in r.slots:
            used[s.node] = used[s.node] + r.per_task
    for st_ in starts:
        for s in st_.slots:
            used[s.node] = used[s.node] + per_task[st_.job_id]
    return used


@PROPS
@given(worlds())
def test_no_node_is_over_committed_and_no_gpu_given_twice(world: World) -> None:
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    per_task = {q.job_id: q.per_task for q in queue}
    used = _held(nodes, run, d.starts, per_task)
    for n in nodes:
        assert used[n.name].fits_in(n.capacity), (n, used[n.name])
        ids = [g for r in run for s in r.slots if s.node == n.name for g in s.gpu_ids]
        ids += [g for st_ in d.starts for s in st_.slots if s.node == n.name for g in s.gpu_ids]
        assert len(ids) == len(set(ids)) and set(ids) <= set(n.gpu_ids)
        npus = [i for r in run for s in r.slots if s.node == n.name
                for k, ids in s.accel_ids if k == "npu" for i in ids]
        npus += [i for st_ in d.starts for s in st_.slots if s.node == n.name
                 for k, ids in s.accel_ids if k == "npu" for i in ids]
        assert len(npus) == len(set(npus)) and set(npus) <= set(range(n.capacity.count("npu")))
    for st_ in d.starts:
        q = next(q for q in queue if q.job_id == st_.job_id)
        assert all(len(s.gpu_ids) == q.per_task.gpu for s in st_.slots)
        assert all(sum(len(ids) for _, ids in s.accel_ids) == q.per_task.count("npu")
                   for s in st_.slots)
        pool_nodes = {n.name for n in nodes if n.pool == q.pool}
        assert {s.node for s in st_.slots} <= pool_nodes


@PROPS
@given(worlds())
def test_a_gang_is_started_whole_or_not_at_all(world: World) -> None:
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    counts = {q.job_id: q.count for q in queue}
    assert all(len(s.slots) == counts[s.job_id] for s in d.starts)
    decided = [s.job_id for s in d.starts] + [w.job_id for w in d.waits]
    assert sorted(decided) == sorted(counts)  # every job either starts or says why it waits


@PROPS
@given(worlds())
def test_no_quota_is_exceeded_without_borrowing(world: World) -> None:
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    by_id = {q.job_id: q for q in queue}
    for quota in quotas:
        before = resources.ZERO
        for r in run:
            if (r.project, r.pool) == (quota.project, quota.pool):
                before = before + r.per_task.times(len(r.slots))
        after, plain = before, resources.ZERO
        for s in d.starts:
            q = by_id[s.job_id]
            if (q.project, q.pool) == (quota.project, quota.pool):
                after = after + q.per_task.times(q.count)
                if not s.borrowed:
                    plain = plain + q.per_task.times(q.count)
        if not quota.borrowing:
            assert not any(s.borrowed for s in d.starts if by_id[s.job_id].project
                           == quota.project and by_id[s.job_id].pool == quota.pool)
        for limit, b, p in ((quota.cpu, before.cpu, plain.cpu),
                            (quota.memory_mb, before.memory_mb, plain.memory_mb),
                            (quota.gpu, before.gpu, plain.gpu),
                            *((n, before.count(k), plain.count(k)) for k, n in quota.accel)):
            if limit is not None and p:
                assert b + p <= limit + 1e-9, (quota, before, plain)


@PROPS
@given(worlds())
def test_backfill_never_takes_room_the_head_needs(world: World) -> None:
    """Once the jobs running before the head have ended, each pool's head fits, whatever
    this pass started in the gaps behind it."""
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    by_id = {q.job_id: q for q in queue}
    for w in d.waits:
        if w.code not in scheduling.HEAD_CODES:
            continue
        head = by_id[w.job_id]
        pool_nodes = [n for n in nodes if n.pool == head.pool]
        starts = [s for s in d.starts if by_id[s.job_id].pool == head.pool and s.backfill]
        left = [scheduling.Node(n.name, n.pool, n.capacity, n.gpu_ids, n.gpu_type)
                for n in pool_nodes]
        # Only what this pass started stays: the head must fit beside it.
        kept = [scheduling.Running(s.job_id, "x", head.pool, by_id[s.job_id].per_task, s.slots)
                for s in starts]
        again = scheduling.decide([head], left, kept)
        assert [s.job_id for s in again.starts] == [head.job_id], (w, starts)


@PROPS
@given(worlds(), st.randoms(use_true_random=False))
def test_decisions_are_deterministic(world: World, rnd: random.Random) -> None:
    queue, nodes, run, quotas, usage = world
    shuffled_q, shuffled_r, shuffled_quotas = list(queue), list(run), list(quotas)
    for xs in (shuffled_q, shuffled_r, shuffled_quotas):
        rnd.shuffle(xs)
    assert scheduling.decide(queue, nodes, run, quotas, usage) == scheduling.decide(
        shuffled_q, nodes, shuffled_r, shuffled_quotas, dict(usage))


@PROPS
@given(worlds())
def test_only_allowed_victims_are_preempted(world: World) -> None:
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    by_run = {r.job_id: r for r in run}
    by_id = {q.job_id: q for q in queue}
    for p in d.preempts:
        victim, for_job = by_run[p.job_id], by_id[p.for_job]
        assert not victim.stopping
        assert victim.pool == for_job.pool
        assert ((victim.preemptible and victim.priority < for_job.priority)
                or (victim.borrowed and victim.project != for_job.project))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_every_job_starts_in_the_end_and_the_oldest_is_never_starved(data: st.DataObject
                                                                    ) -> None:
    """A simulation: jobs run for a while and end; everything queued eventually runs, in
    no more time than running the jobs one after the other would take."""
    nodes = [node(f"n{i}", cpu=4, mem=8192, gpus=2) for i in range(data.draw(st.integers(1, 3)))]
    queue = data.draw(queues())
    queue = [scheduling.Queued(q.job_id, q.project, "p", q.per_task, q.count, q.priority,
                               q.seq, q.spread) for q in queue]
    # Only jobs that can ever fit.
    queue = [q for q in queue if scheduling.decide([q], nodes).starts]
    length = {q.job_id: data.draw(st.integers(1, 5)) for q in queue}
    waiting = {q.job_id: q for q in queue}
    run: dict[str, tuple[scheduling.Running, int]] = {}
    heads: set[str] = set()
    t = 0
    bound = sum(length.values()) + 1
    while waiting or run:
        assert t <= bound, f"still waiting at t={t}: {sorted(waiting)}"
        for job_id, (_r, end) in list(run.items()):
            if end <= t:
                del run[job_id]
        d = scheduling.decide([dataclasses.replace(q, was_head=q.job_id in heads)
                               for q in waiting.values()], nodes, [r for r, _ in run.values()])
        heads = {w.job_id for w in d.waits if w.code in scheduling.HEAD_CODES}
        for s in d.starts:
            q = waiting.pop(s.job_id)
            run[s.job_id] = (scheduling.Running(q.job_id, q.project, q.pool, q.per_task,
                                                s.slots, q.priority, q.seq),
                             t + length[q.job_id])
        t += 1


# --- what a project may see of others ------------------------------------------------------


def test_reasons_name_only_jobs_of_the_same_project() -> None:
    # b's head is next to start; a's jobs wait behind it without learning its id.
    run = [running("r0", ["n0"], cpu=4, project="a", priority=1, preemptible=True)]
    queue = [job("h1", 4, project="b", priority=3), job("a2", 1, project="a"),
             job("b3", 1, project="b")]
    d = scheduling.decide(queue, [node(cpu=4)], run)
    w = waits(d)
    assert w["h1"].code is scheduling.WaitCode.PREEMPTING
    assert w["h1"].message.endswith("starts once these job(s) have stopped: "
                                    "1 job(s) of other projects")
    assert w["a2"].message == ("waiting behind higher priority: a job of another project "
                               "(priority 3) is next to start in pool p")
    # Its own project's head is not named either: the head changes with every start, and a
    # reason naming it would rewrite every waiting row each time.
    assert w["b3"].message == ("waiting behind higher priority: a job of priority 3 is next "
                               "to start in pool p")


@PROPS
@given(worlds())
def test_no_reason_names_a_job_of_another_project(world: World) -> None:
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    project = {q.job_id: q.project for q in queue} | {r.job_id: r.project for r in run}
    for w in d.waits:
        foreign = [j for j, p in project.items() if p != project[w.job_id]]
        assert not [j for j in foreign if re.search(rf"\b{j}\b", w.message)], w


# --- the place in the queue users are shown ------------------------------------------------


def test_the_place_shown_follows_fair_share_not_submission() -> None:
    queue = [job("j1", 4, project="busy"), job("j2", 4, project="busy"),
             job("j3", 4, project="idle")]
    run = [running("r0", ["n0"], cpu=4, project="busy")]
    d = scheduling.decide(queue, [node(cpu=4)], run)
    order = scheduling.queue_order(queue, [node(cpu=4)],
                                   {("busy", "p"): resources.Resources(4, 1024)})
    assert [q.job_id for q in order["p"]] == ["j3", "j1", "j2"]
    assert [(w.job_id, w.ahead) for w in d.waits] == [("j3", 0), ("j1", 1), ("j2", 2)]


@PROPS
@given(worlds())
def test_the_place_shown_is_the_order_decide_considers_jobs_in(world: World) -> None:
    """Where nothing starts, `decide` answers jobs in `queue_order`'s order, and a job's
    `ahead` is its index there."""
    queue, nodes, run, quotas, usage = world
    d = scheduling.decide(queue, nodes, run, quotas, usage)
    held: dict[tuple[str, str], resources.Resources] = collections.defaultdict(
        lambda: resources.ZERO)
    for r in run:
        held[r.project, r.pool] = held[r.project, r.pool] + r.per_task.times(len(r.slots))
    order = scheduling.queue_order(queue, nodes, held, quotas, usage)
    pool_of = {q.job_id: q.pool for q in queue}
    busy = {pool_of[s.job_id] for s in d.starts}
    for pool, jobs in order.items():
        if pool in busy:
            continue
        answered = [(w.job_id, w.ahead) for w in d.waits if w.pool == pool]
        assert answered == [(q.job_id, i) for i, q in enumerate(jobs)]


# --- nodes a job is kept off (retry elsewhere) --------------------------------------------


def slots_of(d: scheduling.Decisions, job_id: str) -> list[str]:
    return [s.node for a in d.starts if a.job_id == job_id for s in a.slots]


def test_a_job_kept_off_a_node_starts_on_another() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=2)]
    d = scheduling.decide([job("j1", excluded=frozenset({"n0"}))], nodes)
    assert slots_of(d, "j1") == ["n1"]


def test_a_job_kept_off_a_node_waits_for_another_rather_than_take_it() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=2)]
    d = scheduling.decide([job("j1", 2, excluded=frozenset({"n0"})), job("j2", 2)], nodes,
                          [running("r", ["n1"], cpu=2)])
    assert started(d) == ["j2"]  # in n0's room, which j1 may not use
    assert slots_of(d, "j2") == ["n0"]
    assert waits(d)["j1"].code is scheduling.WaitCode.NO_CAPACITY


def test_a_gang_kept_off_a_node_spreads_over_the_rest() -> None:
    nodes = [node(f"n{i}", cpu=2) for i in range(3)]
    d = scheduling.decide([job("j1", 1, count=2, spread=True, excluded=frozenset({"n1"}))],
                          nodes)
    assert sorted(slots_of(d, "j1")) == ["n0", "n2"]


def test_exclusions_that_leave_no_node_able_to_hold_the_job_are_dropped() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=2)]
    kept = scheduling.keep_off(job("j1", 2, excluded=frozenset({"n0"})), nodes)
    assert kept.excluded == {"n0"}  # n1 could hold it once free
    dropped = scheduling.keep_off(job("j1", 3, excluded=frozenset({"n0"})), nodes)
    assert dropped.excluded == frozenset()  # only n0 ever could: it waits for n0, not for ever
    assert slots_of(scheduling.decide([dropped], nodes), "j1") == ["n0"]
    every = scheduling.keep_off(job("j1", excluded=frozenset({"n0", "n1"})), nodes)
    assert every.excluded == frozenset()


def test_a_job_pinned_to_a_node_goes_there_or_waits_for_it() -> None:
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    d = scheduling.decide([job("j1", node="n1")], nodes)
    assert slots_of(d, "j1") == ["n1"]  # not the first node that fits
    d = scheduling.decide([job("j1", 2, node="n1")], nodes, [running("r", ["n1"], cpu=4)])
    assert started(d) == [] and waits(d)["j1"].code is scheduling.WaitCode.NO_CAPACITY
