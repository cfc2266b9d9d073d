"""The reconciler with the scheduler: priorities, preemption and requeue, quotas, pools.

A real store, a fake executor (which can report many nodes) and a fake clock.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from corral import server
from corral import settings as settings_mod
from corral.domain import errors, resources, specs
from corral.scheduler import admission, usage
from corral.services import catalog as catalog_mod
from corral.services import pools, submit
from corral.store import db, identity_repo, queue_repo, schema
from tests import factories
from tests.conftest import make_settings
from tests.unit import fakes
from tests.unit.test_reconciler import GRACE, NODE, World, make_reconciler


def make_world(tmp: pathlib.Path, nodes: tuple[resources.Node, ...] = (NODE,),
               url: str | None = None, **overrides: Any) -> World:
    store = db.Store(url or f"sqlite:///{tmp / 'state.db'}")
    store.migrate()
    clock = fakes.FakeClock()
    settings = make_settings(tmp / "home", grace_period=GRACE, **overrides)
    fake = fakes.FakeExecutor(nodes[0], nodes[1:])
    cat = catalog_mod.Catalog.build(settings, list(nodes))
    with store.begin() as conn:
        project_id = identity_repo.ensure_default_project(conn, int(clock() * 1000))
    return World(tmp=tmp, store=store, fake=fake, clock=clock, settings=settings, catalog=cat,
                 project_id=project_id, rec=make_reconciler(store, fake, cat, settings, clock))


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.store.dispose()


def policy(priority: int = 1, preemptible: bool = False, **more: Any) -> dict[str, Any]:
    return {"resource": {"flavor_id": more.pop("flavor_id", "corral.cpu.1u"),
                         "node_count": more.pop("node_count", 1), **more},
            "schedule_policy": {"priority": priority, "preemptible": preemptible}}


def add_project(w: World, name: str) -> str:
    pid = f"{name:0<32}"[:32]
    with w.store.begin() as conn:
        conn.execute(schema.projects.insert().values(id=pid, name=name, created_at=0))
    return pid


def submit_to(w: World, project_id: str, **overrides: Any) -> str:
    overrides.setdefault("command", "python train.py")
    body = specs.JobCreate.model_validate(factories.make_job(**overrides))
    with w.store.begin() as conn:
        job_id = submit.create_job(conn, w.catalog, body, project_id=project_id,
                                   now=w.now_ms())
    w.clock.advance(w.submit_gap)
    return job_id


def set_quota(w: World, project_id: str, **quota: Any) -> None:
    row = {"pool_id": "default", "cpu": None, "memory_mb": None, "gpu": None,
           "borrowing": False, "weight": 1.0, **quota}
    with w.store.begin() as conn:
        queue_repo.set_quotas(conn, project_id, [row], w.now_ms())


def records(w: World, job_id: str) -> list[tuple[Any, ...]]:
    return [(a.start_type, a.end_reason, a.end_recover) for a in w.attempts(job_id)]


# --- preemption ---------------------------------------------------------------------------


def test_a_higher_priority_job_preempts_requeues_and_the_victim_keeps_its_place(
        world: World) -> None:
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    assert world.phase(victim)[0] == "Running"
    later = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    urgent = world.submit(spec=policy(3))
    world.tick()
    # SIGTERM at once; the victim still holds its cores through its grace period.
    assert world.fake.task(victim).signals == ["SIGTERM"]
    assert world.job(victim).preempt_requested_at is not None
    assert world.job(urgent).wait_code == "preempting"
    assert any(e.startswith(f"Preempted for job {urgent}") for e in world.events(victim))

    world.tick()  # the victim exited on SIGTERM: requeued, and the urgent job starts
    assert world.phase(victim) == ("Pending", "Queuing")
    assert world.phase(urgent)[0] == "Running"
    assert records(world, victim) == [("init_or_rescheduled", "preempted", "job_reschedule")]

    world.fake.exit(urgent, code=0)
    world.tick()
    # It kept its place: it starts before `later`, submitted after it.
    assert world.phase(victim)[0] == "Running"
    assert world.phase(later)[0] == "Pending"
    assert records(world, victim) == [("init_or_rescheduled", "preempted", "job_reschedule"),
                                      ("init_or_rescheduled", None, None)]


def test_a_victim_is_signalled_only_once_its_preemption_is_recorded(world: World) -> None:
    """The pass that decides a preemption records it; the next signals the victim. A
    server killed in between leaves a victim its successor stops and requeues: its exit
    is never read as a failure of its own."""
    victim = world.submit(retries=0, spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    urgent = world.submit(spec=policy(3))
    assert world.rec.tick() is True  # decided and recorded; the next pass comes at once
    assert world.fake.task(victim).signals == []
    assert world.job(victim).preempt_requested_at is not None
    world.restart()  # ... but the server died first
    world.tick()
    assert world.fake.task(victim).signals == ["SIGTERM"]
    world.tick()  # it exited on SIGTERM: requeued, not failed
    assert world.phase(victim) == ("Pending", "Queuing")
    assert world.phase(urgent)[0] == "Running"


def test_preemption_does_not_spend_the_retry_budget(world: World) -> None:
    victim = world.submit(retries=1, spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    for _ in range(3):  # preempted three times: more than its one retry
        urgent = world.submit(spec=policy(2, flavor_id="corral.cpu.full"))
        world.tick(2)
        assert world.phase(victim)[0] == "Pending"
        world.fake.exit(urgent, code=0)
        world.tick()
        assert world.phase(victim)[0] == "Running"
    world.fake.exit(victim, code=1)  # a real failure: the one retry is still there
    world.tick()
    world.wait_out_backoff()
    assert world.phase(victim)[0] == "Running"
    assert records(world, victim)[-1] == ("restarted", None, None)


def test_a_victim_that_ignores_sigterm_is_killed_after_the_grace_period(world: World) -> None:
    world.fake.ignore_sigterm = True
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    world.fake.ignore_sigterm = False
    urgent = world.submit(spec=policy(3))
    world.tick(2)
    assert world.phase(victim)[0] == "Running"
    world.clock.advance(GRACE)
    world.tick(2)
    assert world.fake.task(victim).signals == ["SIGTERM", "SIGKILL"]
    assert world.phase(victim)[0] == "Pending"
    assert world.phase(urgent)[0] == "Running"


def test_jobs_that_are_not_preemptible_are_never_preempted(world: World) -> None:
    keep = world.submit(spec=policy(1, False, flavor_id="corral.cpu.full"))
    world.tick()
    urgent = world.submit(spec=policy(3))
    world.tick(3)
    assert world.fake.task(keep).signals == []
    assert world.job(urgent).wait_code == "no_capacity"


def test_a_victim_that_finished_before_the_signal_completes(world: World) -> None:
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    world.fake.exit(victim, code=0)
    world.submit(spec=policy(3))
    world.tick()
    assert world.phase(victim)[0] == "Completed"


def test_a_terminated_victim_ends_terminated_not_requeued(world: World) -> None:
    world.fake.ignore_sigterm = True
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"))
    world.tick()
    world.submit(spec=policy(3))
    world.tick()
    world.terminate(victim)
    world.clock.advance(GRACE)
    world.tick(3)
    assert world.phase(victim)[0] == "Terminated"


# --- priorities and waiting reasons -------------------------------------------------------


def test_priority_orders_the_queue_and_the_others_say_why(world: World) -> None:
    blocker = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick()
    low = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    high = world.submit(spec=policy(2, flavor_id="corral.cpu.full"))
    world.tick(2)
    assert world.job(high).wait_code == "no_capacity"
    assert world.job(low).wait_code == "behind_priority"
    assert world.job(low).wait_reason.startswith(
        "waiting behind higher priority: a job of priority 2")
    world.fake.exit(blocker)
    world.tick()
    assert world.phase(high)[0] == "Running" and world.phase(low)[0] == "Pending"


def test_a_queued_jobs_reason_stays_put_while_the_jobs_ahead_start(world: World) -> None:
    # A reason that named the job next to start changed with every start: every waiting
    # job's row was rewritten each time, so a long queue cost writes for each one ahead.
    blocker = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick()
    queued = [world.submit(spec=policy(1, flavor_id="corral.cpu.full")) for _ in range(5)]
    world.tick(2)
    last = world.job(queued[-1])
    assert last.wait_code == "queued"
    assert last.wait_reason == "queued: behind the job next to start in pool default"
    for ahead in [blocker, *queued[:2]]:
        world.fake.exit(ahead)
        world.tick(2)
    assert world.phase(queued[2])[0] == "Running"
    now = world.job(queued[-1])
    assert (now.wait_reason, now.updated_at) == (last.wait_reason, last.updated_at)
    assert sum(e.startswith("queued") for e in world.events(queued[-1])) == 1


def test_a_pass_looks_past_the_queue_window_at_once_only_while_there_is_room(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "QUEUE_WINDOW", 4)
    (tmp_path / "big").mkdir()
    (tmp_path / "small").mkdir()
    big = make_world(tmp_path / "big", (resources.Node(name="local", cpu=16,
                                                        memory_mb=65536),))
    jobs = [big.submit() for _ in range(6)]
    assert big.rec.tick() is True  # the whole window started: the rest may fit too
    assert big.rec.tick() is False
    assert {big.phase(j)[0] for j in jobs} == {"Running"}
    # Two cores: the window is full but the machine is too, so another pass at once could
    # start nothing (it runs when a job ends, as usual).
    small = make_world(tmp_path / "small")
    for _ in range(6):
        small.submit()
    assert small.rec.tick() is False
    big.store.dispose()
    small.store.dispose()


def test_between_deep_passes_a_pass_reads_only_the_head_of_each_stream(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "NEAR", 2)
    now = [100.0]
    world.rec.admission.clock = lambda: now[0]
    reads: list[int] = []
    queued = queue_repo.queued
    monkeypatch.setattr(queue_repo, "queued",
                        lambda conn, limit: reads.append(limit) or queued(conn, limit))
    world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick()  # the first pass looks deep; the job starts and fills the machine
    waiting = [world.submit(spec=policy(1, flavor_id="corral.cpu.full")) for _ in range(4)]
    world.tick()  # the same second: the first NEAR jobs only
    assert reads == [admission.QUEUE_WINDOW, 2]
    assert [world.phase(j)[0] for j in waiting] == ["Pending", "Pending", "Creating",
                                                     "Creating"]
    now[0] += admission.DEEP_EVERY_S  # a second later a pass looks deep again
    world.tick()
    assert reads[-1] == admission.QUEUE_WINDOW
    assert [world.phase(j)[0] for j in waiting] == ["Pending"] * 4
    assert all(world.job(j).wait_reason for j in waiting)


def test_a_pass_that_used_a_near_window_up_is_followed_at_once_by_a_deep_one(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "NEAR", 2)
    big = make_world(tmp_path, (resources.Node(name="local", cpu=16, memory_mb=65536),))
    big.rec.admission.clock = lambda: 100.0  # no second goes by
    big.rec.admission.deep_at = 101.0  # (as after a deep pass)
    jobs = [big.submit() for _ in range(5)]
    assert big.rec.tick() is True  # both near jobs started: the rest may fit too
    assert big.rec.tick() is False  # a deep pass: it starts the other three
    assert {big.phase(j)[0] for j in jobs} == {"Running"}
    big.store.dispose()


def test_a_new_job_that_opens_a_stream_is_decided_on_at_once(world: World) -> None:
    for _ in range(2):
        world.submit(spec=policy(1))
    waiting = [world.submit(spec=policy(1)) for _ in range(3)]
    world.tick()
    assert world.job(waiting[0]).wait_reason.startswith("waiting for resources")
    urgent = submit_to(world, world.project_id, spec=policy(3))
    world.tick()
    assert world.job(urgent).wait_reason.startswith("waiting for resources")
    assert world.job(waiting[0]).wait_reason.startswith("waiting behind higher priority")


def test_the_api_the_storage_thread_and_the_executor_all_wake_the_scheduler(
        tmp_path: pathlib.Path) -> None:
    platform = server.build(make_settings(tmp_path / "home"))
    try:
        for wake in (platform.context.wake,  # a job submitted, stopped, deleted, a quota
                     platform.syncer.wake,  # a job's inputs fetched: it joins the queue
                     platform.reconciler.launches.wake):  # an attempt's code copied
            platform.wake_event.clear()
            wake()
            assert platform.wake_event.is_set()
    finally:
        platform.stop()


def test_a_reason_is_an_event_when_its_kind_changes(world: World) -> None:
    world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    waiting = world.submit(spec=policy(1, flavor_id="corral.cpu.full"))
    world.tick(3)
    assert sum(e.startswith("waiting for resources") for e in world.events(waiting)) == 1
    world.submit(spec=policy(3, flavor_id="corral.cpu.full"))
    world.tick(2)
    assert world.events(waiting)[-1].startswith("waiting behind higher priority")


# --- quotas -------------------------------------------------------------------------------


def test_a_quota_holds_and_the_job_says_by_how_much(world: World) -> None:
    set_quota(world, world.project_id, cpu=1)
    first, second = world.submit(), world.submit()
    world.tick(2)
    assert world.phase(first)[0] == "Running"
    assert world.phase(second)[0] == "Pending"
    job = world.job(second)
    assert job.wait_code == "quota_exceeded"
    assert job.wait_reason == (f"quota exceeded: CPU quota of project {world.project_id} in "
                               "pool default is 1 core(s), 1 in use, the job needs 1 "
                               "(over by 1)")
    with world.store.read() as conn:
        [q] = pools.project_quotas(conn, world.project_id)["quotas"]
    assert q["used"]["cpu"] == 1 and q["limits"] == {"cpu": 1}
    world.fake.exit(first)
    world.tick()
    assert world.phase(second)[0] == "Running"


def test_borrowed_capacity_is_given_back_to_the_quota_owner(world: World) -> None:
    other = add_project(world, "other")
    set_quota(world, world.project_id, cpu=1)
    set_quota(world, other, cpu=1, borrowing=True)
    a, b = submit_to(world, other), submit_to(world, other)
    world.tick()
    assert [world.phase(j)[0] for j in (a, b)] == ["Running", "Running"]
    assert world.job(b).borrowed
    mine = world.submit()
    world.tick(2)
    assert world.phase(b)[0] == "Pending"  # the borrower was reclaimed ...
    assert world.phase(a)[0] == "Running"  # ... and only it
    assert world.phase(mine)[0] == "Running"
    assert any("reclaiming capacity it borrowed" in e for e in world.events(b))


def test_fair_share_serves_the_project_that_used_less(world: World) -> None:
    other = add_project(world, "other")
    busy = world.submit(flavor_id="corral.cpu.full")
    world.tick()
    world.clock.advance(600)  # the default project holds the whole machine for 10 minutes
    world.tick()
    mine = world.submit(flavor_id="corral.cpu.full")
    theirs = submit_to(world, other, flavor_id="corral.cpu.full")
    world.tick()
    world.fake.exit(busy)
    world.tick()
    assert world.phase(theirs)[0] == "Running"
    assert world.phase(mine)[0] == "Pending"


# --- what one project sees of another's jobs --------------------------------------------


def test_another_projects_jobs_are_never_named_to_a_project(world: World) -> None:
    """A victim's preemption event, the reasons of jobs waiting behind another project's
    head, and the queue a project is shown describe other projects' jobs, never name
    them."""
    other = add_project(world, "other")
    victim = world.submit(spec=policy(1, True, flavor_id="corral.cpu.full"), name="mine-1")
    world.tick()
    urgent = submit_to(world, other, spec=policy(3, flavor_id="corral.cpu.full"),
                       name="secret-name")
    mine = world.submit(spec=policy(1, flavor_id="corral.cpu.full"), name="mine-2")
    world.fake.ignore_sigterm = True
    world.tick()
    assert world.job(urgent).wait_code == "preempting"
    assert world.job(mine).wait_code == "behind_priority"
    assert world.job(mine).wait_reason == (
        "waiting behind higher priority: a job of another project (priority 3) is next "
        "to start in pool default")
    assert any(e.startswith("Preempted for a priority-3 job of another project (priority 3 "
                            "over its 1)") for e in world.events(victim))
    with world.store.read() as conn:
        [pool] = pools.queue(conn, world.catalog, world.project_id)
        seen_by_them = pools.queue(conn, world.catalog, other)
    shown = str(pool) + "".join(world.events(victim)) + "".join(world.events(mine))
    assert urgent not in shown and "secret-name" not in shown
    assert [(j["id"], j["wait_code"]) for j in pool["jobs"]] == [
        (None, "preempting"), (mine, "behind_priority")]
    assert victim not in str(seen_by_them) and mine not in str(seen_by_them)
    assert seen_by_them[0]["jobs"][1]["reason"] == "waiting behind higher priority"


# --- the place in the queue ---------------------------------------------------------------


def test_the_place_shown_is_the_schedulers_order_with_fair_share(world: World) -> None:
    """The default project has held the machine for a while: a later job of an idle
    project is ahead of its waiting jobs, in the queue and in each job's position."""
    other = add_project(world, "other")
    busy = world.submit(flavor_id="corral.cpu.full")
    world.tick()
    world.clock.advance(600)
    world.tick()
    mine = [world.submit(flavor_id="corral.cpu.full") for _ in range(2)]
    theirs = submit_to(world, other, flavor_id="corral.cpu.full")
    world.tick(2)
    with world.store.read() as conn:
        ahead = pools.jobs_ahead(conn, world.catalog, [*mine, theirs])
        [pool] = pools.queue(conn, world.catalog, other)
    assert ahead == {theirs: 0, mine[0]: 1, mine[1]: 2}
    assert [j["position"] for j in pool["jobs"]] == [1, 2, 3]
    assert pool["jobs"][0]["id"] == theirs
    world.fake.exit(busy)
    world.tick()
    assert world.phase(theirs)[0] == "Running"  # the order shown is the order served


