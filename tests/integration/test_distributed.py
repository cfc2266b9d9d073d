"""Real distributed training on this machine: PyTorch DDP (gloo) on a job of two tasks
(examples/distributed/train.py), and torchrun started in each task from corral's
variables (docs/jobs.md, "Distributed training"). A worker killed and the gang resumed
from its checkpoint: test_example_distributed.py here, test_distributed_ray.py on Ray."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

from tests import factories
from tests.conftest import Live
from tests.integration import ddp_rig

pytestmark = [pytest.mark.slow, pytest.mark.torch]


def test_a_ddp_job_on_two_tasks_trains_one_model(
        live_server: Live, tmp_path: pathlib.Path) -> None:
    job_id = live_server.submit(ddp_rig.ddp_job(tmp_path, seconds_per_step=0))["metadata"][
        "id"]
    done = live_server.wait(job_id, timeout=120)
    assert done["status"]["phase"] == "Completed", done["status"]
    logs = [ddp_rig.log_of(live_server, job_id, f"worker-{r}") for r in (0, 1)]
    for rank, text in enumerate(logs):
        assert f"rank {rank} of 2: node {rank}, master 127.0.0.1:" in text
    # DDP kept the two ranks' weights equal, though each trained on its own batches.
    [w0], [w1] = (ddp_rig.finals(t) for t in logs)
    assert w0 == w1
    assert sorted(ddp_rig.losses(logs[0])) == list(range(1, 31))
    assert (tmp_path / "out" / "model.pt").stat().st_size > 0


def test_torchrun_in_each_task_runs_one_process_per_slot(
        live_server: Live, tmp_path: pathlib.Path) -> None:
    """The command of docs/jobs.md, two processes per task: four ranks in all."""
    body = ddp_rig.ddp_job(tmp_path, steps=5, seconds_per_step=0, flavor_id="corral.cpu.1u")
    body["algorithm"]["command"] = (
        f"{sys.executable} -m torch.distributed.run --nnodes=$MA_NUM_HOSTS "
        "--node_rank=$NODE_RANK --nproc_per_node=2 "
        "--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train.py")
    job_id = live_server.submit(body)["metadata"]["id"]
    done = live_server.wait(job_id, timeout=120)
    logs = [ddp_rig.log_of(live_server, job_id, f"worker-{r}") for r in (0, 1)]
    assert done["status"]["phase"] == "Completed", (done["status"], logs)
    # torchrun gave its processes global ranks: 0 and 1 on worker-0, 2 and 3 on worker-1.
    for node, text in enumerate(logs):
        # (not anchored at a line's start: two processes share the task's log, and a print
        # writes its text and its newline apart, so a line can follow another's text)
        ranks = sorted(int(r) for r in re.findall(r"rank (\d) of 4: node (?:\d)", text))
        assert ranks == [2 * node, 2 * node + 1], text
        assert f"of 4: node {node}," in text
    weights = [w for t in logs for w in ddp_rig.finals(t)]
    assert len(weights) == 4 and len(set(weights)) == 1
    factories.wait_for(lambda: (tmp_path / "out" / "model.pt").exists(), 5, "model.pt")
