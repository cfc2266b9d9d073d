"""Several executors behind the one protocol: each pool runs on its own executor.

A server can run pool `cpu` on this machine and pool `gpu` on a Ray cluster (or two pools
on two clusters). The scheduler only places a job on nodes of its pool, and every node
comes from exactly one executor, so a launch goes to the executor of its node; everything
after it goes to the executor recorded in the task's handle. The catalog learns which
executor each node comes from (`origin`), which is how it keeps each pool on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping

from corral.domain import errors, resources
from corral.executors import base

log = logging.getLogger(__name__)


class Routed:
    """Dispatches every call to the member executor that owns the node or the handle."""

    def __init__(self, members: Mapping[str, base.Executor]) -> None:
        self._members = dict(members)
        #: node name -> member key; kept after a node leaves, so that its tasks' handles
        #: still find their executor
        self._home: dict[str, str] = {}
        self._lock = threading.Lock()
        self._clash: set[str] = set()
        self.nodes()
        if self._clash:
            self.close()
            raise errors.CorralError(
                "one node is seen through two executors (a Ray cluster named two ways?): "
                f"{', '.join(sorted(self._clash))}; give each cluster one address")

    def origin(self) -> dict[str, str]:
        """Each node's executor key, for the catalog's pools."""
        with self._lock:
            return dict(self._home)

    def nodes(self) -> list[resources.Node]:
        out = []
        for key, member in self._members.items():
            for node in member.nodes():
                with self._lock:
                    owner = self._home.setdefault(node.name, key)
                if owner != key:
                    if node.name not in self._clash:
                        log.error("node %s is seen through %s and %s; only the first "
                                  "runs its tasks", node.name, owner, key)
                    self._clash.add(node.name)
                    continue
                out.append(node)
        return out

    def containment(self) -> str:
        """Each member's containment, by member."""
        return "; ".join(f"{key}: {m.containment()}" for key, m in self._members.items()
                         if isinstance(m, base.Contains)) or "none"

    def set_waker(self, wake: Callable[[], None]) -> None:
        for member in self._members.values():
            member.set_waker(wake)

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        key = self._key_of_node(spec.node)
        if key is None:
            raise errors.LaunchError(f"node {spec.node} belongs to no executor")
        return _stamped(self._members[key].launch(spec), key)

    def stage_code(self, node: str, code_dir: str) -> None:
        key = self._key_of_node(node)
        member = self._members[key] if key is not None else None
        if isinstance(member, base.ShipsCode):  # (a node of no executor fails at its launch)
            member.stage_code(node, code_dir)

    def poll(self, handle: base.Handle) -> base.Status:
        return self._status(handle, lambda m: m.poll(handle))

    def adopt(self, handle: base.Handle) -> base.Status:
        return self._status(handle, lambda m: m.adopt(handle))

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        key = self._key_of_node(spec.node)
        if key is None:
            # A node no executor has shown this server cannot be running anything it can
            # reach: the job goes back to the queue as it does when a node leaves.
            return base.Status(base.State.NODE_LOST, message=(
                f"node {spec.node} is known to no executor"), handle=base.Handle(
                    node=spec.node, task=spec.task, pid=0, start_time=0.0,
                    control_dir=spec.control_dir, launch_id=spec.launch_id))
        return _stamped_status(self._members[key].recover(spec), key)

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        member = self._member_of(handle)
        if member is not None:
            member.cancel(handle, force=force)

    def sample(self, handle: base.Handle) -> base.Sample | None:
        member = self._member_of(handle)
        return member.sample(handle) if member is not None else None

    def node_usage(self) -> list[base.NodeUsage]:
        """Each member's nodes that report their use (a node seen through two members,
        through the first only)."""
        out = []
        for key, member in self._members.items():
            if isinstance(member, base.ReportsNodes):
                got = member.node_usage()  # off the lock: a Ray member may take seconds
                with self._lock:
                    out += [u for u in got if self._home.get(u.node) == key]
        return out

    def clean_up(self, handle: base.Handle) -> None:
        member = self._member_of(handle)
        if member is not None:
            member.clean_up(handle)

    def release(self, handle: base.Handle) -> None:
        member = self._member_of(handle)
        if member is not None:
            member.release(handle)

    def close(self) -> None:
        for key, member in self._members.items():
            try:
                member.close()
            except Exception:
                log.exception("closing executor %s failed", key)

    # --- routing -------------------------------------------------------------------------

    def _key_of_node(self, node: str) -> str | None:
        with self._lock:
            key = self._home.get(node)
        if key is None:
            with contextlib.suppress(Exception):
                self.nodes()  # a node that has just joined
            with self._lock:
                key = self._home.get(node)
        return key

    def _key_of(self, handle: base.Handle) -> str | None:
        if handle.executor in self._members:
            return handle.executor
        with self._lock:
            return self._home.get(handle.node)

    def _member_of(self, handle: base.Handle) -> base.Executor | None:
        key = self._key_of(handle)
        return self._members[key] if key is not None else None

    def _status(self, handle: base.Handle,
                ask: Callable[[base.Executor], base.Status]) -> base.Status:
        key = self._key_of(handle)
        if key is None:
            return base.Status(base.State.NODE_LOST, handle=handle,
                               message=f"node {handle.node} is known to no executor")
        return _stamped_status(ask(self._members[key]), key)


def origin(executor: base.Executor) -> dict[str, str] | None:
    """Which executor each node comes from, when several run the pools."""
    return executor.origin() if isinstance(executor, base.Routes) else None


def _stamped(handle: base.Handle, key: str) -> base.Handle:
    return handle if handle.executor == key else dataclasses.replace(handle, executor=key)


def _stamped_status(status: base.Status, key: str) -> base.Status:
    if status.handle is None or status.handle.executor == key:
        return status
    return dataclasses.replace(status, handle=_stamped(status.handle, key))