# --- pools --------------------------------------------------------------------------------


def test_jobs_run_only_on_their_pools_nodes(tmp_path: pathlib.Path) -> None:
    gpus = tuple(resources.Gpu(i, "A100", 40960) for i in range(2))
    nodes = (NODE, resources.Node("gpu-1", cpu=8, memory_mb=32768, gpus=gpus))
    w = make_world(tmp_path, nodes, pools=[settings_mod.PoolConfig(pool_id="gpu",
                                                                   nodes=["gpu-*"])],
                   flavors=[settings_mod.FlavorConfig(flavor_id="c1", cpu=1, memory_gb=1),
                            settings_mod.FlavorConfig(flavor_id="g1", cpu=1, memory_gb=1,
                                                      gpu=1)])
    cpu_job = w.submit(flavor_id="c1")
    gpu_job = w.submit(flavor_id="c1", spec=policy(flavor_id="g1", pool_id="gpu"))
    w.tick()
    assert [s.node for s in w.fake.launches(cpu_job)] == ["local"]
    assert [s.node for s in w.fake.launches(gpu_job)] == ["gpu-1"]
    with pytest.raises(errors.NeverFits, match="pool 'default'"):
        w.submit(flavor_id="g1")  # no GPU in the default pool: refused at submit
    with pytest.raises(errors.BadParameter, match="pool_id 'nope' does not exist"):
        w.submit(spec=policy(flavor_id="c1", pool_id="nope"))
    with pytest.raises(errors.NeverFits, match="pool 'gpu' holds at most 8"):
        w.submit(spec=policy(flavor_id="c1", pool_id="gpu", node_count=9))
    with w.store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.jobs)).scalar() == 2
    w.store.dispose()


