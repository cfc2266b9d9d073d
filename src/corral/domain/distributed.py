"""The variables that let the tasks of a gang find each other: torchrun's and ModelArts'.

A task is corral's unit of a distributed job, and each task is one *node* in torchrun's
sense, wherever it runs: it is given devices of its own (`CUDA_VISIBLE_DEVICES` names
only those), so its first process is local rank 0 of a node of one process, and device 0
is its first GPU. Two tasks on one machine (or one Ray node) are two nodes that happen to
share it. A task that wants one process per GPU starts them itself (torchrun with
`--nnodes` and `--node_rank` from these variables); torchrun then gives each process its
own `RANK`, `LOCAL_RANK` and `WORLD_SIZE`.

ModelArts' training containers get the same facts under other names: one container per
node, `VC_TASK_INDEX` its index, `MA_NUM_HOSTS` (and `VC_WORKER_NUM`) how many there are,
`VC_WORKER_HOSTS` their addresses, `MA_NUM_GPUS` its cards.
"""

from __future__ import annotations

from collections.abc import Sequence

#: where rank 0 listens when every task runs on this machine
LOOPBACK = "127.0.0.1"


def rank_env(*, rank: int, world: int, gpus: int) -> dict[str, str]:
    """Who a task is in its gang of `world` tasks, given `gpus` GPUs of its own."""
    return {
        "WORLD_SIZE": str(world), "RANK": str(rank),
        "NODE_RANK": str(rank), "GROUP_RANK": str(rank),  # (torchrun's name for it)
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "MA_NUM_HOSTS": str(world), "VC_WORKER_NUM": str(world),
        "VC_TASK_INDEX": str(rank), "MA_TASK_NAME": "worker",
        "MA_NUM_GPUS": str(gpus),
    }


def address_env(hosts: Sequence[str], here: str) -> dict[str, str]:
    """Where the gang's tasks are: `hosts`, the address of each task's node by rank, and
    `here`, the address of this task's."""
    return {
        "MASTER_ADDR": hosts[0], "VC_WORKER_HOSTS": ",".join(hosts),
        "MA_CURRENT_IP": here, "MA_CURRENT_HOST_IP": here,
    }
