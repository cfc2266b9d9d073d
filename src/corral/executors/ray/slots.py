"""The Ray placement groups that reserve tasks' resources on the nodes corral chose.

A gang's tasks share one group (`group_name`), whose bundles are pinned to their nodes and
placed at once. A single task has a group of its own (`SLOT_PREFIX`), which is kept for a
few seconds once the task has ended and handed to the next task of the same shape on that
node (`SLOT_KEEP`): Ray places a new group on resources that another one has just given
back only when it next retries, about a second later, so a busy node that made a new group
per task stood idle that long between two tasks.

Groups are named and detached, so they outlive the server; a starting server removes the
ones no task holds (`Reservations.sweep`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from corral.domain import errors, resources
from corral.executors import base

log = logging.getLogger(__name__)

#: seconds a single task's group is kept once the task has ended, for the next task of the
#: same shape on its node
SLOT_KEEP = 3.0
#: the names of single tasks' placement groups
SLOT_PREFIX = "corral-slot-"
#: the names of gangs' placement groups
GANG_PREFIX = "corral-gang-"
#: seconds the node agents have to say which groups they hold, when a server starts
SWEEP_TIMEOUT = 5.0


def group_name(job_id: str, attempt: int) -> str:
    """The name of a gang attempt's placement group."""
    return f"{GANG_PREFIX}{job_id}-{attempt}"


def bundle(d: resources.Resources) -> dict[str, float]:
    """What one task reserves on its node, in Ray's resource names."""
    out = {k: v for k, v in (("CPU", d.cpu), ("GPU", float(d.gpu)),
                             ("memory", float(d.memory_mb * 2**20))) if v}
    out.update((name, float(n)) for name, n in d.accel)  # Ray custom resources
    return out


class Reservations:
    """The placement groups this server made, and those kept for reuse.

    `node_id` gives the Ray node id of a corral node name, `alive` whether a node is still
    in the cluster, and `held` whether a task this server watches holds a group."""

    def __init__(self, ray: Any, *, node_id: Callable[[str], str | None],
                 alive: Callable[[str], bool], held: Callable[[str], bool]) -> None:
        self._ray = ray
        self._node_id = node_id
        self._alive = alive
        self._held = held
        self._lock = threading.Lock()
        #: single tasks' groups made here: name -> ((node id, bundle), group)
        self._slots: dict[str, tuple[tuple[str, Any], Any]] = {}
        #: ... those whose task has ended, kept for the next one: name -> idle since
        self._idle: dict[str, float] = {}

    def reserve(self, spec: base.LaunchSpec, node_id: str) -> tuple[str, Any]:
        """The launch's placement group, and its name: its gang's, or one of its own (one
        kept from an ended task of the same shape on the node when there is one)."""
        if len(spec.gang) > 1:
            name = group_name(spec.job_id, spec.attempt)
            return name, self._make(name, spec)
        key = (node_id, tuple(sorted(bundle(spec.demand).items())))
        with self._lock:
            found = next((n for n in self._idle if self._slots[n][0] == key), None)
            if found is not None:
                del self._idle[found]
                return found, self._slots[found][1]
            # The scheduler counts what idle ones hold as free: it goes back to Ray first.
            stale = [n for n in self._idle if self._slots[n][0][0] == node_id]
            for n in stale:
                del self._idle[n]
            dropped = [self._slots.pop(n)[1] for n in stale]
        for group in dropped:
            self._remove(group)
        name = SLOT_PREFIX + uuid.uuid4().hex
        group = self._make(name, spec)
        with self._lock:
            self._slots[name] = (key, group)
        return name, group

    def give_back(self, name: str, *, keep: bool) -> None:
        """A group no task holds any more: kept a while for the next task of its shape
        (`keep`: a single task's that ended, on a node still there), or removed."""
        if not name or self._held(name):
            return
        with self._lock:
            made = self._slots.get(name)
            if keep and made is not None and self._alive(made[0][0]):
                self._idle[name] = time.monotonic()
                return
            self._slots.pop(name, None)
            self._idle.pop(name, None)
        if made is not None:
            self._remove(made[1])
        else:
            self._remove_named(name)

    def expire(self, keep: float) -> None:
        """Remove the groups kept idle for longer than `keep` seconds."""
        now = time.monotonic()
        with self._lock:
            old = [n for n, since in self._idle.items() if now - since >= keep]
            for n in old:
                del self._idle[n]
            groups = [self._slots.pop(n)[1] for n in old]
        for group in groups:
            self._remove(group)

    def sweep(self, agents: Iterable[Any]) -> None:
        """Remove corral's groups that no task holds: single tasks' that an earlier server
        kept for reuse, those it made for launches it never asked a node to start (a
        gang's too: one started again makes its group again), and those of tasks that have
        ended, whose end it may not have taken. `agents` are the node agents (actor
        handles), which say which groups their running tasks hold; when one cannot say,
        nothing is removed."""
        from ray.util.placement_group import placement_group_table

        try:
            table = placement_group_table()
        except Exception as exc:  # a cluster that cannot say: keep them all
            log.warning("cannot list the Ray cluster's placement groups: %s", exc)
            return
        names = {str(info.get("name") or "") for info in table.values()
                 if info.get("state") != "REMOVED"}
        names = {n for n in names if n.startswith((SLOT_PREFIX, GANG_PREFIX))}
        if not names:
            return
        holding: set[str] = set()
        try:  # all asked at once, and not for long: the server is starting meanwhile
            for held in self._ray.get([a.groups.remote() for a in agents],
                                      timeout=SWEEP_TIMEOUT):
                holding.update(held)
        except self._ray.exceptions.RayError as exc:
            log.warning("kept the Ray cluster's unused placement groups: a node agent "
                        "does not say which it holds (%s)", exc)
            return
        for name in sorted(names - holding):
            self._remove_named(name)

    def _make(self, name: str, spec: base.LaunchSpec) -> Any:
        """The task's resources, or its gang's, each bundle pinned to its node, at once."""
        from ray.util.placement_group import get_placement_group, placement_group

        if not name.startswith(SLOT_PREFIX):  # a gang's: made by its first task's launch
            with contextlib.suppress(ValueError):
                return get_placement_group(name)
        one = bundle(spec.demand)
        nodes = spec.gang if len(spec.gang) > 1 else (spec.node,)
        labels = [{"ray.io/node-id": self._node_id(n) or ""} for n in nodes]
        try:
            return placement_group(
                [dict(one) for _ in nodes], strategy=spec.strategy.upper(), name=name,
                lifetime="detached", bundle_label_selector=labels)
        except (ValueError, self._ray.exceptions.RayError) as exc:
            raise errors.LaunchError(f"cannot reserve its resources: {exc}") from None

    def _remove(self, group: Any) -> None:
        from ray.util.placement_group import remove_placement_group

        with contextlib.suppress(ValueError, self._ray.exceptions.RayError):
            remove_placement_group(group)

    def _remove_named(self, name: str) -> None:
        from ray.util.placement_group import get_placement_group

        with contextlib.suppress(ValueError, self._ray.exceptions.RayError):
            self._remove(get_placement_group(name))
