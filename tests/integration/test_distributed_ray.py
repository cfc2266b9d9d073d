"""PyTorch DDP on a real local Ray cluster of two worker nodes (test_ray.py's): the
example's job on two tasks, one per node, worker-1 killed and the gang resumed from the
checkpoint rank 0 left on its node and corral copied back."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.conftest import start_live, stop_live
from tests.integration import ddp_rig
from tests.integration.test_ray import FLAVORS, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.torch, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    c = RayCluster()
    yield c
    c.shutdown()


def test_a_ddp_job_on_two_ray_nodes_resumes_after_a_worker_is_killed(
        cluster: RayCluster, tmp_path: pathlib.Path) -> None:
    live = start_live(tmp_path / "home", ray_address=cluster.address, flavors=FLAVORS,
                      metrics_interval=0.5)
    try:
        body = ddp_rig.ddp_job(tmp_path, flavor_id="cpu1", retries=1, seconds_per_step=0.2)
        job_id = live.submit(body)["metadata"]["id"]
        envs = ddp_rig.kill_worker_1_after(live, job_id, 11)
        done = live.wait(job_id, timeout=180)
        assert done["status"]["phase"] == "Completed", done["status"]
        ddp_rig.check_resumed(live, job_id)
    finally:
        stop_live(live)
    # One task per node, each its node's rank 0, rank 0's node the master.
    assert envs[0]["CORRAL_RAY_NODE_ID"] != envs[1]["CORRAL_RAY_NODE_ID"]
    ips = {n.node_id: n.node_ip_address for n in cluster.cluster.list_all_nodes()}
    hosts = [ips[e["CORRAL_RAY_NODE_ID"]] for e in envs]
    for rank, env in enumerate(envs):
        assert (env["RANK"], env["NODE_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank), "2")
        assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("0", "1")
        assert env["MASTER_ADDR"] == hosts[0]
        assert env["VC_WORKER_HOSTS"] == ",".join(hosts)
        assert env["MA_CURRENT_HOST_IP"] == hosts[rank]
    # The model rank 0 wrote on its node came back to the channel's folder on the server.
    assert (tmp_path / "out" / "model.pt").stat().st_size > 0
