"""Each node's use over time: sampled with the tasks, kept a day, served for the Nodes page."""

from __future__ import annotations

import pathlib
from types import SimpleNamespace

from corral.domain import resources
from corral.executors import base, routing
from corral.scheduler import sampling
from corral.services import catalog as catalog_mod
from corral.store import db, node_repo
from tests.conftest import make_settings
from tests.unit import fakes


class Reporting(fakes.FakeExecutor):
    """A fake executor whose nodes say what they use."""

    def __init__(self, *nodes: resources.Node) -> None:
        super().__init__(nodes[0], more_nodes=nodes[1:])
        self.asked = 0

    def node_usage(self) -> list[base.NodeUsage]:
        self.asked += 1
        return [base.NodeUsage(node=n.name, cpu_percent=10.0 * (i + 1), mem_mb=512.0,
                               gpu_util=50.0 if n.gpus else None,
                               gpu_mem_mb=1024.0 if n.gpus else None)
                for i, n in enumerate(self.node_list)]


def gpu_node(name: str, memory_mb: int) -> resources.Node:
    return resources.Node(name=name, cpu=8, memory_mb=32768,
                          gpus=(resources.Gpu(index=0, name="G", memory_mb=memory_mb),
                                resources.Gpu(index=1, name="G", memory_mb=memory_mb)))


def new_store(tmp_path: pathlib.Path) -> db.Store:
    store = db.Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.migrate()
    return store


def test_a_tasks_gpu_memory_is_a_share_of_its_own_nodes_gpus() -> None:
    # Two nodes with GPUs of different sizes: the task on the 80 GB node that uses 40 GB of
    # its one GPU uses half of it (it was counted against the first node's GPUs before).
    row = SimpleNamespace(job_id="j", attempt=1, name="worker-0", gpu_ids="1", cpu=4.0,
                          memory_mb=4096)
    sample = base.Sample(cpu_percent=100.0, rss_mb=1024.0, gpu_util=90.0,
                         gpu_mem_mb=40 * 1024.0)
    got = sampling._row(row, sample, gpu_node("big", 80 * 1024), now=5)
    assert got["gpu_mem_usage"] == 50.0
    assert got["cpu_usage"] == 25.0
    assert sampling._row(row, sample, None, now=5)["gpu_mem_usage"] == 0.0


def test_nodes_are_sampled_when_asked_and_kept_a_day(tmp_path: pathlib.Path) -> None:
    store = new_store(tmp_path)
    ex = Reporting(resources.Node(name="local", cpu=2, memory_mb=8192), gpu_node("gpu-1", 16384))
    cat = catalog_mod.Catalog.build(make_settings(tmp_path), ex.nodes())
    day = node_repo.KEEP_MS

    sampling.sample_once(store, ex, cat, now=1_000)
    sampling.sample_once(store, ex, cat, now=2_000, nodes=False)  # a tasks-only pass
    with store.read() as conn:
        got = node_repo.since(conn, 0)
    assert [(r.node, r.time, r.cpu_percent, r.gpu_util, r.gpu_mem_mb) for r in got] == [
        ("gpu-1", 1_000, 20.0, 50.0, 1024.0), ("local", 1_000, 10.0, None, None)]
    assert ex.asked == 1

    sampling.sample_once(store, ex, cat, now=1_000 + day + 1)
    with store.read() as conn:
        assert {r.time for r in node_repo.since(conn, 0)} == {1_000 + day + 1}
    store.dispose()


def test_an_executor_that_cannot_tell_writes_no_node_samples(tmp_path: pathlib.Path) -> None:
    store = new_store(tmp_path)
    ex = fakes.FakeExecutor()
    assert not isinstance(ex, base.ReportsNodes)
    sampling.sample_once(store, ex, catalog_mod.Catalog.build(make_settings(tmp_path), ex.nodes()),
                         now=1_000)
    with store.read() as conn:
        assert node_repo.since(conn, 0) == []
    store.dispose()


def test_routed_members_report_their_own_nodes_only() -> None:
    local = Reporting(resources.Node(name="local", cpu=2, memory_mb=8192))
    ray = Reporting(resources.Node(name="ray-abc", cpu=4, memory_mb=8192))
    routed = routing.Routed({"local": local, "ray:x": ray})
    # Later the Ray member sees this machine's node name too (a clash the router logs and
    # ignores): its report of that node is not taken; its own node's is.
    ray.node_list.append(resources.Node(name="local", cpu=2, memory_mb=8192))
    routed.nodes()
    got = sorted((u.node, u.cpu_percent) for u in routed.node_usage())
    assert got == [("local", 10.0), ("ray-abc", 10.0)]
