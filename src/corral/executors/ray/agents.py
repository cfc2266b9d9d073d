"""The node agents that start tasks' processes (`actor.NodeAgent`): one per node.

An agent is a named, detached actor pinned to its node, started on first use: it outlives
the server that started it, and the next server finds it by its name. The name carries
`AGENT_VERSION`, so that a server that speaks to agents differently starts new ones (tasks
already running keep the agent their handle names). The agent's module, and the OS
primitives it uses (`corral.oskit`), travel to the nodes by value: a node needs Ray, not
corral.
"""

from __future__ import annotations

from typing import Any

from corral import oskit
from corral.executors.ray import actor, nodeuse

#: part of the agents' names: a server that speaks to agents differently starts new ones
#: (tasks already running keep the agent their handle names)
AGENT_VERSION = 4


def agent_name(node_id: str) -> str:
    return f"corral-node-v{AGENT_VERSION}-{node_id}"


class Agents:
    """The agents of one namespace's nodes, as this server knows them."""

    def __init__(self, ray: Any, namespace: str) -> None:
        from ray import cloudpickle

        for module in (actor, nodeuse, oskit):  # (oskit: every module of it)
            cloudpickle.register_pickle_by_value(module)
        self._ray = ray
        self._read_use = ray.remote(nodeuse.read)
        self._ns = namespace
        self._cls = ray.remote(actor.NodeAgent)
        self._started: dict[str, Any] = {}  #: node id -> its agent's actor handle

    def on(self, node_id: str) -> Any:
        """The node's agent, started if it has none (detached: it outlives this server)."""
        from ray.util import scheduling_strategies as ss

        agent = self._started.get(node_id)
        if agent is None:
            agent = self._started[node_id] = self._cls.options(
                name=agent_name(node_id), namespace=self._ns, lifetime="detached",
                get_if_exists=True, num_cpus=0, max_restarts=0, max_task_retries=0,
                max_concurrency=1000,
                scheduling_strategy=ss.NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
        return agent

    def read_use(self, node_id: str) -> Any:
        """A reading of the node's own use, taken there (nodeuse.read): its object ref. A
        task of no CPU, not the agent: a node that never ran a task of ours has none."""
        from ray.util import scheduling_strategies as ss

        return self._read_use.options(
            num_cpus=0, max_retries=0,
            scheduling_strategy=ss.NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote()

    def named(self, name: str) -> Any | None:
        """The agent of that name, None when there is none (its node never ran a task of
        this namespace, or it died)."""
        try:
            return self._ray.get_actor(name, namespace=self._ns)
        except ValueError:
            return None

    def of_node(self, node_id: str) -> Any | None:
        """The node's agent if it has one (none is started)."""
        return self.named(agent_name(node_id))

    def died(self, node_id: str) -> None:
        """The node's agent is dead: the next task there starts a new one."""
        self._started.pop(node_id, None)
