"""Runs tasks on the nodes of a Ray cluster, behind the same protocol as the local executor.

Every task is a process started on its node by a small actor, the node's agent
(`rayactor.NodeAgent`, one per node, started on first use), once the task's placement
group holds the flavor's resources (CPUs, GPUs, memory) there. A placement group's bundles
are pinned to the nodes corral chose, so a gang's tasks are all reserved at once. Agents
and placement groups are named and detached: a restarted server finds them by name.

A single task's placement group is kept a few seconds after the task ends and given to the
next task of the same shape on that node (`rayslots`). The server keeps one `wait` call
pending on each actor and hears its answer at once (the process ended, or the actor died
with its node), which wakes the scheduler; a background thread pulls the tasks' output into
their usual log files, so logs, previews and `logs -f` work as they do locally. What tasks
write to their output channels and metrics file is copied back likewise (`rayfiles`); a
task counts as ended once its last files are here. What they read (input channels, the
job's model) is shipped to their node before they start (`rayinputs`), unless the cluster
shares the server's file system (`shared_fs`).

Ray is imported only when this executor is built, which the server does in a process of
its own (`raybridge`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from typing import Any

from corral.domain import errors, metrics, resources
from corral.executors import base, rayactor, rayfiles, rayinputs, rayslots

log = logging.getLogger(__name__)

NAMESPACE = "corral"
#: how often running tasks' output is pulled to the server
LOG_INTERVAL = 0.5
LOG_CHUNK = 1 << 20
#: how long nodes read from Ray are trusted before they are read again
NODES_TTL = 1.0
#: how long an actor that died on a node Ray still calls alive may wait for Ray to notice
#: that the node is gone (Ray's own health checks take about 15-30 s on a quiet cluster,
#: and were seen taking longer on a loaded one; too short a wait would call a node's
#: death a lost task and spend the job's retry budget)
NODE_DEATH_GRACE = 60.0


#: part of the agents' names: a server that speaks to agents differently starts new ones
#: (tasks already running keep the agent their handle names)
AGENT_VERSION = 4


def agent_name(node_id: str) -> str:
    return f"corral-node-v{AGENT_VERSION}-{node_id}"


def node_name(node_id: str) -> str:
    return f"ray-{node_id[:12]}"


@dataclasses.dataclass
class _Task:
    """A task this server watches: its actor, the pending wait, how much log it copied."""

    handle: base.Handle
    actor: Any
    log_path: str
    offset: int
    wait_ref: Any
    launch_id: str = ""
    announced: bool = False  #: the scheduler was woken for its wait's answer
    died_at: float | None = None  #: its actor was seen dead on a node Ray calls alive
    result: base.Status | None = None
    outputs: rayfiles.Outputs | None = None  #: where its files are copied to
    collecting: bool = False  #: its last files are being copied
    collected: bool = False  #: ... and have been
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class RayExecutor:
    """Tasks are processes on a Ray cluster's nodes, one small detached actor each."""

    def __init__(self, address: str, *, namespace: str = NAMESPACE,
                 run_as: str | None = None, shared_fs: bool = False) -> None:
        import ray
        from ray import cloudpickle

        # The actor's module travels by value: a node needs Ray, not corral.
        cloudpickle.register_pickle_by_value(rayactor)
        self._ray = ray
        self._ns = namespace
        self._address = address
        self._run_as = run_as  #: the user the agents start tasks as (when they are root)
        self._shared_fs = shared_fs  #: tasks read their inputs at the server's paths
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, namespace=namespace, log_to_driver=False,
                     logging_level=logging.WARNING)
        self._agent_cls = ray.remote(rayactor.NodeAgent)
        self._agents: dict[str, Any] = {}  #: node id -> its agent's actor handle
        self._lock = threading.Lock()
        self._tasks: dict[str, _Task] = {}
        self._code: dict[str, Any] = {}
        #: per job attempt: the output channels that held files when it started
        self._seeds: dict[tuple[str, int], tuple[int, ...]] = {}
        self._alive: dict[str, dict[str, Any]] = {}  #: node id -> Ray's node record
        self._groups = rayslots.Reservations(
            ray, node_id=self._node_id, alive=lambda node_id: node_id in self._alive,
            held=self._held)
        self._nodes_at = 0.0
        self._wake: Callable[[], None] = lambda: None
        self._stop = threading.Event()
        self._refresh(force=True)
        self._groups.sweep(self._agents_alive())
        self._thread = threading.Thread(target=self._run, name="corral-ray", daemon=True)
        self._thread.start()
        self._copier = rayfiles.Copier(ray, self._running, lambda: self._wake())
        self._shipper = rayinputs.Shipper(ray, rayinputs.reader_of(run_as))

    def probe_address(self) -> str:
        """The address that answers while the cluster is up (its GCS, or its client port)."""
        if self._address.startswith("ray://"):
            return self._address
        return str(self._ray.get_runtime_context().gcs_address)

    # --- the cluster's nodes -------------------------------------------------------------

    def nodes(self) -> list[resources.Node]:
        self._refresh()
        out = [_as_node(i) for i in self._alive.values()]
        return sorted((n for n in out if n.cpu or n.gpus or n.accelerators),
                      key=lambda n: n.name)

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._nodes_at < NODES_TTL:
            return
        try:
            listed = self._ray.nodes()
        except Exception as exc:  # the GCS briefly unreachable: keep the last view
            log.warning("cannot read the Ray cluster's nodes: %s", exc)
            return
        self._alive = {n["NodeID"]: n for n in listed if n.get("Alive")}
        self._nodes_at = now

    def _node_id(self, name: str) -> str | None:
        return next((i for i in self._alive if node_name(i) == name), None)

    def _ip(self, node_id: str) -> str:
        info = self._alive.get(node_id)
        return str(info["NodeManagerAddress"]) if info else "127.0.0.1"

    def _node_alive(self, node_id: str, *, force: bool = False) -> bool:
        self._refresh(force=force)
        return node_id in self._alive

    # --- the protocol --------------------------------------------------------------------

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def stage_code(self, node: str, code_dir: str) -> None:
        """The snapshot's tar into the object store now (the scheduler's preparing thread),
        so that the launch finds it there instead of making it."""
        try:
            self._code_ref(code_dir)
        except (OSError, tarfile.TarError, self._ray.exceptions.RayError) as exc:
            raise errors.LaunchError(f"cannot ship the code to Ray: {exc}") from None

    def launch(self, spec: base.LaunchSpec) -> base.Handle:
        node_id = self._node_id(spec.node)
        if node_id is None:  # it left between placement and launch: place the job again
            return self._lost_before_start(spec)
        master = self._ip(node_id)
        if len(spec.gang) > 1:
            master = self._ip(self._node_id(spec.gang[0]) or node_id)
        seeds = self._seeded(spec)
        inputs = None if self._shared_fs else rayinputs.of(spec, seeds)
        group = ""
        try:
            group, pg = self._groups.reserve(spec, node_id)
            agent = self._agent(node_id)
            payload = {**_payload(spec, master, inputs), "group": pg, "group_name": group,
                       "run_as": self._run_as}
            if self._shared_fs:  # the node reads what the channels hold where they are
                payload["seed_dirs"] = [(i, spec.output_dirs[i]) for i in seeds]
            outputs = rayfiles.record(spec, group=group,
                                      inputs=inputs.dumps() if inputs else None)
            agent.start.remote(spec.launch_id, payload, self._code_ref(spec.code_dir))
        except (ValueError, OSError, self._ray.exceptions.RayError,
                errors.LaunchError) as exc:
            self._groups.give_back(group, keep=False)  # (a gang's: once no task holds it)
            why = exc.message if isinstance(exc, errors.LaunchError) else str(exc)
            raise errors.LaunchError(f"cannot start {spec.task} on Ray: {why}") from None
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id,
                             actor=agent_name(node_id), node_id=node_id, group=group)
        self._watch(handle, agent, offset=0, outputs=outputs)
        if inputs is not None:
            self._shipper.ship(node_id, agent, spec.launch_id, inputs)
        return handle

    def _agent(self, node_id: str) -> Any:
        """The node's agent, started on first use (detached: it outlives this server)."""
        from ray.util import scheduling_strategies as ss

        agent = self._agents.get(node_id)
        if agent is None:
            agent = self._agents[node_id] = self._agent_cls.options(
                name=agent_name(node_id), namespace=self._ns, lifetime="detached",
                get_if_exists=True, num_cpus=0, max_restarts=0, max_task_retries=0,
                max_concurrency=1000,
                scheduling_strategy=ss.NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
        return agent

    def _lost_before_start(self, spec: base.LaunchSpec) -> base.Handle:
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        task = _Task(handle=handle, actor=None, log_path=_log_path(handle), offset=0,
                     wait_ref=None, launch_id=spec.launch_id, result=self._node_lost(handle))
        with self._lock:
            self._tasks[spec.launch_id] = task
        self._wake()
        return handle

    def poll(self, handle: base.Handle) -> base.Status:
        with self._lock:
            task = self._tasks.get(handle.launch_id)
        if task is None:
            return self.adopt(handle)
        return self._check(task)

    def cancel(self, handle: base.Handle, *, force: bool) -> None:
        actor = self._actor(handle)
        if actor is not None:
            with contextlib.suppress(self._ray.exceptions.RayError):
                actor.signal.remote(handle.launch_id, force)

    def adopt(self, handle: base.Handle) -> base.Status:
        actor = self._actor(handle)
        if actor is None:
            return self._gone(handle, "the node's corral agent is gone")
        try:
            state = self._ray.get(actor.state.remote(handle.launch_id), timeout=30)
        except self._ray.exceptions.RayError as exc:
            return self._gone(handle, f"the node's corral agent does not answer: {exc}")
        if state == "unknown":
            return self._gone(handle, "the node's corral agent does not know it (it was "
                                      "restarted, and the task with it)")
        inputs = rayinputs.Inputs.loads(rayfiles.plan(
            handle.control_dir, handle.task, handle.launch_id).get("inputs"))
        if inputs is not None and state == "running":  # they may not all be there yet
            self._shipper.ship(handle.node_id, actor, handle.launch_id, inputs)
        try:
            offset = os.path.getsize(_log_path(handle))
        except OSError:
            offset = 0
        return self._check(self._watch(handle, actor, offset=offset,
                                       outputs=rayfiles.load(handle)))

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        # The agent refuses a start it was told to abandon, so NOT_STARTED is final; no
        # agent at all means nothing was ever started on that node by this launch.
        node_id = self._node_id(spec.node) or ""
        group = _recorded_group(spec)
        try:
            agent = self._ray.get_actor(agent_name(node_id), namespace=self._ns)
            never = bool(self._ray.get(agent.abandon.remote(spec.launch_id), timeout=30))
        except (ValueError, self._ray.exceptions.RayError):
            never = True
        if never:
            if group.startswith(rayslots.SLOT_PREFIX):  # this launch's own reservation
                self._groups.give_back(group, keep=False)  # (a gang's serves its relaunch)
            return base.Status(base.State.NOT_STARTED)
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id,
                             actor=agent_name(node_id), node_id=node_id, group=group)
        return self.adopt(handle)

    def forget(self, spec: base.LaunchSpec) -> None:
        """Retire a launch whose outcome the server never learnt: stop it if it started,
        make sure it never starts, give back its reservation."""
        node_id = self._node_id(spec.node)
        if node_id is None:
            return
        with contextlib.suppress(ValueError, self._ray.exceptions.RayError):
            agent = self._ray.get_actor(agent_name(node_id), namespace=self._ns)
            self._ray.get(agent.finish.remote(spec.launch_id), timeout=30)
        self._groups.give_back(_recorded_group(spec), keep=False)

    def sample(self, handle: base.Handle) -> base.Sample | None:
        with self._lock:
            task = self._tasks.get(handle.launch_id)
        if task is None or task.result is not None:
            return None
        try:
            got = self._ray.get(task.actor.sample.remote(handle.launch_id), timeout=5)
        except self._ray.exceptions.RayError:
            return None
        if got is None:
            return None
        return base.Sample(cpu_percent=got[0], rss_mb=got[1])

    def clean_up(self, handle: base.Handle) -> None:
        self.cancel(handle, force=True)

    def release(self, handle: base.Handle) -> None:
        """Forget the task: its agent cleans up after it, its reservation is given back
        (or kept a while for the next task of its shape, when its process has ended)."""
        with self._lock:
            task = self._tasks.pop(handle.launch_id, None)
        actor = task.actor if task else self._actor(handle)
        if actor is not None:
            with contextlib.suppress(self._ray.exceptions.RayError):
                actor.finish.remote(handle.launch_id)
        ended = task is not None and task.result is not None \
            and task.result.state is base.State.EXITED
        self._groups.give_back(handle.group, keep=ended)

    def close(self) -> None:
        """Stop watching; the tasks go on running on the cluster for the next server."""
        self._stop.set()
        self._thread.join(timeout=10)
        self._copier.close()
        self._shipper.close()
        self._groups.expire(keep=0.0)  # nothing of the cluster is held for nothing
        if self._owns:
            self._ray.shutdown()

    # --- watching ------------------------------------------------------------------------

    def _watch(self, handle: base.Handle, actor: Any, *, offset: int,
               outputs: rayfiles.Outputs) -> _Task:
        task = _Task(handle=handle, actor=actor, log_path=_log_path(handle), offset=offset,
                     wait_ref=None, launch_id=handle.launch_id, outputs=outputs)
        self._expect_exit(task)
        os.makedirs(os.path.dirname(task.log_path), exist_ok=True)
        with self._lock:
            self._tasks[handle.launch_id] = task
        return task

    def _check(self, task: _Task) -> base.Status:
        if task.result is not None:
            return task.result
        ray = self._ray
        handle = task.handle
        ready, _ = ray.wait([task.wait_ref], timeout=0)
        if ready:
            try:
                code = ray.get(task.wait_ref, timeout=10)
            except ray.exceptions.ActorUnavailableError:  # a hiccup: ask again
                self._expect_exit(task)
                return base.Status(base.State.RUNNING, handle=handle)
            except ray.exceptions.RayActorError as exc:
                return self._died(task, exc)
            except ray.exceptions.RayError as exc:  # the agent does not know the task
                task.result = self._gone(handle, f"the node's corral agent lost it: {exc}")
                return task.result
            if not self._copier.done(task):  # its last files first, then its end
                return base.Status(base.State.RUNNING, handle=handle)
            self._pull(task)
            task.result = base.Status(base.State.EXITED, exit_code=int(code), handle=handle)
            return task.result
        if handle.node_id and not self._node_alive(handle.node_id):
            task.result = self._node_lost(handle)
            return task.result
        return base.Status(base.State.RUNNING, handle=handle)

    def _died(self, task: _Task, exc: Exception) -> base.Status:
        """The actor died: with its node (reschedule), or by itself (the task is lost)."""
        handle = task.handle
        self._agents.pop(handle.node_id, None)  # a dead agent is started anew on next use
        detail = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        if getattr(exc, "actor_init_failed", False):
            task.result = base.Status(base.State.LOST, handle=handle, message=(
                f"its Ray actor could not start: {detail[-1] if detail else exc!r}"))
            return task.result
        if not handle.node_id or not self._node_alive(handle.node_id, force=True):
            task.result = self._node_lost(handle)
            return task.result
        now = time.monotonic()
        task.died_at = task.died_at or now
        if now - task.died_at < NODE_DEATH_GRACE:
            return base.Status(base.State.RUNNING, handle=handle)  # Ray may not know yet
        task.result = base.Status(base.State.LOST, handle=handle, message=(
            f"its Ray actor died: {detail[-1] if detail else type(exc).__name__}"))
        return task.result

    def _gone(self, handle: base.Handle, why: str) -> base.Status:
        if not handle.node_id or not self._node_alive(handle.node_id, force=True):
            return self._node_lost(handle)
        return base.Status(base.State.LOST, handle=handle, message=why)

    def _node_lost(self, handle: base.Handle) -> base.Status:
        return base.Status(base.State.NODE_LOST, handle=handle,
                           message=f"Ray node {handle.node_id or handle.node} left the cluster")

    def _actor(self, handle: base.Handle) -> Any:
        with self._lock:
            task = self._tasks.get(handle.launch_id)
        if task is not None:
            return task.actor
        if not handle.actor:
            return None
        try:
            return self._ray.get_actor(handle.actor, namespace=self._ns)
        except ValueError:
            return None

    def _pull(self, task: _Task) -> None:
        """Copy what the task printed since the last pull into its log file on the server."""
        with task.lock:
            while True:
                try:
                    chunk = self._ray.get(task.actor.read_log.remote(
                        task.launch_id, task.offset, LOG_CHUNK), timeout=10)
                except self._ray.exceptions.RayError:
                    return
                if chunk:
                    with open(task.log_path, "ab") as fh:
                        fh.write(chunk)
                    task.offset += len(chunk)
                if len(chunk) < LOG_CHUNK:
                    return

    # --- wake-ups, and the background thread: logs, idle reservations -------------------

    def _expect_exit(self, task: _Task) -> None:
        """Ask the task's agent for its exit code, and hear of the answer when it comes."""
        ref = task.wait_ref = task.actor.wait.remote(task.launch_id)
        task.announced = False
        ref.future().add_done_callback(lambda _done: self._exited(task, ref))

    def _exited(self, task: _Task, ref: Any) -> None:
        """(a Ray thread) The task's wait answered: its process ended, or its actor died."""
        if task.wait_ref is not ref or task.announced:
            return
        task.announced = True
        self._copier.done(task)  # the scheduler is woken once its last files are here

    def _run(self) -> None:
        next_logs = 0.0
        while not self._stop.wait(0.2):
            try:
                self._groups.expire(rayslots.SLOT_KEEP)
                if time.monotonic() >= next_logs:
                    next_logs = time.monotonic() + LOG_INTERVAL
                    self._pull_all()
            except Exception:
                log.exception("Ray watcher pass failed")
                self._stop.wait(1.0)

    def _running(self) -> list[_Task]:
        with self._lock:
            return [t for t in self._tasks.values() if t.result is None]

    def _pull_all(self) -> None:
        with self._lock:
            running = [t for t in self._tasks.values() if t.result is None]
        asks = []
        for t in running:
            with contextlib.suppress(self._ray.exceptions.RayError):
                asks.append((t, t.offset,
                             t.actor.read_log.remote(t.launch_id, t.offset, LOG_CHUNK)))
        if not asks:
            return
        self._ray.wait([a[2] for a in asks], num_returns=len(asks), timeout=2)
        for task, offset, ref in asks:
            try:
                chunk = self._ray.get(ref, timeout=0)
            except self._ray.exceptions.RayError:
                continue
            with task.lock:
                if chunk and task.offset == offset:
                    with open(task.log_path, "ab") as fh:
                        fh.write(chunk)
                    task.offset += len(chunk)

    # --- reservations and code ------------------------------------------------------------

    def _held(self, group: str) -> bool:
        """Whether a task this server watches holds the placement group."""
        with self._lock:
            return any(t.handle.group == group for t in self._tasks.values())

    def _agents_alive(self) -> list[Any]:
        """The agents of the nodes alive now (a node without one runs no task of ours)."""
        found = []
        for node_id in list(self._alive):
            with contextlib.suppress(ValueError):
                found.append(self._ray.get_actor(agent_name(node_id), namespace=self._ns))
        return found

    def _seeded(self, spec: base.LaunchSpec) -> tuple[int, ...]:
        """The output channels that already hold files (a resumed version's checkpoints,
        an earlier attempt's files), which the attempt's tasks start from as they would on
        the server's own disk: looked at once per attempt, so that what its first task
        writes back is not shipped to the next. Their files travel as inputs do."""
        key = (spec.job_id, spec.attempt)
        if key not in self._seeds:
            if len(self._seeds) > 1024:
                self._seeds.clear()
            self._seeds[key] = rayinputs.holding_files(spec.output_dirs)
        return self._seeds[key]

    def _code_ref(self, code_dir: str) -> Any:
        """The attempt's code snapshot as a tar in the object store (one put per attempt)."""
        if not code_dir:
            return None
        ref = self._code.get(code_dir)
        if ref is None:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(code_dir, arcname=".")
            if len(self._code) > 32:
                self._code.clear()
            ref = self._code[code_dir] = self._ray.put(buf.getvalue())
        return ref