def test_a_gang_spreads_over_nodes_when_asked(tmp_path: pathlib.Path) -> None:
    nodes = (NODE, resources.Node("n2", cpu=2, memory_mb=8192))
    w = make_world(tmp_path, nodes)
    spread = w.submit(spec={**policy(node_count=2),
                            "schedule_policy": {"placement": "spread"}})
    packed = w.submit(spec=policy(node_count=2))
    w.tick()
    assert sorted(s.node for s in w.fake.launches(spread)) == ["local", "n2"]
    assert sorted(s.node for s in w.fake.launches(packed)) == ["local", "n2"]
    w.store.dispose()


# --- accelerators other than GPUs ---------------------------------------------------------


NPU_NODE = resources.Node("ascend", cpu=8, memory_mb=32768, accelerators=(
    resources.Accelerator("npu", 4, "Ascend 910B"),))


def npu_world(tmp: pathlib.Path) -> World:
    return make_world(tmp, (NODE, NPU_NODE), flavors=[
        settings_mod.FlavorConfig(flavor_id="c1", cpu=1, memory_gb=1),
        settings_mod.FlavorConfig(flavor_id="n2", cpu=1, memory_gb=1,
                                  accelerators={"npu": 2}),
        settings_mod.FlavorConfig(flavor_id="t1", cpu=1, memory_gb=1,
                                  accelerators={"tpu": 1})])


