"""Pools on executors of their own: the configuration, the nodes each pool gets, and the
reconciler driving a local pool and a Ray pool through one routed executor (fakes)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pydantic
import pytest

from corral import server
from corral import settings as settings_mod
from corral.domain import errors, resources
from corral.executors import base, routing
from corral.services import catalog as catalog_mod
from corral.store import db, identity_repo
from tests.conftest import make_settings
from tests.unit import fakes
from tests.unit.test_reconciler import GRACE, World, make_reconciler
from tests.unit.test_reconciler_scheduling import policy

RAY = "ray://head:10001"
CLI = "from corral.cli import main; main.main()"
BOX = resources.Node("box", cpu=4, memory_mb=8192)
R1 = resources.Node("ray-aaaaaaaaaaaa", cpu=8, memory_mb=16384)
R2 = resources.Node("ray-bbbbbbbbbbbb", cpu=8, memory_mb=16384)


def pool(pool_id: str, **more: Any) -> dict[str, Any]:
    return {"pool_id": pool_id, **more}


def settings(tmp: pathlib.Path, *pools: dict[str, Any], **more: Any) -> settings_mod.Settings:
    return make_settings(tmp / "home", pools=list(pools), **more)


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(("pools", "more", "message"), [
    ([pool("gpu", executor="k8s")], {}, "unknown executor 'k8s'; use one of: local, ray"),
    ([pool("gpu", executor="ray")], {}, "pool 'gpu': executor 'ray' needs the cluster's "
                                        "address: auto, HOST:PORT or ray://HOST:PORT"),
    ([pool("cpu", executor="local", address=RAY)], {},
     "pool 'cpu': executor 'local' runs on this machine and takes no address"),
    ([pool("gpu", address=" ")], {}, "pool 'gpu': address is empty"),
    ([pool("gpu", address=RAY), pool("gpu")], {}, "two pools are named 'gpu'"),
    ([pool("default", executor="local")], {"ray_address": "auto"},
     "ray_address (auto) puts the default pool 'default' on that Ray cluster, but its "
     "[[pools]] entry puts it on this machine; say it in one place"),
])
def test_pool_executors_that_make_no_sense_are_refused_clearly(
        tmp_path: pathlib.Path, pools: list[dict[str, Any]], more: dict[str, Any],
        message: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        settings(tmp_path, *pools, **more)
    assert message in str(caught.value)


def test_a_bad_pool_executor_stops_the_server_with_one_line(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[pools]]\npool_id = "gpu"\nexecutor = "slurm"\n')
    env = {"CORRAL_HOME": str(tmp_path / "home"), "CORRAL_CONFIG": str(config),
           "PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", CLI, "server"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "pools.0.executor: Value error, unknown executor 'slurm'; use one of: local, ray" \
        in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1"])
def test_an_unreachable_cluster_fails_the_start_before_a_fresh_home_is_written(
        tmp_path: pathlib.Path, address: str) -> None:
    home = tmp_path / "home"
    with pytest.raises(errors.CorralError, match="cannot reach the Ray cluster"):
        server.build(make_settings(home, pools=[pool("gpu", address=address)]))
    assert not home.exists()  # no database, admin, key or credential to match later


def test_a_used_home_is_refused_to_a_second_server_before_its_cluster_is_tried(
        tmp_path: pathlib.Path) -> None:
    first = server.build(make_settings(tmp_path / "home"))
    try:
        with pytest.raises(server.AlreadyRunning):
            server.build(make_settings(tmp_path / "home", ray_address="127.0.0.1:1"))
    finally:
        first.stop()


def test_each_pool_runs_on_its_executor_and_the_rest_on_the_default_pools(
        tmp_path: pathlib.Path) -> None:
    s = settings(tmp_path, pool("cpu", executor="local"), pool("gpu", address=RAY),
                 pool("other"))
    assert s.pool_executors() == {"default": "local", "cpu": "local", "gpu": f"ray:{RAY}",
                                  "other": "local"}
    on_ray = settings(tmp_path, pool("cpu", executor="local"), pool("more"),
                      ray_address="10.0.0.1:6379")
    assert on_ray.pool_executors() == {"default": "ray:10.0.0.1:6379", "cpu": "local",
                                       "more": "ray:10.0.0.1:6379"}


def test_nodes_go_to_pools_on_their_own_executor(tmp_path: pathlib.Path) -> None:
    origin = {"box": "local", R1.name: f"ray:{RAY}", R2.name: f"ray:{RAY}"}
    nodes = [BOX, R1, R2]
    # A pool that names an executor and no nodes takes that executor's nodes.
    s = settings(tmp_path, pool("cpu", executor="local"), pool("gpu", address=RAY))
    assert catalog_mod.assign_pools(s, nodes, origin) == {
        "box": "cpu", R1.name: "gpu", R2.name: "gpu"}
    # Patterns choose among one executor's nodes; the default pool takes the local rest.
    s = settings(tmp_path, pool("big", address=RAY, nodes=["ray-b*"]),
                 pool("small", address=RAY, nodes=["ray-a*", "box"]))
    assert catalog_mod.assign_pools(s, nodes, origin) == {
        "box": "default", R1.name: "small", R2.name: "big"}
    # No catch-all pool on the cluster: a node no pool names runs nothing.
    s = settings(tmp_path, pool("big", address=RAY, nodes=["ray-b*"]))
    assert catalog_mod.assign_pools(s, nodes, origin)[R1.name] == ""
    cat = catalog_mod.Catalog.build(s, nodes, origin)
    assert [n.name for n in cat.scheduling_nodes() if n.pool in cat.pool_ids] == [
        "box", R2.name]
    # Without origins (one executor) nothing changes from before: the rest is the default.
    s = settings(tmp_path, pool("gpu", nodes=["ray-a*"]))
    assert catalog_mod.assign_pools(s, nodes) == {
        "box": "default", R1.name: "gpu", R2.name: "default"}


# --- the routed executor --------------------------------------------------------------------


def test_pools_say_what_runs_them_and_no_password_of_an_address(
        tmp_path: pathlib.Path) -> None:
    s = settings(tmp_path, pool("cpu", executor="local"), pool("gpu", address=RAY),
                 pool("lab", address="ray://corral:s3cret@lab-head:10001"),
                 ray_address="10.0.0.5:6379")
    cat = catalog_mod.Catalog.build(s, [])
    assert {p: cat.executor_of(p) for p in cat.pool_ids} == {
        "default": {"executor": "ray", "address": "10.0.0.5:6379"},
        "cpu": {"executor": "local", "address": None},
        "gpu": {"executor": "ray", "address": RAY},
        "lab": {"executor": "ray", "address": "ray://lab-head:10001"},
    }


def test_a_node_seen_through_two_executors_is_refused() -> None:
    with pytest.raises(errors.CorralError, match="seen through two executors"):
        routing.Routed({"ray:a": fakes.FakeExecutor(R1), "ray:b": fakes.FakeExecutor(R1)})


def test_handles_go_back_to_the_executor_that_launched_them(tmp_path: pathlib.Path) -> None:
    box, ray = fakes.FakeExecutor(BOX), fakes.FakeExecutor(R1)
    ex = routing.Routed({"local": box, f"ray:{RAY}": ray})
    spec = base.LaunchSpec(job_id="j", task="worker-0", attempt=1, launch_id="l1", argv=(),
                           cwd="/", env={}, log_path="/x", control_dir=str(tmp_path),
                           node=R1.name)
    handle = ex.launch(spec)
    assert handle.executor == f"ray:{RAY}" and list(ray.tasks) == ["l1"] and not box.tasks
    ray.node_list = []  # the node left the cluster: its handle still finds its executor
    ray.tasks["l1"].exit_code = 3
    assert ex.poll(handle).exit_code == 3
    assert ex.poll(handle).handle == handle
    ex.release(handle)
    assert ray.released == ["l1"] and not box.released
    # A launch on a node no executor has shown goes back to the queue.
    gone = ex.recover(base.LaunchSpec(**{**spec.__dict__, "node": "ray-gone"}))
    assert gone.state is base.State.NODE_LOST and gone.handle is not None


# --- the reconciler over a local pool and a Ray pool -----------------------------------------


def test_jobs_of_a_local_pool_and_a_ray_pool_run_on_their_executors(
        tmp_path: pathlib.Path) -> None:
    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    clock = fakes.FakeClock()
    s = make_settings(tmp_path / "home", grace_period=GRACE,
                      pools=[pool("cpu", executor="local"), pool("gpu", address=RAY)])
    box, ray = fakes.FakeExecutor(BOX), fakes.FakeExecutor(R1)
    ex = routing.Routed({"local": box, f"ray:{RAY}": ray})
    cat = catalog_mod.Catalog.build(s, ex.nodes(), routing.origin(ex))
    with store.begin() as conn:
        project_id = identity_repo.ensure_default_project(conn, int(clock() * 1000))
    w = World(tmp=tmp_path, store=store, fake=box, clock=clock, settings=s, catalog=cat,
              project_id=project_id, rec=make_reconciler(store, ex, cat, s, clock))
    try:
        here = w.submit(spec=policy(pool_id="cpu"))
        there = w.submit(spec=policy(pool_id="gpu"))
        w.tick()
        assert [t.spec.node for t in box.tasks.values()] == ["box"]
        assert [t.spec.job_id for t in ray.tasks.values()] == [there]
        assert [t.node for t in w.tasks(here)] == ["box"]
        # A node joins the cluster: it is in the Ray pool.
        ray.node_list.append(R2)
        w.tick()
        assert [n.name for n in w.rec.catalog.pool_nodes("gpu")] == [R1.name, R2.name]
        assert [n.name for n in w.rec.catalog.pool_nodes("cpu")] == ["box"]
        box.exit(here)
        ray.exit(there)
        w.tick()
        assert w.phase(here)[0] == w.phase(there)[0] == "Completed"
        assert box.released == list(box.tasks)
        assert ray.released == list(ray.tasks)
    finally:
        store.dispose()