def _recorded_group(spec: base.LaunchSpec) -> str:
    """The group a launch was given, as its plan says: a spec rebuilt after a restart does
    not know the gang. A launch without a plan never asked its agent to start: a gang's
    group serves its relaunch, and a single task's is removed by the next server's sweep
    ("" here)."""
    found = rayfiles.plan(spec.control_dir, spec.task, spec.launch_id).get("group")
    if found:
        return str(found)
    return rayslots.group_name(spec.job_id, spec.attempt) if len(spec.gang) > 1 else ""


def _payload(spec: base.LaunchSpec, master_addr: str,
             inputs: rayinputs.Inputs | None = None) -> dict[str, Any]:
    """The launch in the node's terms: server paths become placeholders the actor fills
    (the code, the output channels, the inputs shipped there and the attempt's own
    folder: all on the node)."""
    attempt_dir = os.path.dirname(spec.control_dir)
    places = [(out, rayactor.OUTPUT % i) for i, out in enumerate(spec.output_dirs)]
    places += inputs.places() if inputs else []
    places.sort(key=lambda p: -len(p[0]))

    def portable(value: str) -> str:
        for path, there in places:
            bare = path.rstrip("/") or path
            if value == path:
                return there
            if value == bare or value.startswith(bare + "/"):
                return there + value[len(bare):]
            if value.endswith("=" + path):  # --channel=<dir>, as channels are passed
                return value[:-len(path)] + there
        if spec.code_dir and (value == spec.code_dir or value.startswith(spec.code_dir + "/")):
            return rayactor.CODE + value[len(spec.code_dir):]
        if value == attempt_dir or value.startswith(attempt_dir + "/"):
            return rayactor.ROOT + value[len(attempt_dir):]
        return value

    argv = [portable(a) for a in spec.argv]
    if not spec.shell and argv and argv[0] == sys.executable:
        argv[0] = rayactor.NODE_PYTHON  # the server's own Python: the node's instead
    env = {**spec.env, "MASTER_ADDR": master_addr}
    return {"launch_id": spec.launch_id, "task": spec.task, "argv": argv, "shell": spec.shell,
            "cwd": portable(spec.cwd), "env": {k: portable(v) for k, v in env.items()},
            "outputs": [rayactor.OUTPUT % i for i in range(len(spec.output_dirs))],
            "metrics": portable(env.get(metrics.FILE_ENV, "")),
            "inputs": {"key": inputs.key, "count": len(inputs.sources),
                       "seeds": inputs.seed_pairs()} if inputs else None}


def _log_path(handle: base.Handle) -> str:
    # The run directory's layout (storage.RunPaths): attempt-N/ctl beside attempt-N/logs.
    return os.path.join(os.path.dirname(handle.control_dir), "logs", f"{handle.task}.log")


#: Ray resources that are not accelerators
RAY_OWN = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


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