def test_npu_jobs_get_their_own_devices_pinned_and_keep_them_on_restart(
        tmp_path: pathlib.Path) -> None:
    w = npu_world(tmp_path)
    first = w.submit(flavor_id="n2", retries=1)
    second = w.submit(flavor_id="n2")
    third = w.submit(flavor_id="n2")
    w.tick()
    env = [w.fake.launches(j)[0].env for j in (first, second)]
    assert [e["ASCEND_RT_VISIBLE_DEVICES"] for e in env] == ["0,1", "2,3"]
    assert [s.demand.accel for s in w.fake.launches(first)] == [(("npu", 2),)]
    assert w.job(third).wait_code == "no_capacity"
    assert "1 CPU, 1.0 GiB memory, 2 npu" in w.job(third).wait_reason
    with w.store.read() as conn:
        [pool] = pools.pools(conn, w.catalog)
    assert pool["free"]["accelerators"] == {"npu": 0}  # none left is said, not left out
    w.fake.exit(first, code=1)  # restarted in place: the same devices
    w.tick()
    assert w.fake.launches(first)[-1].env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    cpu_only = w.submit(flavor_id="c1")
    w.tick()
    assert w.fake.launches(cpu_only)[0].env.get("ASCEND_RT_VISIBLE_DEVICES", "") == ""
    with pytest.raises(errors.NeverFits, match="no node of pool 'default' has any tpu"):
        w.submit(flavor_id="t1")
    w.store.dispose()


