"""The Ray executor and its node agents in this process (`fakeray`: no Ray started): how a
launch is settled after a restart, and how inputs reach a node without a shared file
system."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral.domain import errors, resources
from corral.executors import base
from corral.executors.ray import actor, agents, cluster, files, folders, inputs, nodes, slots, tasks
from corral.oskit import walk
from tests import factories
from tests.unit import fakeray
from tests.unit.fakeray import Cluster

NODE_A = nodes.node_name("a" * 56)

#: a task that prints where its inputs are and a digest of every file in them
READER = """
import hashlib, os, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
for name, path in sorted(args.items()):
    print(f"PATH {name} {path}")
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs)
    for f in files:
        rel = os.path.relpath(f, path) if f != path else os.path.basename(f)
        print(f"FILE {name} {rel} {hashlib.sha256(open(f, 'rb').read()).hexdigest()}")
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    yield from fakeray.running(monkeypatch)


@pytest.fixture
def node_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Where the node's agents make their scratch folders (not the server's paths)."""
    node = tmp_path / "node"
    node.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(node))
    return node


@pytest.fixture
def executor(fake: Cluster, node_tmp: pathlib.Path
             ) -> Iterator[cluster.RayExecutor]:
    ex = cluster.RayExecutor("127.0.0.1:1")
    yield ex
    ex.close()


def spec_for(home: pathlib.Path, launch_id: str, *, task: str = "worker-0",
             argv: tuple[str, ...] = ("true",), gang: tuple[str, ...] = (),
             input_dirs: tuple[str, ...] = (), job: str = "job1") -> base.LaunchSpec:
    attempt = home / "runs" / job / "attempt-1"
    return base.LaunchSpec(
        job_id=job, task=task, attempt=1, launch_id=launch_id, argv=argv, cwd=str(attempt),
        env={"PATH": os.environ.get("PATH", os.defpath)},
        log_path=str(attempt / "logs" / f"{task}.log"), control_dir=str(attempt / "ctl"),
        node=NODE_A, demand=resources.Resources(cpu=1, memory_mb=256), gang=gang,
        strategy="pack", input_dirs=input_dirs)


def bare(spec: base.LaunchSpec) -> base.LaunchSpec:
    """The launch as a restarted reconciler knows it (`Reconciler._bare_spec`)."""
    return base.LaunchSpec(job_id=spec.job_id, task=spec.task, attempt=spec.attempt,
                           launch_id=spec.launch_id, argv=(), cwd="", env={},
                           log_path=spec.log_path, control_dir=spec.control_dir,
                           node=spec.node)


def ended(ex: cluster.RayExecutor, handle: base.Handle, timeout: float = 20) -> base.Status:
    def done() -> base.Status | None:
        status = ex.poll(handle)
        return status if status.state is not base.State.RUNNING else None

    found: base.Status = factories.wait_for(done, timeout=timeout, what="the task to end")
    return found


def log_of(spec: base.LaunchSpec) -> str:
    return pathlib.Path(spec.log_path).read_text()


# --- recover: a launch whose handle was never recorded ---------------------------------


def test_a_gangs_recovered_task_keeps_the_gangs_group_and_gives_it_back_at_the_end(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
) -> None:
    home = tmp_path / "home"
    gate = tmp_path / "gate"
    wait_gate = ("/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    specs = [spec_for(home, f"l{rank}", task=f"worker-{rank}", argv=wait_gate,
                      gang=(NODE_A, NODE_A)) for rank in (0, 1)]
    first = cluster.RayExecutor("127.0.0.1:1")
    for spec in specs:
        first.launch(spec)  # ... and the server went before it recorded the handles
    first.close()
    assert list(fake.groups) == ["corral-gang-job1-1"]

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        statuses = [second.recover(bare(spec)) for spec in specs]
        assert [s.state for s in statuses] == [base.State.RUNNING] * 2
        assert {s.handle.group for s in statuses if s.handle} == {"corral-gang-job1-1"}
        gate.touch()
        for s in statuses:
            assert s.handle is not None
            assert ended(second, s.handle).exit_code == 0
            second.release(s.handle)
        # The gang's reservation is given back once its last task is released.
        assert fake.groups == {} and "corral-gang-job1-1" in fake.removed
    finally:
        second.close()


def _left_running(tmp_path: pathlib.Path, fake: Cluster, launch_id: str
                  ) -> tuple[base.LaunchSpec, base.Handle, actor.NodeAgent]:
    """A task launched by a server that then went (its executor closed), running on its
    node until `tmp_path`/gate exists: its launch, its handle and its node's agent."""
    gate = tmp_path / "gate"
    spec = spec_for(tmp_path / "home", launch_id, argv=(
        "/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"))
    first = cluster.RayExecutor("127.0.0.1:1")
    handle = first.launch(spec)
    first.close()
    [agent] = [a.obj for a in fake.actors.values() if isinstance(a.obj, actor.NodeAgent)]
    factories.wait_for(lambda: agent.state(launch_id) == "running", what="the task to start")
    return spec, handle, agent


