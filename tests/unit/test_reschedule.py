# ruff: noqa: F811 - `world` is the reconciler tests' fixture, imported to be used here
"""Jobs placed again after an infrastructure fault (a node leaving the cluster), and the
cluster-facing parts of placement: gangs spread or packed, flavors across node shapes."""

from __future__ import annotations

import pytest

from corral.domain import errors, resources, specs
from tests import factories
from tests.unit.test_reconciler import World, world  # noqa: F401 - the fixture

BIG = resources.Node(name="big", cpu=4, memory_mb=16384)
SMALL = resources.Node(name="small", cpu=2, memory_mb=8192)


def on_cluster(w: World, *nodes: resources.Node) -> None:
    w.fake.node_list = list(nodes)


def test_a_job_whose_node_is_lost_is_placed_again_without_spending_a_retry(
        world: World) -> None:
    on_cluster(world, BIG, SMALL)
    job_id = world.submit(retries=0)
    world.tick()
    [first] = world.tasks(job_id)
    assert world.phase(job_id) == ("Running", "Running")

    world.clock.advance(1)
    world.fake.lose_node(first.node)
    started = world.job(job_id).start_time
    world.tick(2)  # the loss is seen; the job is queued and placed on what is left

    assert world.phase(job_id) == ("Running", "Running")
    [lost_record, record] = world.attempts(job_id)
    assert (lost_record.end_reason, lost_record.end_related_task, lost_record.end_recover) == (
        "node lost", "worker-0", "job_reschedule")
    assert record.start_type == "init_or_rescheduled"
    [old] = world.tasks(job_id, 1)
    assert old.state == "node_lost"
    [new] = world.tasks(job_id, 2)
    assert new.node != first.node
    assert "Job requeued: node lost" in world.events(job_id)

    world.fake.exit(job_id, code=0)
    world.tick()
    assert world.phase(job_id) == ("Completed", "Completed")
    assert world.job(job_id).start_time == started  # the job's start, not the attempt's


def test_a_lost_gang_member_stops_the_others_before_the_job_is_placed_again(
        world: World) -> None:
    on_cluster(world, BIG, SMALL)
    job_id = world.submit(node_count=2, flavor_id="corral.cpu.1u")
    world.tick()
    tasks = world.tasks(job_id)
    assert {t.node for t in tasks} == {"big", "small"}  # spread by default
    world.fake.lose_node("small")
    world.tick()
    survivor = next(t for t in tasks if t.node == "big")
    assert world.fake.task(job_id, survivor.name).signals == ["SIGTERM"]
    world.tick(2)
    assert world.phase(job_id) == ("Running", "Running")
    assert {t.node for t in world.tasks(job_id, 2)} == {"big"}
    assert [a.end_recover for a in world.attempts(job_id)] == ["job_reschedule", None]


def test_a_rescheduled_job_keeps_its_place_in_the_queue(world: World) -> None:
    """Its old place: behind the pool's head (which keeps its reservation, so heads do not
    wander: domain/scheduling.py), ahead of every job submitted after it."""
    on_cluster(world, SMALL)
    first = world.submit(flavor_id="corral.cpu.full")
    world.tick()
    head = world.submit(flavor_id="corral.cpu.full")
    later = world.submit(flavor_id="corral.cpu.full")
    world.tick()
    assert world.phase(head) == world.phase(later) == ("Pending", "Queuing")
    world.fake.lose_node("small")
    world.fake.node_list = [resources.Node(name="small2", cpu=2, memory_mb=8192)]
    world.tick(2)
    assert world.phase(head) == ("Running", "Running")
    assert world.phase(first) == world.phase(later) == ("Pending", "Queuing")
    world.fake.exit(head)
    world.tick(2)
    assert world.phase(first) == ("Running", "Running")  # ahead of the job after it
    assert world.phase(later) == ("Pending", "Queuing")


def test_a_job_terminated_while_its_node_is_lost_ends_terminated(world: World) -> None:
    on_cluster(world, BIG, SMALL)
    job_id = world.submit()
    world.tick()
    [t] = world.tasks(job_id)
    world.fake.lose_node(t.node)
    world.terminate(job_id)
    world.tick(2)
    assert world.phase(job_id) == ("Terminated", "Terminated")


def test_nodes_joining_change_the_catalog_the_api_sees(world: World) -> None:
    seen = []
    world.rec.on_catalog = seen.append
    on_cluster(world, SMALL, BIG)
    world.tick()
    assert [n.name for n in world.rec.catalog.nodes] == ["small", "big"]
    assert seen and seen[-1] is world.rec.catalog
    flavors = {f.flavor_id: f for f in world.rec.catalog.flavors}
    assert flavors["corral.cpu.2u"].max_num == 3  # one on small, two on big


def test_a_gang_spreads_unless_the_job_asks_to_pack() -> None:
    body = factories.make_job(command="true")
    policy = specs.JobCreate.model_validate(body).spec.schedule_policy or specs.SchedulePolicy()
    assert policy.strategy == "spread"
    body["spec"]["schedule_policy"] = {"placement": "pack"}
    assert specs.JobCreate.model_validate(body).spec.schedule_policy.strategy == "pack"
    body["spec"]["schedule_policy"] = {"placement": "scatter"}
    with pytest.raises(ValueError, match="pack"):
        specs.JobCreate.model_validate(body)


def test_cluster_flavors_cover_every_node_shape() -> None:
    gpu = resources.Node(name="g", cpu=2, memory_mb=8192,
                         gpus=(resources.Gpu(0, "GPU", 0),))
    ids = {f.flavor_id for f in resources.cluster_flavors([SMALL, gpu, BIG])}
    assert {"corral.cpu.1u", "corral.cpu.2u", "corral.gpu.1x"} <= ids
    with pytest.raises(errors.NeverFits):
        resources.check_fits_somewhere(resources.Resources(8, 1024), 1, [SMALL, BIG])
