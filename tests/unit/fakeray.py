"""Ray in this process, for unit tests of the Ray executor: the real `RayExecutor` and the
real node agents (`actor.NodeAgent`), with Ray's driver calls between them replaced.

An actor call runs the agent's method on a thread of a long-lived pool (a task's death
signal follows the thread that started it, as it follows an actor's thread on Ray) and
returns a reference to its answer; `get`, `wait` and `put` work on those. Named actors and
placement groups outlive an executor, as detached ones do, so a second executor built
after the first one closed plays a restarted server. Nothing here starts Ray.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")
#: the module (`ray.util.placement_group` is also the name of its function)
pg_mod = importlib.import_module("ray.util.placement_group")

GiB = 2**30


class Pool:
    """Threads that run actor calls: long-lived (a task's death signal follows the thread
    that started it), one more whenever none is idle, and daemons (a call that never
    returns must not hold up the end of the test run)."""

    def __init__(self) -> None:
        self._q: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._idle <= 0:  # every thread is busy or spoken for
                self._threads += 1
                threading.Thread(target=self._work, name="fake-ray", daemon=True).start()
            self._idle -= 1
        self._q.put((fut, fn))
        return fut

    def _work(self) -> None:
        with self._lock:
            self._idle += 1
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn = item
            try:
                fut.set_result(fn())
            except BaseException as exc:  # the caller gets it from the future
                fut.set_exception(exc)
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Let the idle threads go (those in a call that never returns stay, as daemons)."""
        for _ in range(self._threads):
            self._q.put(None)


class Ref:
    def __init__(self, fut: concurrent.futures.Future[Any]) -> None:
        self.fut = fut

    def future(self) -> concurrent.futures.Future[Any]:
        return self.fut


@dataclasses.dataclass
class Group:
    name: str
    bundles: list[dict[str, float]]
    placed: threading.Event = dataclasses.field(default_factory=threading.Event)
    gone: bool = False  #: removed: waiting for it fails, as Ray's does

    def wait(self, timeout: float) -> bool:
        if self.gone:
            raise Exception(f"Placement group {self.name} does not exist.")
        return self.placed.wait(min(timeout, 0.05))


class Method:
    def __init__(self, cluster: Cluster, actor: Actor, name: str) -> None:
        self.cluster, self.actor, self.name = cluster, actor, name

    def remote(self, *args: Any, **kwargs: Any) -> Ref:
        fn = getattr(self.actor.obj, self.name)

        def run() -> Any:
            # Ray hands a method the values of the references it is given.
            return fn(*[a.fut.result() if isinstance(a, Ref) else a for a in args], **kwargs)

        ref = Ref(self.cluster.pool.submit(run))
        self.cluster.calls.append((self.actor.name, self.name, args, ref))
        return ref


class Actor:
    def __init__(self, cluster: Cluster, name: str, obj: Any) -> None:
        self.cluster, self.name, self.obj = cluster, name, obj

    def __getattr__(self, method: str) -> Method:
        return Method(self.cluster, self, method)


class ActorClass:
    def __init__(self, cluster: Cluster, cls: type) -> None:
        self.cluster, self.cls = cluster, cls
        self.opts: dict[str, Any] = {}

    def options(self, **opts: Any) -> ActorClass:
        made = ActorClass(self.cluster, self.cls)
        made.opts = opts
        return made

    def remote(self) -> Actor:
        c, name = self.cluster, self.opts["name"]
        with c.lock:
            if name not in c.actors:
                c.current_node = self.opts["scheduling_strategy"].node_id
                c.current_name = name
                c.actors[name] = Actor(c, name, self.cls())
            return c.actors[name]


class Context:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.gcs_address = "127.0.0.1:1"

    def get_node_id(self) -> str:
        return self.cluster.current_node

    def get_actor_name(self) -> str:
        return self.cluster.current_name

    @property
    def namespace(self) -> str:
        return "corral"