def test_a_launch_whose_agent_does_not_answer_in_time_is_lost_with_its_node_not_run_again(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent that does not say in time whether a launch started has not said that it
    never did: taken for never started, the launch was run again under a new id while it
    ran there, untracked. Lost with its node instead; its release stops it there."""
    gate = tmp_path / "gate"
    # (the server went before it recorded the handle)
    spec, _handle, agent = _left_running(tmp_path, fake, "l7")
    answer = agent.abandon

    def abandon_slowly(launch_id: str) -> bool:
        time.sleep(1.0)
        return answer(launch_id)

    monkeypatch.setattr(agent, "abandon", abandon_slowly)
    monkeypatch.setattr(cluster, "AGENT_ANSWER_S", 0.2)

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        status = second.recover(bare(spec))
        assert status.state is base.State.NODE_LOST, status
        assert "did not say within 0.2 s whether the launch started" in status.message
        assert status.handle is not None and status.handle.launch_id == "l7"
        second.release(status.handle)  # as the scheduler does with a task that ended
        factories.wait_for(lambda: agent.state("l7") == "unknown",
                           what="the task stopped and forgotten on its node")
    finally:
        gate.touch()
        second.close()


def test_a_task_whose_agent_does_not_answer_in_time_is_not_adopted_yet_nor_lost(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow agent is not a dead one: the task counts as running, not known for sure, and
    is asked about again (it was lost, its job's attempt with it, though it ran on)."""
    gate = tmp_path / "gate"
    _spec, handle, agent = _left_running(tmp_path, fake, "l8")
    answer = agent.state

    def state_slowly(launch_id: str) -> str:
        time.sleep(1.0)
        return answer(launch_id)

    monkeypatch.setattr(agent, "state", state_slowly)
    monkeypatch.setattr(cluster, "AGENT_ANSWER_S", 0.2)
    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        status = second.adopt(handle)
        assert (status.state, status.unsure) == (base.State.RUNNING, True), status
        assert "did not answer within 0.2 s" in status.message
        monkeypatch.setattr(agent, "state", answer)
        time.sleep(0.3)  # (not asked again within AGENT_ANSWER_S of its silence)
        again = second.adopt(handle)
        assert (again.state, again.unsure) == (base.State.RUNNING, False)
        gate.touch()
        assert ended(second, handle).exit_code == 0
    finally:
        gate.touch()
        second.close()


def test_a_task_whose_agent_never_answers_is_lost_in_the_end_and_the_agent_asked_sparingly(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung agent: its task counts as running, unsure, for UNSURE_FOR_S, then as lost;
    meanwhile the agent is not asked again within AGENT_ANSWER_S of its last silence (each
    call would wait that long)."""
    gate = tmp_path / "gate"
    _spec, handle, agent = _left_running(tmp_path, fake, "l9")
    asked: list[str] = []

    def hung(launch_id: str) -> str:
        asked.append(launch_id)
        time.sleep(3.0)
        return "running"

    monkeypatch.setattr(agent, "state", hung)
    monkeypatch.setattr(cluster, "AGENT_ANSWER_S", 0.5)
    monkeypatch.setattr(cluster, "UNSURE_FOR_S", 1.2)
    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert second.adopt(handle).unsure  # asked: no answer in 0.5 s
        assert second.adopt(handle).unsure and len(asked) == 1  # not asked again so soon
        time.sleep(1.0)
        lost = second.adopt(handle)  # asked again: still none, 1.5 s since the first
        assert lost.state is base.State.LOST and not lost.unsure, lost
        assert "has not answered for" in lost.message and len(asked) == 2
    finally:
        gate.touch()
        second.close()


def test_a_reservation_made_for_a_launch_that_never_started_is_removed_by_the_next_server(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path) -> None:
    spec = spec_for(tmp_path / "home", "l9")
    first = cluster.RayExecutor("127.0.0.1:1")
    # The server reserved the task's resources, then went before it asked for the start.
    name, _group = first._groups.reserve(spec, "a" * 56)
    first.close()
    assert list(fake.groups) == [name]

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert fake.groups == {} and name in fake.removed
        assert second.recover(bare(spec)).state is base.State.NOT_STARTED
    finally:
        second.close()


def test_a_gangs_reservation_no_task_reached_is_removed_by_the_next_server(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path) -> None:
    specs = [spec_for(tmp_path / "home", f"g{rank}", task=f"worker-{rank}",
                      gang=(NODE_A, NODE_A)) for rank in (0, 1)]
    first = cluster.RayExecutor("127.0.0.1:1")
    name, _group = first._groups.reserve(specs[0], "a" * 56)  # and the server went
    first.close()
    assert list(fake.groups) == [name] == ["corral-gang-job1-1"]

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert fake.groups == {}
        assert [second.recover(bare(s)).state for s in specs] == [base.State.NOT_STARTED] * 2
        # Started again, the gang makes its group anew.
        handles = [second.launch(s) for s in specs]
        assert {h.group for h in handles} == {name} and list(fake.groups) == [name]
        for h in handles:
            assert ended(second, h).exit_code == 0
            second.release(h)
        assert fake.groups == {}
    finally:
        second.close()


def test_an_agent_works_in_a_folder_of_its_own_and_removes_those_of_nodes_gone(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path) -> None:
    fake.dead_ids.append("d" * 56)
    gone = node_tmp / f"corral-corral-{agents.agent_name('d' * 56)}"  # a dead node's
    other = node_tmp / f"corral-corral-{agents.agent_name('b' * 56)}"  # alive
    mine = node_tmp / f"corral-corral-{agents.agent_name('a' * 56)}"  # a dead agent's
    # a node of another Ray cluster on this machine, in the same namespace: its agent's
    # tasks work there (before, this cluster's agent removed it, as not among its nodes)
    elsewhere = node_tmp / f"corral-corral-{agents.agent_name('c' * 56)}"
    for top in (gone, other, mine, elsewhere):
        (top / "corral-worker-0-old-x").mkdir(parents=True)
        (top / "corral-worker-0-old-x" / "model.bin").write_bytes(b"left behind")
    unrelated = node_tmp / "corral-unrelated"
    unrelated.mkdir()
    ex = cluster.RayExecutor("127.0.0.1:1")
    try:
        gate = tmp_path / "gate"
        handle = ex.launch(spec_for(tmp_path / "home", "f1", argv=(
            "/bin/sh", "-c", f"pwd; while [ ! -e {gate} ]; do sleep 0.05; done")))
        factories.wait_for(lambda: "corral-worker-0-f1-" in log_of_handle(handle),
                           timeout=10, what="the task to start")
        assert not gone.exists() and unrelated.exists()
        assert (other / "corral-worker-0-old-x" / "model.bin").exists()
        assert (elsewhere / "corral-worker-0-old-x" / "model.bin").exists()
        [left] = mine.iterdir()  # what its last agent left went with it
        assert left.name.startswith("corral-worker-0-f1-")
        gate.touch()
        assert ended(ex, handle).exit_code == 0
        ex.release(handle)
    finally:
        ex.close()


def test_code_staged_ahead_is_what_the_launch_ships_and_is_not_packed_again(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor,
        monkeypatch: pytest.MonkeyPatch) -> None:
    code = factories.write_code(tmp_path, "print('staged')\n")
    puts: list[int] = []
    real_put = executor._ray.put

    def counted(value: Any) -> Any:
        puts.append(len(value))
        return real_put(value)

    monkeypatch.setattr(executor._ray, "put", counted)
    executor.stage_code(NODE_A, str(code))
    assert len(puts) == 1
    spec = dataclasses.replace(
        spec_for(tmp_path / "home", "c1", argv=(sys.executable, f"{code}/train.py")),
        code_dir=str(code), cwd=str(code))
    handle = executor.launch(spec)
    assert ended(executor, handle).exit_code == 0
    assert log_of(spec).strip() == "staged"
    assert len(puts) == 1  # the launch took the staged tar
    executor.release(handle)


def test_code_that_cannot_be_staged_is_a_launch_error(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor) -> None:
    with pytest.raises(errors.LaunchError, match="cannot ship the code to Ray"):
        executor.stage_code(NODE_A, str(tmp_path / "no-such-code"))


def log_of_handle(handle: base.Handle) -> str:
    path = pathlib.Path(tasks.log_path(handle))
    return path.read_text() if path.exists() else ""


def test_nothing_is_removed_when_an_agent_does_not_say_what_it_holds(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_for(tmp_path / "home", "q1")
    first = cluster.RayExecutor("127.0.0.1:1")
    name, _group = first._groups.reserve(spec, "a" * 56)
    first.launch(spec_for(tmp_path / "home", "q2", job="job2"))  # (starts node a's agent)
    first.close()
    monkeypatch.setattr(slots, "SWEEP_TIMEOUT", 0.2)
    monkeypatch.setattr(actor.NodeAgent, "groups", lambda self: time.sleep(2) or [])
    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert name in fake.groups  # an agent too slow to answer: it may hold it
    finally:
        second.close()


def shaped(spec: base.LaunchSpec, cpu: int) -> base.LaunchSpec:
    return dataclasses.replace(spec, demand=resources.Resources(cpu=cpu, memory_mb=256))


def test_an_ended_tasks_reservation_serves_the_next_task_of_its_shape_on_its_node(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster) -> None:
    home = tmp_path / "home"
    made = []
    for i in range(3):
        handle = executor.launch(spec_for(home, f"s{i}", job=f"job{i}"))
        assert ended(executor, handle).exit_code == 0
        executor.release(handle)
        made.append(handle.group)
    # One placement group, made once and kept between the tasks (Ray would place a new
    # one on what the last gave back only about a second later).
    assert len(set(made)) == 1 and made[0].startswith(slots.SLOT_PREFIX)
    assert list(fake.groups) == [made[0]] and fake.removed == []

    # Another shape on that node: what the idle one holds goes back to Ray first.
    handle = executor.launch(shaped(spec_for(home, "big", job="jobbig"), cpu=2))
    assert fake.removed == [made[0]]
    assert list(fake.groups) == [handle.group] and handle.group != made[0]
    assert fake.groups[handle.group].bundles == [{"CPU": 2, "memory": 256.0 * 2**20}]
    assert ended(executor, handle).exit_code == 0
    executor.release(handle)


def test_a_reservation_is_kept_only_for_a_while_and_only_after_a_clean_end(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    handle = executor.launch(spec_for(home, "k1"))
    assert ended(executor, handle).exit_code == 0
    executor.release(handle)
    assert list(fake.groups) == [handle.group]
    monkeypatch.setattr(slots, "SLOT_KEEP", 0.1)
    factories.wait_for(lambda: fake.groups == {}, timeout=10,
                       what="the idle reservation to be given back")
    assert fake.removed == [handle.group]

    # A task released before it ended (stopped, lost): its group goes at once.
    monkeypatch.setattr(slots, "SLOT_KEEP", 60.0)
    gate = tmp_path / "never"
    running = executor.launch(spec_for(home, "k2", argv=(
        "/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")))
    executor.release(running)
    assert running.group not in fake.groups and running.group in fake.removed


def test_a_restarted_server_keeps_running_tasks_reservations_and_removes_idle_ones(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    gate = tmp_path / "gate"
    first = cluster.RayExecutor("127.0.0.1:1")
    waiting = first.launch(spec_for(home, "r1", argv=(
        "/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")))
    done = first.launch(spec_for(home, "r2", job="job2"))
    assert ended(first, done).exit_code == 0
    first.release(done)  # kept idle for the next task ...
    monkeypatch.setattr(first._groups, "expire", lambda keep: None)
    first.close()  # ... when the server was killed
    assert set(fake.groups) == {waiting.group, done.group}

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert set(fake.groups) == {waiting.group}  # the running task's stays
        assert second.adopt(waiting).state is base.State.RUNNING
        gate.touch()
        assert ended(second, waiting).exit_code == 0
        second.release(waiting)  # not made by this server: removed, not kept
        assert fake.groups == {}
    finally:
        second.close()


def test_a_server_killed_before_it_released_an_ended_task_leaves_no_reservation_behind(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path) -> None:
    """The end was recorded, the server killed before it told the agent it was done with
    the task: the next server frees the task's resources and still reads its end."""
    home = tmp_path / "home"
    first = cluster.RayExecutor("127.0.0.1:1")
    done = first.launch(spec_for(home, "e1"))
    assert ended(first, done).exit_code == 0
    first.close()  # killed before `release`
    assert list(fake.groups) == [done.group]

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert fake.groups == {} and done.group in fake.removed
        status = ended(second, done)
        assert status.state is base.State.EXITED and status.exit_code == 0
        second.release(done)
        assert fake.groups == {}
    finally:
        second.close()


def test_a_task_retired_while_its_resources_are_awaited_never_starts(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster) -> None:
    fake.room = False  # its placement group is never placed
    marker = tmp_path / "ran"
    spec = spec_for(tmp_path / "home", "w1", argv=("/bin/sh", "-c", f"touch {marker}"))
    handle = executor.launch(spec)
    [start] = fake.answers("start")
    time.sleep(0.2)
    assert not start.fut.done()  # waiting for its resources
    executor.release(handle)
    assert start.fut.result(timeout=5) is True  # its agent stopped waiting for it
    [wait] = fake.answers("wait")
    # Nor does a call wait for it for ever. (The server tells the agent it is done with the
    # task and gives its reservation back at once: the agent sees either first, and ends
    # the call as if the task were killed, or with 127, its reservation gone.)
    assert wait.fut.result(timeout=5) in (137, 127)
    assert not marker.exists()


def test_a_task_whose_reservation_is_removed_before_it_is_placed_ends_and_says_why(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster) -> None:
    fake.room = False  # not placed yet, when a starting server's sweep removes it
    marker = tmp_path / "ran"
    spec = spec_for(tmp_path / "home", "w2", argv=("/bin/sh", "-c", f"touch {marker}"))
    handle = executor.launch(spec)
    time.sleep(0.2)
    fake.remove_placement_group(fake.groups[handle.group])
    status = ended(executor, handle)  # (before, it waited for it, and ran, for ever)
    assert status.state is base.State.EXITED and status.exit_code == 127
    assert "its reservation of resources is gone" in log_of(spec)
    assert not marker.exists()


# --- inputs shipped to the node --------------------------------------------------------


def make_inputs(top: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A folder of inputs (nested, a file of several pieces, an empty file, a link that
    must not be followed) and a lone input file."""
    data = top / "data"
    (data / "sub" / "deeper").mkdir(parents=True)
    (data / "a.txt").write_text("alpha")
    (data / "empty").write_bytes(b"")
    (data / "sub" / "big.bin").write_bytes(os.urandom(25_000))
    (data / "sub" / "deeper" / "c.txt").write_text("gamma")
    (data / "emptydir").mkdir()
    secret = top / "secret.key"
    secret.write_text("not for tasks")
    (data / "link").symlink_to(secret)
    lone = top / "labels.csv"
    lone.write_text("x,y\n1,2\n")
    return data, lone


def listed(log: str) -> dict[str, dict[str, str]]:
    """{input name: {file: sha256}} as the READER task printed them."""
    out: dict[str, dict[str, str]] = {}
    for line in log.splitlines():
        if line.startswith("FILE "):
            _, name, rel, digest = line.split()
            out.setdefault(name, {})[rel] = digest
    return out


def digests(path: pathlib.Path) -> dict[str, str]:
    """{file: sha256} of an input as the server has it (links left out)."""
    paths = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return {(p.name if p == path else str(p.relative_to(path))):
            hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def reader(data: pathlib.Path, lone: pathlib.Path) -> tuple[str, ...]:
    return (sys.executable, "-c", READER, f"--data_url={data}", f"--labels={lone}")


def test_inputs_reach_the_node_in_bounded_pieces_and_go_with_the_task(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster,
        node_tmp: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "CHUNK", 4096)
    data, lone = make_inputs(tmp_path / "server")
    spec = spec_for(tmp_path / "home", "l1", argv=reader(data, lone),
                    input_dirs=(str(data), str(lone)))
    handle = executor.launch(spec)
    assert ended(executor, handle).exit_code == 0
    log = log_of(spec)
    paths = dict(line.split()[1:] for line in log.splitlines() if line.startswith("PATH "))
    # The task read copies in its node's scratch, not the server's files ...
    assert all(p.startswith(str(node_tmp)) for p in paths.values()), paths
    assert os.path.basename(paths["labels"]) == "labels.csv"
    # ... and they are the same files, but for the link (not followed); the empty folder
    # is there too.
    assert listed(log) == {"data_url": digests(data), "labels": digests(lone)}
    assert "link" not in listed(log)["data_url"] and "sub/big.bin" in listed(log)["data_url"]
    assert os.path.isdir(os.path.join(paths["data_url"], "emptydir"))
    assert "corral: inputs copied to this node: 5 file(s), 0.0 MB" in log
    # No call carried more than a piece's worth.
    writes = fake.called("input_write")
    assert len(writes) > 25_000 // 4096
    assert max(sum(len(p[5]) for p in args[1]) for args in writes) <= 4096

    executor.release(handle)
    factories.wait_for(lambda: not os.path.exists(paths["data_url"]), timeout=10,
                       what="the node's copy to go with the task")


#: a task that reads the checkpoint its output channel held, and adds a file beside it
RESUMER = """
import hashlib, os, sys
out = dict(a[2:].split("=", 1) for a in sys.argv[1:])["train_url"]
print("OUT", out)
print("CKPT", hashlib.sha256(open(os.path.join(out, "ckpt", "model.bin"), "rb").read()).hexdigest())
open(os.path.join(out, "epoch2.txt"), "w").write("trained further")
"""


def test_what_an_output_channel_held_reaches_the_node_in_pieces_and_is_not_copied_back(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster,
        node_tmp: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "CHUNK", 4096)
    out = tmp_path / "server" / "train"
    (out / "ckpt").mkdir(parents=True)
    blob = os.urandom(30_000)  # a resumed version's checkpoint, of several pieces
    (out / "ckpt" / "model.bin").write_bytes(blob)
    spec = dataclasses.replace(
        spec_for(tmp_path / "home", "s1", argv=(sys.executable, "-c", RESUMER,
                                                f"--train_url={out}")),
        output_dirs=(str(out),))
    handle = executor.launch(spec)
    assert ended(executor, handle).exit_code == 0
    log = log_of(spec)
    there = next(line.split()[1] for line in log.splitlines() if line.startswith("OUT "))
    assert there.startswith(str(node_tmp))  # the task's own copy on its node
    assert f"CKPT {hashlib.sha256(blob).hexdigest()}" in log
    writes = fake.called("input_write")
    assert len(writes) > 30_000 // 4096
    assert max(sum(len(p[5]) for p in args[1]) for args in writes) <= 4096
    # What it wrote came back; what it started with and left alone was not sent back.
    assert (out / "epoch2.txt").read_text() == "trained further"
    assert (out / "ckpt" / "model.bin").read_bytes() == blob
    assert {args[2] for args in fake.called("read_file")} == {"epoch2.txt"}
    executor.release(handle)


def test_a_gangs_tasks_on_one_node_share_one_copy(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor, fake: Cluster,
        node_tmp: pathlib.Path) -> None:
    data, lone = make_inputs(tmp_path / "server")
    specs = [spec_for(tmp_path / "home", f"g{rank}", task=f"worker-{rank}",
                      argv=reader(data, lone), gang=(NODE_A, NODE_A),
                      input_dirs=(str(data), str(lone))) for rank in (0, 1)]
    handles = [executor.launch(s) for s in specs]
    assert [ended(executor, h).exit_code for h in handles] == [0, 0]
    seen = [[ln for ln in log_of(s).splitlines() if ln.startswith("PATH data_url")]
            for s in specs]
    assert seen[0] == seen[1]  # the same folder on the node
    shipped = {(args[1][0][0], args[1][0][1]) for args in fake.called("input_write")}
    assert len(fake.called("input_done")) == 1 and shipped
    executor.release(handles[0])
    path = seen[0][0].split()[2]
    assert os.path.isdir(path)  # the other task still has it
    executor.release(handles[1])
    factories.wait_for(lambda: not os.path.exists(path), timeout=10,
                       what="the copy to go with the last task")


def test_a_restarted_server_ships_only_what_the_node_lacks(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    data, lone = make_inputs(tmp_path / "server")
    spec = spec_for(tmp_path / "home", "r1", argv=reader(data, lone),
                    input_dirs=(str(data), str(lone)))
    first = cluster.RayExecutor("127.0.0.1:1")
    with monkeypatch.context() as mp:  # the server goes after shipping one file
        def one_file(self: Any, node_id: str, agent: Any, launch_id: str,
                     shipped: inputs.Inputs, followed: Any = None) -> None:
            fake.get(agent.input_have.remote(launch_id))  # its start is there
            piece = (0, "a.txt", 5, 0o644, 0, b"alpha")
            fake.get(agent.input_write.remote(launch_id, [piece]))
        mp.setattr(inputs.Shipper, "ship", one_file)
        handle = first.launch(spec)
    first.close()
    assert waits_for_inputs(fake, handle)

    second = cluster.RayExecutor("127.0.0.1:1")
    try:
        assert second.adopt(handle).state is base.State.RUNNING
        assert ended(second, handle).exit_code == 0
        sent = [p[1] for args in fake.called("input_write")[1:] for p in args[1]]
        assert "a.txt" not in sent and "labels.csv" in sent
        assert listed(log_of(spec))["data_url"]["a.txt"] == digests(data)["a.txt"]
    finally:
        second.close()


def waits_for_inputs(c: Cluster, handle: base.Handle) -> bool:
    """The task waits for the rest of its inputs (its agent holds it back)."""
    agent = c.get_actor(handle.actor)
    return bool(c.get(agent.state.remote(handle.launch_id)) == "running")


def test_inputs_the_server_cannot_read_fail_the_task_saying_why(
        tmp_path: pathlib.Path, executor: cluster.RayExecutor,
        monkeypatch: pytest.MonkeyPatch) -> None:
    data, lone = make_inputs(tmp_path / "server")

    def unreadable(*args: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(data))

    monkeypatch.setattr(inputs, "listing", unreadable)
    spec = spec_for(tmp_path / "home", "f1", argv=reader(data, lone), input_dirs=(str(data),))
    handle = executor.launch(spec)
    assert ended(executor, handle).exit_code == 127
    assert (f"corral: cannot start worker-0: its inputs did not reach this node: [Errno 13] "
            f"Permission denied: '{data}'") in log_of(spec)


def test_on_a_shared_file_system_inputs_are_read_where_they_are(
        tmp_path: pathlib.Path, fake: Cluster, node_tmp: pathlib.Path,
) -> None:
    data, lone = make_inputs(tmp_path / "server")
    ex = cluster.RayExecutor("127.0.0.1:1", shared_fs=True)
    try:
        spec = spec_for(tmp_path / "home", "s1", argv=reader(data, lone),
                        input_dirs=(str(data), str(lone)))
        handle = ex.launch(spec)
        assert ended(ex, handle).exit_code == 0
        assert f"PATH data_url {data}" in log_of(spec)
        assert not fake.called("input_have")
        assert files.plan(spec.control_dir, spec.task, spec.launch_id)["inputs"] is None
    finally:
        ex.close()


def test_with_run_as_only_what_that_user_may_read_here_is_shipped() -> None:
    top = pathlib.Path(tempfile.mkdtemp(prefix="corral-inputs-test-"))  # in others' reach
    top.chmod(0o755)
    data, lone = make_inputs(top)
    data.chmod(0o755)
    (data / "a.txt").chmod(0o600)  # the server's alone
    (data / "sub").chmod(0o750)  # its group's
    lone.chmod(0o644)
    them = walk.Reader(uid=os.geteuid() + 4242, gids=frozenset({os.getegid() + 4242}))
    if not them.reaches(str(data)):
        pytest.skip(f"{top} is out of others' reach here")
    found = inputs.listing((str(data), str(lone)), them)
    assert sorted(f.rel for f in found.files) == ["empty", "labels.csv"]
    assert sorted(found.denied) == [str(data / "a.txt"), str(data / "sub")]
    assert found.dirs == [(0, "emptydir")]
    kin = walk.Reader(uid=os.geteuid() + 4242, gids=frozenset({os.getegid()}))
    assert {f.rel for f in inputs.listing((str(data),), kin).files} == {
        "empty", "sub/big.bin", "sub/deeper/c.txt"}
    assert folders.reader_of(None) is None
    assert folders.reader_of("no-such-user-here") == walk.Reader(-1)
    shutil.rmtree(top)