def test_an_npu_quota_holds_and_the_reason_names_it(tmp_path: pathlib.Path) -> None:
    w = npu_world(tmp_path)
    with w.store.begin() as conn:
        queue_repo.set_quotas(conn, w.project_id, [{
            "pool_id": "default", "cpu": None, "memory_mb": None, "gpu": None,
            "borrowing": False, "weight": 1.0, "accelerators": '{"npu": 3}'}], w.now_ms())
    first, second = w.submit(flavor_id="n2"), w.submit(flavor_id="n2")
    w.tick()
    assert w.phase(first)[0] == "Running" and w.phase(second)[0] == "Pending"
    assert w.job(second).wait_reason == (
        f"quota exceeded: npu quota of project {w.project_id} in pool default is 3, 2 in "
        "use, the job needs 2 (over by 1)")
    with w.store.read() as conn:
        [q] = pools.project_quotas(conn, w.project_id)["quotas"]
        [pool] = pools.pools(conn, w.catalog)
    assert q["limits"] == {"accelerators": {"npu": 3}}
    assert q["used"]["accelerators"] == {"npu": 2}
    assert pool["capacity"]["accelerators"] == {"npu": 4}
    assert pool["free"]["accelerators"] == {"npu": 2}
    w.store.dispose()


def test_a_pass_with_nothing_held_and_no_usage_writes_no_usage(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fair share's recent usage is written every few seconds while something is held or
    remembered; an idle server's passes (or those between one job and the next) write
    nothing."""
    saved: list[Any] = []
    save_usage = queue_repo.save_usage
    monkeypatch.setattr(queue_repo, "save_usage",
                        lambda conn, rows: saved.append(list(rows)) or save_usage(conn, rows))
    world.tick(3)
    assert saved == []
    job = world.submit()
    world.tick(2)
    assert world.phase(job)[0] == "Running"
    assert [r.project_id for r in saved[-1]] == [world.project_id]  # held: remembered
    world.fake.exit(job)
    world.tick()
    world.clock.advance(3600)  # long enough for the share to fade away
    world.tick()
    assert saved[-1] == []
    n = len(saved)
    world.clock.advance(usage.EVERY_MS / 1000)
    world.tick(3)
    assert len(saved) == n


def test_nothing_starts_while_the_disk_is_below_its_floor(world: World) -> None:
    """A real disk, a floor above what it has free: the job waits and says why; running
    jobs go on; once the floor is met again (here: lowered), it starts."""
    running = world.submit()
    world.tick()
    world.settings = world.settings.model_copy(update={"disk_free_floor_gb": 1e9})
    world.restart()
    waiting = world.submit()
    world.tick(2)
    job = world.job(waiting)
    assert (job.phase, job.wait_code) == ("Pending", "disk_low")
    assert job.wait_reason.startswith("waiting for disk space: ")
    assert "below the floor of" in job.wait_reason and "disk_free_floor_gb" in job.wait_reason
    assert world.phase(running)[0] == "Running"
    world.settings = world.settings.model_copy(update={"disk_free_floor_gb": 0})
    world.restart()
    world.tick()
    assert world.phase(waiting)[0] == "Running"