class Cluster:
    """The fake cluster's nodes, actors, placement groups, and every actor call made."""

    def __init__(self, node_ids: list[str]) -> None:
        self.node_ids = node_ids
        #: nodes that were in the cluster and left (listed by `nodes`, not alive)
        self.dead_ids: list[str] = []
        self.pool = Pool()
        self.lock = threading.RLock()
        self.actors: dict[str, Actor] = {}
        self.groups: dict[str, Group] = {}
        self.removed: list[str] = []
        #: (actor, method, arguments, answer) of every call
        self.calls: list[tuple[str, str, tuple[Any, ...], Ref]] = []
        self.current_node = ""
        self.current_name = ""
        self.room = True  #: placement groups are placed at once (else: never)

    def install(self, mp: pytest.MonkeyPatch) -> None:
        mp.setattr(ray, "is_initialized", lambda: True)
        mp.setattr(ray, "remote", lambda cls: ActorClass(self, cls))
        mp.setattr(ray, "nodes", self.nodes)
        mp.setattr(ray, "get_actor", self.get_actor)
        mp.setattr(ray, "get", self.get)
        mp.setattr(ray, "wait", self.wait)
        mp.setattr(ray, "put", self.put)
        mp.setattr(ray, "get_runtime_context", lambda: Context(self))
        mp.setattr(pg_mod, "placement_group", self.placement_group)
        mp.setattr(pg_mod, "get_placement_group", self.get_placement_group)
        mp.setattr(pg_mod, "remove_placement_group", self.remove_placement_group)
        mp.setattr(pg_mod, "placement_group_table", self.placement_group_table)

    def close(self) -> None:
        self.pool.shutdown()

    def called(self, method: str) -> list[tuple[Any, ...]]:
        return [args for _, m, args, _ in list(self.calls) if m == method]

    def answers(self, method: str) -> list[Ref]:
        return [ref for _, m, _, ref in list(self.calls) if m == method]

    # --- Ray's driver calls ---------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": n, "Alive": n in self.node_ids, "NodeManagerAddress": "127.0.0.1",
                 "Resources": {"CPU": 4.0, "memory": float(8 * GiB)}}
                for n in [*self.node_ids, *self.dead_ids]]

    def get_actor(self, name: str, namespace: str | None = None) -> Actor:
        with self.lock:
            if name not in self.actors:
                raise ValueError(f"Failed to look up actor with name '{name}'")
            return self.actors[name]

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        if isinstance(ref, list):
            return [self.get(r, timeout) for r in ref]
        if not isinstance(ref, Ref):
            return ref
        try:
            return ref.fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ray.exceptions.GetTimeoutError("timed out") from None
        except Exception as exc:  # what a method raises reaches its caller as a RayError
            raise ray.exceptions.RayError(f"{type(exc).__name__}: {exc}") from exc

    def wait(self, refs: list[Ref], num_returns: int = 1,
             timeout: float | None = None) -> tuple[list[Ref], list[Ref]]:
        how = (concurrent.futures.FIRST_COMPLETED if num_returns == 1
               else concurrent.futures.ALL_COMPLETED)
        concurrent.futures.wait([r.fut for r in refs], timeout=timeout, return_when=how)
        ready = [r for r in refs if r.fut.done()][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def put(self, value: Any) -> Ref:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        fut.set_result(value)
        return Ref(fut)

    def placement_group(self, bundles: list[dict[str, float]], strategy: str = "PACK",
                        name: str = "", **_: Any) -> Group:
        with self.lock:
            group = self.groups[name] = Group(name, bundles)
            if self.room:
                group.placed.set()
            return group

    def get_placement_group(self, name: str) -> Group:
        with self.lock:
            if name not in self.groups:
                raise ValueError(f"Failed to look up placement group with name: {name}")
            return self.groups[name]

    def placement_group_table(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {f"pg{i}": {"name": g.name, "state": "CREATED" if g.placed.is_set()
                               else "PENDING"} for i, g in enumerate(self.groups.values())}

    def remove_placement_group(self, group: Group) -> None:
        with self.lock:
            self.groups.pop(group.name, None)
            self.removed.append(group.name)
            group.gone = True


def running(mp: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """A fake cluster of two nodes for as long as the generator runs (a fixture's body)."""
    c = Cluster(["a" * 56, "b" * 56])
    c.install(mp)
    yield c
    c.close()
