"""Runs tasks on the nodes of a Ray cluster, behind the same protocol as the local executor.

Every task is a process started on its node by a small actor, the node's agent (`agents`,
one per node, started on first use), once the task's placement group holds the flavor's
resources (CPUs, GPUs, memory) there. A placement group's bundles are pinned to the nodes
corral chose, so a gang's tasks are all reserved at once. Agents and placement groups are
named and detached: a restarted server finds them by name.

A single task's placement group is kept a few seconds after the task ends and given to the
next task of the same shape on that node (`slots`). The server keeps one `wait` call
pending on each actor and hears its answer at once (the process ended, or the actor died
with its node), which wakes the scheduler; a background thread pulls the tasks' output into
their usual log files (`tasks`). What tasks write to their output channels and metrics
file is copied back likewise (`files`); a task counts as ended once its last files are
here. What they read (input channels, the job's model) is shipped to their node before they
start (`inputs`), and what they follow kept up to date there (`follow`), unless the
cluster shares the server's file system (`shared_fs`).

A launch is put in its node's terms by `payload`; what the cluster says of its nodes is
read through `nodes`. Ray is imported only when this executor is built, which the server
does in a process of its own (`bridge`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tarfile
import threading
import time
from collections.abc import Callable
from typing import Any

from corral.domain import errors, resources
from corral.executors import base
from corral.executors.ray import (
    agents,
    files,
    folders,
    follow,
    inputs,
    nodes,
    payload,
    slots,
    tasks,
)

log = logging.getLogger(__name__)

NAMESPACE = "corral"
#: how long an actor that died on a node Ray still calls alive may wait for Ray to notice
#: that the node is gone (Ray's own health checks take about 15-30 s on a quiet cluster,
#: and were seen taking longer on a loaded one; too short a wait would call a node's
#: death a lost task and spend the job's retry budget)
NODE_DEATH_GRACE = 60.0
#: seconds an agent has to answer whether it knows a task (adopt, recover, forget)
AGENT_ANSWER_S = 30.0
#: seconds a task whose agent does not answer counts as running, unsure (asked again at
#: each adoption), before it counts as lost: a hung agent's tasks do not wait for ever
UNSURE_FOR_S = NODE_DEATH_GRACE


class RayExecutor:
    """Tasks are processes on a Ray cluster's nodes, one small detached actor each."""

    def __init__(self, address: str, *, namespace: str = NAMESPACE,
                 run_as: str | None = None, shared_fs: bool = False) -> None:
        import ray

        self._ray = ray
        self._address = address
        self._run_as = run_as  #: the user the agents start tasks as (when they are root)
        self._shared_fs = shared_fs  #: tasks read their inputs at the server's paths
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, namespace=namespace, log_to_driver=False,
                     logging_level=logging.WARNING)
        self._agents = agents.Agents(ray, namespace)
        self._lock = threading.Lock()
        self._tasks: dict[str, tasks.Task] = {}
        #: launch id -> when its agent first did not say in time whether it runs
        self._unanswered: dict[str, float] = {}
        #: agent -> when it last did not answer in time: not asked again for AGENT_ANSWER_S
        #: (each call would wait that long, a pass for each of its tasks)
        self._slow: dict[str, float] = {}
        self._code: dict[str, Any] = {}
        #: per job attempt: the output channels that held files when it started
        self._seeds: dict[tuple[str, int], tuple[int, ...]] = {}
        #: node id -> its reading of its own use, asked for and not yet answered
        self._use_asked: dict[str, Any] = {}
        self._nodes = nodes.Nodes(ray)
        self._groups = slots.Reservations(ray, node_id=self._nodes.id_of,
                                          alive=self._nodes.known, held=self._held)
        self._wake: Callable[[], None] = lambda: None
        self._stop = threading.Event()
        self._groups.sweep(self._agents_alive())
        self._thread = threading.Thread(target=self._run, name="corral-ray", daemon=True)
        self._thread.start()
        self._copier = files.Copier(ray, self._running, lambda: self._wake())
        #: whose rights bound what the server reads for the tasks (`folders`)
        self._reader = folders.reader_of(run_as)
        self._shipper = inputs.Shipper(ray, self._reader)

    def probe_address(self) -> str:
        """The address that answers while the cluster is up (its GCS, or its client port)."""
        if self._address.startswith("ray://"):
            return self._address
        return str(self._ray.get_runtime_context().gcs_address)

    # --- the protocol --------------------------------------------------------------------

    def nodes(self) -> list[resources.Node]:
        return self._nodes.listing()

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
        node_id = self._nodes.id_of(spec.node)
        if node_id is None:  # it left between placement and launch: place the job again
            return self._lost_before_start(spec)
        here = self._nodes.ip(node_id)
        # Each rank's node's address (rank 0's is MASTER_ADDR); one that left meanwhile
        # counts as this one's: the gang is placed again once its task is found lost.
        hosts = [self._nodes.ip(self._nodes.id_of(n) or node_id) for n in spec.gang] or [here]
        seeds = self._seeded(spec)
        shipped = None if self._shared_fs else inputs.of(spec, seeds)
        group = ""
        try:
            group, pg = self._groups.reserve(spec, node_id)
            agent = self._agents.on(node_id)
            request = {**payload.of(spec, hosts, here, shipped), "group": pg, "group_name": group,
                       "run_as": self._run_as}
            if self._shared_fs:  # the node reads what the channels hold where they are
                request["seed_dirs"] = [(i, spec.output_dirs[i]) for i in seeds]
            outputs = files.record(spec, group=group,
                                   inputs=shipped.dumps() if shipped else None)
            agent.start.remote(spec.launch_id, request, self._code_ref(spec.code_dir))
        except (ValueError, OSError, self._ray.exceptions.RayError,
                errors.LaunchError) as exc:
            self._groups.give_back(group, keep=False)  # (a gang's: once no task holds it)
            why = exc.message if isinstance(exc, errors.LaunchError) else str(exc)
            raise errors.LaunchError(f"cannot start {spec.task} on Ray: {why}") from None
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id,
                             actor=agents.agent_name(node_id), node_id=node_id, group=group,
                             address=here)
        followed = follow.Followed.of(self._ray, self._reader, spec.launch_id, agent, shipped)
        self._watch(handle, agent, offset=0, outputs=outputs, followed=followed)
        if shipped is not None:
            self._shipper.ship(node_id, agent, spec.launch_id, shipped, followed)
        return handle

    def _lost_before_start(self, spec: base.LaunchSpec) -> base.Handle:
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id)
        task = tasks.Task(handle=handle, actor=None, log_path=tasks.log_path(handle),
                          offset=0, wait_ref=None, launch_id=spec.launch_id,
                          result=self._node_lost(handle))
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
        agent = self._actor(handle)
        if agent is not None:
            with contextlib.suppress(self._ray.exceptions.RayError):
                agent.signal.remote(handle.launch_id, force)

    def adopt(self, handle: base.Handle) -> base.Status:
        agent = self._actor(handle)
        if agent is None:
            return self._gone(handle, "the node's corral agent is gone")
        try:
            state = self._state(agent, handle)
        except self._ray.exceptions.RayError as exc:
            return self._gone(handle, f"the node's corral agent does not answer: {exc}")
        if state is None:
            return self._not_answered(handle)
        if state == "unknown":
            return self._gone(handle, "the node's corral agent does not know it (it was "
                                      "restarted, and the task with it)")
        shipped = inputs.Inputs.loads(files.plan(
            handle.control_dir, handle.task, handle.launch_id).get("inputs"))
        followed = follow.Followed.of(self._ray, self._reader, handle.launch_id, agent,
                                      shipped)
        if shipped is not None and state == "running":  # they may not all be there yet
            self._shipper.ship(handle.node_id, agent, handle.launch_id, shipped, followed)
        try:
            offset = os.path.getsize(tasks.log_path(handle))
        except OSError:
            offset = 0
        return self._check(self._watch(handle, agent, offset=offset,
                                       outputs=files.load(handle), followed=followed))

    def _state(self, agent: Any, handle: base.Handle) -> str | None:
        """What the task's agent says of it ("unknown", "running", "ended"); None when it
        did not answer within AGENT_ANSWER_S, now or at another call in the last
        AGENT_ANSWER_S (RayError: it is gone)."""
        name = handle.actor or ""
        slow = self._slow.get(name)
        if slow is not None and time.monotonic() - slow < AGENT_ANSWER_S:
            return None
        try:
            state = self._ray.get(agent.state.remote(handle.launch_id),
                                  timeout=AGENT_ANSWER_S)
        except self._ray.exceptions.GetTimeoutError:  # slow, not gone
            self._slow[name] = time.monotonic()
            return None
        self._slow.pop(name, None)
        self._unanswered.pop(handle.launch_id, None)
        return str(state)

    def _not_answered(self, handle: base.Handle) -> base.Status:
        """A task whose agent does not say whether it runs: running, unsure (asked again),
        until that has lasted UNSURE_FOR_S; lost then."""
        waited = time.monotonic() - self._unanswered.setdefault(handle.launch_id,
                                                                time.monotonic())
        if waited >= UNSURE_FOR_S:
            self._unanswered.pop(handle.launch_id, None)
            return self._gone(handle, f"the node's corral agent has not answered for "
                                      f"{waited:.0f} s")
        return base.Status(base.State.RUNNING, handle=handle, unsure=True, message=(
            f"the node's corral agent did not answer within {AGENT_ANSWER_S:g} s"))

    def recover(self, spec: base.LaunchSpec) -> base.Status:
        # The agent refuses a start it was told to abandon, so NOT_STARTED is final; no
        # agent at all means nothing was ever started on that node by this launch.
        node_id = self._nodes.id_of(spec.node) or ""
        group = _recorded_group(spec)
        handle = base.Handle(node=spec.node, task=spec.task, pid=0, start_time=0.0,
                             control_dir=spec.control_dir, launch_id=spec.launch_id,
                             actor=agents.agent_name(node_id), node_id=node_id, group=group)
        try:
            agent = self._agents.of_node(node_id)
            never = agent is None or bool(
                self._ray.get(agent.abandon.remote(spec.launch_id), timeout=AGENT_ANSWER_S))
        except self._ray.exceptions.GetTimeoutError:
            # No answer is no "never started": the launch may run, or start yet, and one
            # launched again beside it would run twice. Lost with its node: its release
            # stops it there (or makes sure it never starts), and its job is queued again.
            return base.Status(base.State.NODE_LOST, handle=handle, message=(
                f"the corral agent of Ray node {node_id or spec.node} did not say within "
                f"{AGENT_ANSWER_S:g} s whether the launch started"))
        except self._ray.exceptions.RayError:
            never = True
        if never:
            if group.startswith(slots.SLOT_PREFIX):  # this launch's own reservation
                self._groups.give_back(group, keep=False)  # (a gang's serves its relaunch)
            return base.Status(base.State.NOT_STARTED)
        return self.adopt(handle)

    def forget(self, spec: base.LaunchSpec) -> None:
        """Retire a launch whose outcome the server never learnt: stop it if it started,
        make sure it never starts, give back its reservation."""
        node_id = self._nodes.id_of(spec.node)
        if node_id is None:
            return
        with contextlib.suppress(self._ray.exceptions.RayError):
            agent = self._agents.of_node(node_id)
            if agent is not None:
                self._ray.get(agent.finish.remote(spec.launch_id), timeout=AGENT_ANSWER_S)
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

    def node_usage(self) -> list[base.NodeUsage]:
        """Each alive node's use, read there by a task of no CPU. Never waits: it answers
        the readings asked for at earlier calls that are done by now, and asks again
        where none is on its way (a node that does not answer is left out meanwhile), so
        that the tasks' own samples, taken in the same pass, are never held up."""
        asked, self._use_asked = self._use_asked, {}
        out = []
        try:
            done = set(self._ray.wait(list(asked.values()), num_returns=len(asked),
                                      timeout=0)[0]) if asked else set()
            for node_id in self._nodes.ids():
                call = asked.get(node_id)
                if call is not None and call not in done:
                    self._use_asked[node_id] = call  # still on its way
                    continue
                self._use_asked[node_id] = self._agents.read_use(node_id)
                if call is not None:
                    with contextlib.suppress(self._ray.exceptions.RayError):
                        cpu, mem, gpu_util, gpu_mem = self._ray.get(call, timeout=1)
                        out.append(base.NodeUsage(
                            node=nodes.node_name(node_id), cpu_percent=cpu, mem_mb=mem,
                            gpu_util=gpu_util, gpu_mem_mb=gpu_mem))
        except self._ray.exceptions.RayError:
            pass  # the cluster is unreachable: what was read so far; the next call asks again
        return out

    def clean_up(self, handle: base.Handle) -> None:
        self.cancel(handle, force=True)

    def release(self, handle: base.Handle) -> None:
        """Forget the task: its agent cleans up after it, its reservation is given back
        (or kept a while for the next task of its shape, when its process has ended)."""
        with self._lock:
            task = self._tasks.pop(handle.launch_id, None)
        self._unanswered.pop(handle.launch_id, None)
        agent = task.actor if task else self._actor(handle)
        if agent is not None:
            with contextlib.suppress(self._ray.exceptions.RayError):
                agent.finish.remote(handle.launch_id)
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

    def _watch(self, handle: base.Handle, agent: Any, *, offset: int,
               outputs: files.Outputs, followed: follow.Followed | None = None) -> tasks.Task:
        task = tasks.Task(handle=handle, actor=agent, log_path=tasks.log_path(handle),
                          offset=offset, wait_ref=None, launch_id=handle.launch_id,
                          outputs=outputs, followed=followed)
        self._expect_exit(task)
        with contextlib.suppress(OSError):  # (refused: its output is not kept, and said)
            files.make_server_dir(os.path.dirname(task.log_path))
        with self._lock:
            self._tasks[handle.launch_id] = task
        return task

    def _check(self, task: tasks.Task) -> base.Status:
        if task.result is not None:
            return task.result
        ray = self._ray
        handle = task.handle
        if not self._answered(task):
            if not handle.node_id or self._nodes.alive(handle.node_id):
                return base.Status(base.State.RUNNING, handle=handle)
            # Its node is gone. The exit code may have come after the look above: only a
            # look made after the node was seen gone can say that the task did not end.
            if not self._answered(task):
                task.result = self._node_lost(handle)
                return task.result
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
        if task.files_left:
            task.result = self._files_left(task, int(code))
            return task.result
        tasks.pull(self._ray, task)
        task.result = base.Status(base.State.EXITED, exit_code=int(code), handle=handle)
        return task.result

    def _answered(self, task: tasks.Task) -> bool:
        """Whether the task's agent has answered its wait (its exit code, or an error)."""
        ready, _ = self._ray.wait([task.wait_ref], timeout=0)
        return bool(ready)

    def _died(self, task: tasks.Task, exc: Exception) -> base.Status:
        """The actor died: with its node (reschedule), or by itself (the task is lost)."""
        handle = task.handle
        self._agents.died(handle.node_id)
        detail = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        if getattr(exc, "actor_init_failed", False):
            task.result = base.Status(base.State.LOST, handle=handle, message=(
                f"its Ray actor could not start: {detail[-1] if detail else exc!r}"))
            return task.result
        if not handle.node_id or not self._nodes.alive(handle.node_id, force=True):
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
        if not handle.node_id or not self._nodes.alive(handle.node_id, force=True):
            return self._node_lost(handle)
        return base.Status(base.State.LOST, handle=handle, message=why)

    def _files_left(self, task: tasks.Task, code: int) -> base.Status:
        """An ended task whose last files could not be copied back: its agent, and the
        node's scratch folder with them, cannot be reached. Counted as exited, its job
        would end well without what it wrote after the last copy (often its final
        checkpoint, its last metrics) and might register a model of it: it is lost with
        its node instead, and runs again."""
        handle = task.handle
        with contextlib.suppress(OSError):
            files.append_server_file(task.log_path, (
                f"corral: the task ended (exit code {code}) but its last files could not "
                f"be copied back: its node left ({task.files_left}); it runs again\n"
            ).encode())
        return base.Status(base.State.NODE_LOST, handle=handle, message=(
            f"Ray node {handle.node_id or handle.node} left the cluster before the task's "
            "last files were copied back"))

    def _node_lost(self, handle: base.Handle) -> base.Status:
        return base.Status(base.State.NODE_LOST, handle=handle,
                           message=f"Ray node {handle.node_id or handle.node} left the cluster")

    def _actor(self, handle: base.Handle) -> Any:
        with self._lock:
            task = self._tasks.get(handle.launch_id)
        if task is not None:
            return task.actor
        return self._agents.named(handle.actor) if handle.actor else None

    # --- wake-ups, and the background thread: logs, idle reservations -------------------

    def _expect_exit(self, task: tasks.Task) -> None:
        """Ask the task's agent for its exit code, and hear of the answer when it comes."""
        ref = task.wait_ref = task.actor.wait.remote(task.launch_id)
        task.announced = False
        ref.future().add_done_callback(lambda _done: self._exited(task, ref))

    def _exited(self, task: tasks.Task, ref: Any) -> None:
        """(a Ray thread) The task's wait answered: its process ended, or its actor died."""
        if task.wait_ref is not ref or task.announced:
            return
        task.announced = True
        self._copier.done(task)  # the scheduler is woken once its last files are here

    def _run(self) -> None:
        next_logs = 0.0
        while not self._stop.wait(0.2):
            try:
                self._groups.expire(slots.SLOT_KEEP)
                if time.monotonic() >= next_logs:
                    next_logs = time.monotonic() + tasks.LOG_INTERVAL
                    tasks.pull_all(self._ray, self._running())
            except Exception:
                log.exception("Ray watcher pass failed")
                self._stop.wait(1.0)

    def _running(self) -> list[tasks.Task]:
        with self._lock:
            return [t for t in self._tasks.values() if t.result is None]

    # --- reservations and code ------------------------------------------------------------

    def _held(self, group: str) -> bool:
        """Whether a task this server watches holds the placement group."""
        with self._lock:
            return any(t.handle.group == group for t in self._tasks.values())

    def _agents_alive(self) -> list[Any]:
        """The agents of the nodes alive now (a node without one runs no task of ours)."""
        found = (self._agents.of_node(node_id) for node_id in self._nodes.ids())
        return [agent for agent in found if agent is not None]

    def _seeded(self, spec: base.LaunchSpec) -> tuple[int, ...]:
        """The output channels that already hold files (a resumed version's checkpoints,
        an earlier attempt's files), which the attempt's tasks start from as they would on
        the server's own disk: looked at once per attempt, so that what its first task
        writes back is not shipped to the next. Their files travel as inputs do."""
        key = (spec.job_id, spec.attempt)
        if key not in self._seeds:
            if len(self._seeds) > 1024:
                self._seeds.clear()
            self._seeds[key] = inputs.holding_files(spec.output_dirs)
        return self._seeds[key]

    def _code_ref(self, code_dir: str) -> Any:
        """The attempt's code snapshot as a tar in the object store (one put per attempt),
        read without following a link its user put in it."""
        if not code_dir:
            return None
        ref = self._code.get(code_dir)
        if ref is None:
            packed = folders.tar_of(code_dir, self._reader)
            if len(self._code) > 32:
                self._code.clear()
            ref = self._code[code_dir] = self._ray.put(packed)
        return ref


def _recorded_group(spec: base.LaunchSpec) -> str:
    """The group a launch was given, as its plan says: a spec rebuilt after a restart does
    not know the gang. A launch without a plan never asked its agent to start: a gang's
    group serves its relaunch, and a single task's is removed by the next server's sweep
    ("" here)."""
    found = files.plan(spec.control_dir, spec.task, spec.launch_id).get("group")
    if found:
        return str(found)
    return slots.group_name(spec.job_id, spec.attempt) if len(spec.gang) > 1 else ""
