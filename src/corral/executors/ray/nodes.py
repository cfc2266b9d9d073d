"""The Ray cluster's nodes as corral sees them: their names, capacity and whether they live.

Ray's node table is read at most once a `NODES_TTL` (every launch, poll and catalog refresh
asks), and a read that fails keeps the last view: a GCS that does not answer for a moment
must not make every node look gone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from corral.domain import resources

log = logging.getLogger(__name__)

#: how long nodes read from Ray are trusted before they are read again
NODES_TTL = 1.0
#: Ray resources that are not accelerators
RAY_OWN = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


def node_name(node_id: str) -> str:
    return f"ray-{node_id[:12]}"


class Nodes:
    """The nodes alive, as Ray last said."""

    def __init__(self, ray: Any) -> None:
        self._ray = ray
        self._alive: dict[str, dict[str, Any]] = {}  #: node id -> Ray's node record
        self._read_at = 0.0
        self.refresh(force=True)

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._read_at < NODES_TTL:
            return
        try:
            listed = self._ray.nodes()
        except Exception as exc:  # the GCS briefly unreachable: keep the last view
            log.warning("cannot read the Ray cluster's nodes: %s", exc)
            return
        self._alive = {n["NodeID"]: n for n in listed if n.get("Alive")}
        self._read_at = now

    def listing(self) -> list[resources.Node]:
        """The nodes that can run something, in corral's terms, by name."""
        self.refresh()
        out = [_as_node(i) for i in self._alive.values()]
        return sorted((n for n in out if n.cpu or n.gpus or n.accelerators),
                      key=lambda n: n.name)

    def ids(self) -> list[str]:
        return list(self._alive)

    def id_of(self, name: str) -> str | None:
        """The id of the node corral calls `name`, while it is alive."""
        return next((i for i in self._alive if node_name(i) == name), None)

    def ip(self, node_id: str) -> str:
        info = self._alive.get(node_id)
        return str(info["NodeManagerAddress"]) if info else "127.0.0.1"

    def known(self, node_id: str) -> bool:
        """Whether the node was alive when Ray was last asked."""
        return node_id in self._alive

    def alive(self, node_id: str, *, force: bool = False) -> bool:
        """Whether the node is alive, asking Ray again if the last view is old (`force`:
        in any case)."""
        self.refresh(force=force)
        return node_id in self._alive


def _as_node(info: dict[str, Any]) -> resources.Node:
    res = info.get("Resources", {})
    n_gpu = int(res.get("GPU", 0))
    product = next((k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")),
                   "GPU")
    return resources.Node(
        name=node_name(info["NodeID"]), cpu=int(res.get("CPU", 0)),
        memory_mb=int(res.get("memory", 0) // 2**20),
        gpus=tuple(resources.Gpu(i, product, 0) for i in range(n_gpu)),
        accelerators=tuple(resources.Accelerator(k, int(v)) for k, v in sorted(res.items())
                           if _is_accelerator(k) and int(v) > 0))


def _is_accelerator(name: str) -> bool:
    """A node's custom resource (`npu`, `NPU`, `TPU`) is an accelerator by that name; Ray's
    own resources, node and accelerator-type labels and placement groups' are not."""
    return (name not in RAY_OWN and not name.startswith(("node:", "accelerator_type:"))
            and "_group_" not in name and resources.ACCEL_NAME.match(name) is not None
            and name.lower() not in resources.RESERVED_NAMES)
