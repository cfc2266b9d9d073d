"""What a task of a gang is told about itself and its peers: torchrun's variables and
ModelArts', on this machine and on Ray nodes (docs/jobs.md). Each task is a node of one
process: its own devices, local rank 0."""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Iterator

import pytest

from corral.domain import resources, specs
from corral.executors import base
from corral.executors.ray import cluster, nodes, payload
from corral.scheduler import launching
from tests import factories
from tests.unit import fakeray

NODE_A, NODE_B = "a" * 56, "b" * 56
#: each fake node's address (loopback ones: nothing connects to them)
ADDRESS = {NODE_A: "127.0.0.2", NODE_B: "127.0.0.3"}


def env_of(rank: int, world: int, gpu_ids: tuple[int, ...] = (),
           environments: dict[str, str] | None = None) -> dict[str, str]:
    body = specs.JobCreate.model_validate(factories.make_job(
        command="true", node_count=world, environments=environments))
    return launching.task_env(inherited={}, alg=body.algorithm, job_id="j",
                              task=f"worker-{rank}", rank=rank, world=world, attempt=1,
                              master_port=29511, gpu_ids=gpu_ids)


def test_on_this_machine_each_task_is_a_node_of_one_process() -> None:
    envs = [env_of(rank, 2, gpu_ids=(rank,)) for rank in (0, 1)]
    for rank, env in enumerate(envs):
        assert (env["RANK"], env["NODE_RANK"], env["GROUP_RANK"]) == (str(rank),) * 3
        assert (env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (
            "2", "0", "1")  # LOCAL_RANK indexes CUDA_VISIBLE_DEVICES, which is its own
        assert env["CUDA_VISIBLE_DEVICES"] == str(rank)
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29511")
        # ModelArts' names for the same
        assert (env["MA_NUM_HOSTS"], env["VC_WORKER_NUM"], env["VC_TASK_INDEX"]) == (
            "2", "2", str(rank))
        assert env["VC_WORKER_HOSTS"] == "127.0.0.1,127.0.0.1"
        assert env["MA_CURRENT_IP"] == env["MA_CURRENT_HOST_IP"] == "127.0.0.1"
        assert (env["MA_NUM_GPUS"], env["MA_TASK_NAME"]) == ("1", "worker")


def test_a_job_cannot_change_its_rank_through_its_environments() -> None:
    env = env_of(1, 2, gpu_ids=(0, 1), environments={"RANK": "7", "LOCAL_RANK": "3"})
    assert (env["RANK"], env["LOCAL_RANK"], env["MA_NUM_GPUS"]) == ("1", "0", "2")


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
             ) -> Iterator[tuple[cluster.RayExecutor, fakeray.Cluster]]:
    node_tmp = tmp_path / "node"
    node_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node_tmp))
    for fake in fakeray.running(monkeypatch):
        monkeypatch.setattr(fakeray.ray, "nodes", lambda listed=fake.nodes: [
            {**n, "NodeManagerAddress": ADDRESS[n["NodeID"]]} for n in listed()])
        ex = cluster.RayExecutor("127.0.0.1:1")
        yield ex, fake
        ex.close()


def launched_envs(ex: cluster.RayExecutor, fake: fakeray.Cluster, home: pathlib.Path,
                  gang: tuple[str, ...]) -> list[dict[str, str]]:
    """The environment each task of a gang placed on `gang` (node ids, by rank) starts
    with on its node."""
    names = tuple(nodes.node_name(n) for n in gang)
    attempt = home / "runs" / "job1" / "attempt-1"
    for rank, node in enumerate(names):
        env = {**env_of(rank, len(gang)), "PATH": os.environ.get("PATH", os.defpath)}
        ex.launch(base.LaunchSpec(
            job_id="job1", task=f"worker-{rank}", attempt=1, launch_id=f"l{rank}",
            argv=("true",), cwd=str(attempt), env=env,
            log_path=str(attempt / "logs" / f"worker-{rank}.log"),
            control_dir=str(attempt / "ctl"), node=node,
            demand=resources.Resources(cpu=1, memory_mb=256), gang=names))
    starts = {args[0]: args[1] for args in fake.called("start")}
    return [starts[f"l{rank}"]["env"] for rank in range(len(gang))]


def test_on_two_ray_nodes_ranks_are_global_and_the_master_is_rank_0s_node(
        executor: tuple[cluster.RayExecutor, fakeray.Cluster], tmp_path: pathlib.Path,
) -> None:
    ex, fake = executor
    envs = launched_envs(ex, fake, tmp_path / "home", (NODE_B, NODE_A))
    assert [e["RANK"] for e in envs] == [e["NODE_RANK"] for e in envs] == ["0", "1"]
    assert {e["LOCAL_RANK"] for e in envs} == {"0"}
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"1"}
    assert {e["WORLD_SIZE"] for e in envs} == {e["MA_NUM_HOSTS"] for e in envs} == {"2"}
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.3"}  # rank 0 is on node B
    assert {e["VC_WORKER_HOSTS"] for e in envs} == {"127.0.0.3,127.0.0.2"}
    assert [e["MA_CURRENT_HOST_IP"] for e in envs] == ["127.0.0.3", "127.0.0.2"]
    assert [e["VC_TASK_INDEX"] for e in envs] == ["0", "1"]


def test_two_tasks_on_one_ray_node_are_two_nodes_as_on_one_machine(
        executor: tuple[cluster.RayExecutor, fakeray.Cluster], tmp_path: pathlib.Path,
) -> None:
    ex, fake = executor
    envs = launched_envs(ex, fake, tmp_path / "home", (NODE_A, NODE_A, NODE_B))
    assert [e["NODE_RANK"] for e in envs] == ["0", "1", "2"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "0", "0"]
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.2"}
    assert {e["VC_WORKER_HOSTS"] for e in envs} == {"127.0.0.2,127.0.0.2,127.0.0.3"}
    assert [e["MA_CURRENT_IP"] for e in envs] == ["127.0.0.2", "127.0.0.2", "127.0.0.3"]


def test_a_single_task_on_ray_is_its_own_master() -> None:
    spec = base.LaunchSpec(job_id="j", task="worker-0", attempt=1, launch_id="l",
                           argv=("true",), cwd="/runs/j/attempt-1", env=env_of(0, 1),
                           log_path="/runs/j/attempt-1/logs/w.log",
                           control_dir="/runs/j/attempt-1/ctl", node="n")
    env = payload.of(spec, ["10.1.2.3"], "10.1.2.3")["env"]
    assert (env["MASTER_ADDR"], env["VC_WORKER_HOSTS"], env["MA_CURRENT_IP"]) == (
        "10.1.2.3",) * 3
